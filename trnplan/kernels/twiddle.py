"""Twiddle factors, DFT matrices and Bluestein chirps, computed exactly in float64.

Every constant is built on the host in float64 *after* reducing the integer phase index
exactly: ``exp(sign * 2πi * ((j*k) mod n) / n)``. Forming the angle in float32 (or forming
``j*k`` in float before reducing) is what cost the seed project's Bluestein its accuracy:
with k² > 2^24 the float32 angle is wrong in its leading bits and the error reached 9e-4 at
N = 8193 (../shared/FACTS.md). The results are cast once, by the caller, to the compute dtype.
"""

from __future__ import annotations

import numpy as np


def _unit_phase(index: np.ndarray, period: int, sign: int) -> np.ndarray:
    """exp(sign * 2πi * index / period) for integer ``index`` already reduced mod ``period``."""
    angle = (2.0 * np.pi / period) * index.astype(np.float64)
    return np.cos(angle) + 1j * (sign * np.sin(angle))


def dft_matrix(n: int, sign: int) -> np.ndarray:
    """The n×n DFT matrix ``W[j, k] = exp(sign·2πi·jk/n)`` as complex128.

    ``sign`` is -1 for the forward transform and +1 for the (unscaled) inverse.
    """
    j = np.arange(n, dtype=np.int64)
    return _unit_phase(np.outer(j, j) % n, n, sign)


def twiddle_table(rows: int, cols: int, n: int, sign: int) -> np.ndarray:
    """``T[a, b] = exp(sign·2πi·(a·b mod n)/n)`` for a < rows, b < cols, as complex128.

    This is the twiddle of a Cooley-Tukey split of a length-``n`` transform.
    """
    a = np.arange(rows, dtype=np.int64)[:, None]
    b = np.arange(cols, dtype=np.int64)[None, :]
    return _unit_phase((a * b) % n, n, sign)


def chirp(n: int, sign: int) -> np.ndarray:
    """Bluestein chirp ``w[j] = exp(sign·πi·j²/n)`` as complex128, j < n.

    ``j²`` is reduced modulo ``2n`` in int64 before the angle is formed (π·j²/n has period
    2n in j²), so the angle is exact to float64 rounding for every n < 2^31.
    """
    j = np.arange(n, dtype=np.int64)
    return _unit_phase((j * j) % (2 * n), 2 * n, sign)
