"""Run trnplan's benchmark suite (the same as ``trnplan bench``).

    python bench/suite.py [--quick] [--out bench/out/suite] [--docs docs/benchmarks.md]

See :mod:`trnplan.tools.benchsuite` for the rows, the columns and the outputs.
"""

from __future__ import annotations

import sys

from trnplan.tools import benchsuite

if __name__ == "__main__":
    sys.exit(benchsuite.main(benchsuite._standalone_parser().parse_args()))
