"""``FIRST_RUN_PRELUDE=trn1_prelude:trn1`` (bench/first_run_xla.py in the lane): this process's ``xla``
as a trn1 sees it, as the ``trn1`` fixture of conftest.py does: the fake torch-neuronx 2.9
distribution metadata (``TRN1_SITE``) on sys.path, and ``PJRT_DEVICE`` unset for trnplan (torch-xla
keeps running XLA:CPU)."""

from __future__ import annotations

import os
import sys


def trn1() -> None:
    sys.path.insert(0, os.environ["TRN1_SITE"])
    from trnplan.core import config

    config.pjrt_device = lambda: None
