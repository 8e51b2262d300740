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

Reduced-precision modes (bf16, bf16x3, bf16x6, tf32) keep data and elementwise work in fp32
and round or split only the GEMM operands: their error is the fp32 model of the solver combined
with :func:`gemm_error` for its GEMM stages, read through the device's precision probe.

Constants are per storage precision: fp64 runs on dgemm and fp64 constants whose errors grow a little
faster with n (relative to u) than fp32's do on this CPU.

The constants in each solver are fitted to the measurements in ``bench/accuracy.py`` (see
docs/precision.md), rounded *up* so that the prediction bounds what was measured: the planner
uses it to reject trees whose predicted error exceeds the bound.
"""

from __future__ import annotations

import math

import numpy as np
import torch

#: the storage (and elementwise) precision of each mode: the bf16 modes and tf32 keep their data
#: in float32 and only round or split the operands of matrix-engine GEMMs
STORAGE = {"fp32": "fp32", "fp64": "fp64", "bf16": "fp32", "bf16x3": "fp32", "bf16x6": "fp32", "tf32": "fp32"}

#: unit roundoff of each mode's *storage and elementwise* arithmetic (the GEMM operand rounding
#: of the reduced modes is :data:`GEMM_STAGE_ERROR`)
UNIT_ROUNDOFF = {mode: (2.0**-53 if storage == "fp64" else 2.0**-24) for mode, storage in STORAGE.items()}

#: default relative L2 error bound a plan must be predicted to meet, per precision: the bars of
#: the precision-modes issue (relative L2 vs numpy complex128 on seeded complex normal input,
#: n = 2^4 … 2^20, primes and mixed sizes; docs/precision.md). fp32's 5e-7 is ~8 u32 and at
#: most 2× scipy.fft's complex64 error over that grid (bench/accuracy.py); fp64's 1e-13 is
#: ~900 u64; bf16's 4e-3 is ~1 u_bf16 (2^-8), bf16x3's 1e-5 and bf16x6's 5e-7 are what two
#: and three bf16 slices (2^-16, 2^-24 truncation) leave after several GEMM stages; tf32's 2e-3
#: is ~4 u_tf32 (2^-11). "auto" without tol targets the fp32 bar for complex64 data (the
#: accuracy a user of complex64 expects) and the fp64 bar for complex128.
DEFAULT_TOL = {"fp32": 5e-7, "fp64": 1e-13, "bf16": 4e-3, "bf16x3": 1e-5, "bf16x6": 5e-7, "tf32": 2e-3}

#: relative L2 error one GEMM stage adds by rounding or splitting its operands to the matrix
#: engine's format, on random input: flat in the contraction length (each output is perturbed by
#: the relative rounding of its terms, whose squares sum to the output's), so a tree of s GEMM
#: stages adds √s times this. Keys are the *effective* GEMM accuracy (:func:`gemm_accuracy`):
#: "bf16-rounded" is a bf16 engine that rounds each product before accumulating (trn1/trn2, per
#: the seed project's 1.7e-3 for its Ozaki modes), which makes every split mode bf16-accurate.
#: Two kinds of stage: "dense" (a DFT-GEMM: every constant entry is rounded) and "radix" (a
#: Stockham radix-8/4/2 butterfly matrix, whose ±1, ±i entries are exact in bf16). Fitted with
#: bench/accuracy.py on this CPU as max over the grid of measured/(√s·(1 + 1.5/√(n·batch))) —
#: dense: bf16 2.13e-3, bf16x3 3.94e-6, bf16x6 1.21e-7; radix: bf16 1.71e-3, bf16x3 2.80e-6,
#: bf16x6 5.0e-8 — and rounded up ~8%; bf16 dense again to 2.45e-3 after the planner's picks
#: measured 2.30e-3 per stage on non-power-of-two leaves (four-step 1000 and 10000: 3.25e-3,
#: 3.28e-3 over two stages; their DFT matrices have fewer entries exact in bf16). tf32 is not measured here (no GPU run): 2^-11 scaled by
#: bf16's measured/unit-roundoff ratio (0.55) gives 2.7e-4, taken as 4e-4.
GEMM_STAGE_ERROR = {
    "dense": {"fp32": 0.0, "fp64": 0.0, "bf16": 2.45e-3, "bf16x3": 4.2e-6, "bf16x6": 1.3e-7, "tf32": 4.0e-4,
              "bf16-rounded": 3.5e-3},
    "radix": {"fp32": 0.0, "fp64": 0.0, "bf16": 1.85e-3, "bf16x3": 3.0e-6, "bf16x6": 5.5e-8, "tf32": 4.0e-4,
              "bf16-rounded": 3.5e-3},
}
#: the measured error of a transform of few points is a noisy sample of the random-input error
#: (a relative L2 over 2·n·batch real values): bench/accuracy.py measured bf16 at 2.7e-3 for
#: 1×4 points where 4×1024 gives 2.1e-3, and bf16x3 4.7e-6 for a single point. A bound that must
#: hold for *every* input size is widened by 1 + SMALL_SAMPLE/√(n·batch) (2.5× at one point,
#: 1.02× at 4096)
SMALL_SAMPLE = 1.5


def storage(precision: str) -> str:
    """The storage precision of a mode ("fp32" or "fp64"): the key of per-solver constants."""
    return STORAGE[precision]


def gemm_accuracy(precision: str, probe=None) -> str:
    """The accuracy a GEMM in mode ``precision`` really reaches on a device, given its probe.

    Where the precision probe found that bf16 products do not reach the fp32 accumulator
    exactly, every bf16 mode is only "bf16-rounded"-accurate; where an fp32 matmul is not really
    fp32 (auto-cast to bf16 or TF32), fp32 GEMMs are predicted at that accuracy.
    """
    if probe is None:
        return precision
    if precision in ("bf16", "bf16x3", "bf16x6") and not probe.bf16_products_exact:
        return "bf16-rounded"
    if precision == "fp32":
        return probe.fp32_matmul
    return precision


def gemm_error(precision: str, stages: int, probe=None, points: int = 1 << 30, kind: str = "dense") -> float:
    """Relative error that ``stages`` GEMM stages of ``kind`` ("dense" or "radix") add in mode
    ``precision`` (0 for true fp32/fp64) to a transform of ``points`` = n·batch values (see
    :data:`SMALL_SAMPLE`)."""
    e = GEMM_STAGE_ERROR[kind][gemm_accuracy(precision, probe)] * math.sqrt(stages)
    return e * (1.0 + SMALL_SAMPLE / math.sqrt(max(points, 1)))


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


# ---------------------------------------------------------------- the measurement the model is checked against

#: the seed of the verification input: the same input on every run, so stored errors compare
SEED = 20240605


def reference(problem, x: np.ndarray) -> np.ndarray:
    """numpy.fft in float64/complex128 over the problem's last ``rank`` axes, with its norm."""
    axes = tuple(range(-problem.rank, 0))
    if problem.r2r:  # scipy.fft's DCT/DST in float64 (pocketfft; scipy is needed only for these kinds)
        import scipy.fft  # deferred: an optional dependency, needed only for the r2r kinds

        name = ("i" if problem.inverse else "") + problem.kind[:3] + "n"
        with scipy.fft.set_backend("scipy", only=True):  # scipy's own, even where trnplan is its backend
            return getattr(scipy.fft, name)(x, type=int(problem.kind[3]), axes=axes, norm=problem.norm)
    if problem.modes and problem.kind == "r2c":
        return np.fft.rfftn(x, axes=axes, norm=problem.norm)[kept_index(problem)]
    if problem.modes:  # c2r of the kept spectrum, every other bin zero
        full = np.zeros((*x.shape[: x.ndim - problem.rank], *problem.shape[:-1], problem.half), dtype=x.dtype)
        full[kept_index(problem)] = x
        return np.fft.irfftn(full, s=problem.shape, axes=axes, norm=problem.norm)
    if problem.kind == "r2c":
        return np.fft.rfftn(x, axes=axes, norm=problem.norm)
    if problem.kind == "c2r":
        return np.fft.irfftn(x, s=problem.shape, axes=axes, norm=problem.norm)
    fn = np.fft.ifftn if problem.inverse else np.fft.fftn
    return fn(x, axes=axes, norm=problem.norm)


def kept_index(problem) -> tuple:
    """The numpy index of a truncated problem's kept spectrum in the full half spectrum (batch axis
    first): the lowest and highest ``m`` rows of every axis but the last (the lowest only on the
    axes in ``problem.low``), the lowest ``m`` bins of it (``Problem.kept_rows``)."""
    return (Ellipsis, *np.ix_(*(np.asarray(problem.kept_rows(axis)) for axis in range(problem.rank))))


def seeded_input(problem, seed: int = SEED) -> np.ndarray:
    """The verification input, float64/complex128: complex normal (c2c, c2r) or real normal (r2c).

    For c2r the input is the half spectrum of a real signal (numpy.fft.rfftn of real normal
    data), so that it is Hermitian-consistent and the transform is exactly invertible.
    """
    rng = np.random.default_rng(seed)
    shape = (problem.batch, *problem.shape)
    if problem.real_input:
        return rng.standard_normal(shape)
    if problem.kind == "c2r":
        half = np.fft.rfftn(rng.standard_normal(shape), axes=tuple(range(-problem.rank, 0)))
        return half[kept_index(problem)] if problem.modes else half
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def measure_error(plan, seed: int = SEED) -> float:
    """Relative L2 error ‖y − ref‖/‖ref‖ of ``plan`` on seeded random input vs float64 numpy.fft.

    Parameters
    ----------
    plan : Plan
        Any plan (c2c, r2c, c2r, any rank); run once through :meth:`Plan.execute_split`, split and
        packed on the host (so it also measures a plan on a device that holds no complex data).
    seed : int, optional
        Seed of the input (default :data:`SEED`).

    Returns
    -------
    float
        The measured relative L2 error.
    """
    p = plan.problem
    x = seeded_input(p, seed)

    def put(a):
        return torch.from_numpy(np.ascontiguousarray(a)).to(p.real_dtype).to(plan.device)

    with torch.no_grad():
        y = plan.execute_split(put(x) if p.real_input else (put(x.real), put(x.imag)))
    if isinstance(y, tuple):
        y = y[0].detach().cpu().numpy().astype(np.float64) + 1j * y[1].detach().cpu().numpy().astype(np.float64)
    else:
        y = y.detach().cpu().numpy().astype(np.float64)
    ref = reference(p, x)
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(y - ref) / (denom if denom > 0 else 1.0))
