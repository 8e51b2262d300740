"""The accuracy model: predicted relative L2 error of a plan on random input.

Each solver predicts the error of its node from the precision's unit roundoff ``u`` and its
children's predicted errors; composites add their children's errors to their own rounding
(errors of independent stages add, to first order). The shapes follow the literature:

* Cooley–Tukey style FFTs (native, Stockham, radix-2): error grows as O(√log2 n) on random
  input (benchFFT's method; fp32 measured 8.7e-8 at n=64 … 1.5e-7 at 64K, ../shared/FACTS.md).
* Direct DFT as one GEMM: each output is an n-term dot product, so error grows as O(√n) with
  blocked fp32 accumulation (FACTS: 1.5e-7 → 3.4e-7 for n = 64 … 1024).
* Composite trees (four-step, Bluestein): their stages' errors and their own twiddle or chirp
  rounding, added in quadrature (:func:`combine`).

Constants are per precision: fp64 runs on dgemm and fp64 constants whose errors grow a little
faster with n (relative to u) than fp32's do on this CPU.

The constants in each solver are fitted to the measurements in ``bench/accuracy.py`` (see
docs/precision.md), rounded *up* so that the prediction bounds what was measured: the planner
uses it to reject trees whose predicted error exceeds the bound.
"""

from __future__ import annotations

import math

#: unit roundoff of each precision mode's arithmetic
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "fp64": 2.0**-53}

#: default relative L2 error bound a plan must be predicted to meet, per precision
#: (the accuracy bar of the engine: fp32 ≤ 1e-6, fp64 ≤ 1e-12 for every solver, n ≤ 2^16)
DEFAULT_TOL = {"fp32": 1e-6, "fp64": 1e-12}


def combine(*errors: float) -> float:
    """Relative errors of independent stages on random input add in quadrature (root-sum-square).

    A plain sum is a worst-case bound that the measurements never approach (a four-step tree of
    two fp32 leaves measures 1.4e-7 where the sum of its leaves' bounds is 1.1e-6); rounding
    errors of independent stages are uncorrelated, so their squares add.
    """
    return math.sqrt(sum(e * e for e in errors))


def log_growth(n: int) -> float:
    """√log2(n), at least 1: the random-input error growth of a Cooley–Tukey FFT."""
    return math.sqrt(max(1.0, math.log2(max(n, 2))))


def sqrt_growth(n: int) -> float:
    """√n: the error growth of an n-term dot product."""
    return math.sqrt(max(n, 1))
