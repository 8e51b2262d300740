"""real: transforms of real data (r2c) and back to real data (c2r) along one axis.

A real signal of length n has a Hermitian spectrum, X[n−k] = conj(X[k]), so only the
``h = n//2 + 1`` values X[0..n/2] are kept (torch.fft.rfft's layout). Four ways to get them:

``method=half`` (even n; Cooley & Tukey's "two real transforms for the price of one",
    Press et al., *Numerical Recipes* §12.3)
    Pack z[j] = x[2j] + i·x[2j+1] and take ONE complex transform Z of length n/2 (a child plan).
    With E, O the spectra of the even and odd samples, E[k] = (Z[k] + conj Z[n/2−k])/2 and
    O[k] = (Z[k] − conj Z[n/2−k])/(2i), and X[k] = E[k] + ω_n^k·O[k]. The c2r direction runs the
    same algebra backwards: 2Z[k] = (X[k] + conj X[n/2−k]) + i·ω_n^−k·(X[k] − conj X[n/2−k]),
    one inverse complex transform of length n/2, and x[2j] = Re z[j], x[2j+1] = Im z[j].
    Half the work of a complex transform of length n.
``method=full`` (any n)
    The complex transform of length n with a zero imaginary part (c2r: of the Hermitian
    extension of the input), cropped (c2r: its real part). Twice the work of ``half``; the odd-n
    path.
``method=gemm`` (small n)
    One real GEMM: ``x @ [Re F | Im F]`` for r2c (n × 2h: half the multiply-adds of the complex
    dft-gemm), and ``[Re X | Im X] @ W`` for c2r, whose rows carry the Hermitian weights (1 for
    DC and Nyquist, 2 for the rest). Through :class:`trnplan.kernels.gemm.Gemm`, so precision
    modes apply.
``method=lib``
    The device library's own real transform (torch.fft.rfft / irfft), where there is one.

Like torch.fft.irfft, c2r ignores the imaginary parts of X[0] and (even n) X[n/2]: a real signal's
spectrum has none, and every method above zeroes them (or gives them zero weight) explicitly.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from trnplan.core.accuracy import UNIT_ROUNDOFF, combine, gemm_error, log_growth, sqrt_growth, storage
from trnplan.core.cost import Work, cmul_work, copy, elementwise, gemm_work
from trnplan.core.errors import PlanningError
from trnplan.kernels import cmul, dft_matrix, twiddle_table
from trnplan.kernels.gemm import Gemm
from trnplan.planner import native
from trnplan.planner.leafcost import LeafShape, leaf_work
from trnplan.planner.solver import (
    Solver,
    best_variant,
    itemsize,
    library_io,
    prime_factors,
)

METHODS = ("lib", "half", "full", "gemm")
#: the real DFT matrix of method=gemm has n × 2h values; beyond this n the O(n²) GEMM loses
#: to the O(n log n) paths on every profile and its √n error growth passes the fp32 bar
MAX_GEMM_N = 512
#: rounding of the half method's post-processing (a product with ω_n^k, two adds, a halving),
#: in units of u; the same constant as four-step's twiddle
ERROR_POST = 2.0
#: real-GEMM error u·(a + b·√n), n the contraction length: dft-gemm's unchunked constants, per
#: *storage* precision; a reduced mode (bf16, bf16x3, bf16x6, tf32) adds its one GEMM stage's
#: operand rounding (:func:`~trnplan.core.accuracy.gemm_error`), as dft-gemm does. Looking the mode
#: up here with an fp32 fallback priced bf16 r2c/c2r at fp32 error: predicted 2.9e-7, measured 2e-3
ERROR_GEMM = {"fp32": (2.5, 0.3), "fp64": (3.0, 0.45)}


def hermitian_weights(n: int) -> np.ndarray:
    """c_k of the half spectrum k = 0..n//2: 1 for DC and (even n) Nyquist, 2 for the rest.

    A c2r output is x[j] = Σ_k c_k·Re(X[k]·ω^{−jk}); the adjoint of r2c and of c2r (autograd)
    uses the same weights.
    """
    c = np.full(n // 2 + 1, 2.0)
    c[0] = 1.0
    if n % 2 == 0:
        c[-1] = 1.0
    return c


def ignored_imag_mask(n: int, ctx) -> torch.Tensor:
    """1 on the half spectrum except 0 at DC and (even n) Nyquist, whose imaginary parts
    torch.fft.irfft ignores; built once per module (a buffer), not per call."""
    mask = torch.ones(n // 2 + 1, dtype=ctx.dtype, device=ctx.device)
    mask[0] = 0
    if n % 2 == 0:
        mask[-1] = 0
    return mask


class RealLibrary(torch.nn.Module):
    """torch.fft.rfft / irfft on split tensors (the device library's real transform)."""

    def __init__(self, n: int, inverse: bool):
        super().__init__()
        self.n, self.inverse = n, inverse

    def library_call(self, norm: str | None = None):
        """The torch.fft function on the user-facing tensor (batch, in) → (batch, out), with ``norm``."""
        if self.inverse:
            return functools.partial(torch.fft.irfft, n=self.n, dim=-1, norm=norm or "forward")
        if (norm or "backward") == "backward":
            return torch.fft.rfft  # its defaults: no keywords to parse (as native's library_call)
        return functools.partial(torch.fft.rfft, dim=-1, norm=norm)

    def forward(self, *inputs):
        if self.inverse:
            return (self.library_call()(torch.complex(*inputs)),)
        y = self.library_call()(inputs[0])
        return y.real, y.imag


class RealHalf(torch.nn.Module):
    """r2c / c2r of even n through one complex transform of length n/2 (the child)."""

    def __init__(self, n: int, inverse: bool, child, ctx):
        super().__init__()
        self.n, self.inverse, self.child = n, inverse, child
        h = n // 2
        if inverse:
            t = 1j * twiddle_table(2, h, n, 1)[1]  # i·ω_n^{−k}, k < h
        else:
            t = -0.5j * twiddle_table(2, h + 1, n, -1)[1]  # −i·ω_n^k / 2, k ≤ h
        tr, ti = ctx.split_const(t)
        self.register_buffer("tr", tr)
        self.register_buffer("ti", ti)
        if inverse:
            self.register_buffer("imag_mask", ignored_imag_mask(n, ctx))

    def forward(self, *inputs):
        n, h = self.n, self.n // 2
        if not self.inverse:
            x = inputs[0]
            zr, zi = self.child(x[:, 0::2], x[:, 1::2])  # Z, length h
            ar, ai = torch.cat([zr, zr[:, :1]], 1), torch.cat([zi, zi[:, :1]], 1)  # Z[k mod h], k = 0..h
            br, bi = ar.flip(1), ai.flip(1)  # Z[h − k]
            dr, di = cmul(ar - br, ai + bi, self.tr, self.ti)  # (−i ω^k / 2)(Z[k] − conj Z[h−k])
            return 0.5 * (ar + br) + dr, 0.5 * (ai - bi) + di
        re, im = inputs
        im = im * self.imag_mask
        br, bi = re.flip(1)[:, :h], im.flip(1)[:, :h]  # X[h − k], k = 0..h−1
        ar, ai = re[:, :h], im[:, :h]
        dr, di = cmul(ar - br, ai + bi, self.tr, self.ti)  # i ω^{−k} (X[k] − conj X[h−k])
        zr, zi = self.child(ar + br + dr, ai - bi + di)  # n·(x_even + i·x_odd)
        return (torch.stack([zr, zi], dim=-1).reshape(re.shape[0], n),)


class RealFull(torch.nn.Module):
    """r2c / c2r of any n through the complex transform of length n (the child)."""

    def __init__(self, n: int, inverse: bool, child, ctx):
        super().__init__()
        self.n, self.inverse, self.child = n, inverse, child
        if inverse:
            self.register_buffer("imag_mask", ignored_imag_mask(n, ctx))

    def forward(self, *inputs):
        n, h = self.n, self.n // 2 + 1
        if not self.inverse:
            x = inputs[0]
            yr, yi = self.child(x, torch.zeros_like(x))
            return yr[:, :h], yi[:, :h]
        re, im = inputs
        im = im * self.imag_mask
        tail = slice(1, n - n // 2)  # X[n − k] for k = n//2 + 1 … n − 1, as conj X[k'] reversed
        fr = torch.cat([re, re[:, tail].flip(1)], 1)
        fi = torch.cat([im, -im[:, tail].flip(1)], 1)
        yr, _ = self.child(fr, fi)
        return (yr,)


def real_gemm_matrix(n: int, inverse: bool) -> np.ndarray:
    """The real DFT matrix of ``method=gemm`` (float64): r2c ``x @ [Re F | Im F]`` (n × 2h, the
    output's re and im halves one after the other), c2r ``[Re X | Im X] @ W`` (2h × n)."""
    h = n // 2 + 1
    f = dft_matrix(n, 1 if inverse else -1)[:, :h]  # F[j, k], k < h
    if not inverse:
        return np.concatenate([f.real, f.imag], axis=1)
    c = hermitian_weights(n)
    w = np.concatenate([c[:, None] * f.real.T, -c[:, None] * f.imag.T])  # rows: Re X[k], Im X[k]
    w[h] = 0.0  # Im X[0] is ignored
    if n % 2 == 0:
        w[2 * h - 1] = 0.0  # Im X[n/2] is ignored (sin(πj) is 1e-16, not 0, in float64)
    return w


class RealGemm(torch.nn.Module):
    """One real GEMM with the real DFT matrix (r2c: n × 2h; c2r: 2h × n)."""

    def __init__(self, n: int, inverse: bool, ctx, scale: float = 1.0):
        super().__init__()
        self.n, self.inverse, self.h = n, inverse, n // 2 + 1
        w = real_gemm_matrix(n, inverse)
        self.gemm = Gemm(w * scale if scale != 1.0 else w, ctx, side="right")

    def forward(self, *inputs):
        if self.inverse:
            return (self.gemm(torch.cat(inputs, dim=1)),)
        y = self.gemm(inputs[0])
        return y[:, : self.h], y[:, self.h :]


class Real(Solver):
    name = "real"
    #: 2: method=gemm's error and work follow the mode (bf16 splits); wisdom of version 1 priced
    #: bf16 r2c/c2r at fp32 error and is re-planned
    version = 4  # 3: the half/full child is planned to this node's own bound (a share, under nd); 4: MKL's fp64 floor
    composite = True
    kinds = ("r2c", "c2r")
    options = ("method",)
    word_options = ("method",)

    def why_not(self, problem, planner, forced):
        return None

    def why_not_spec(self, problem, spec):
        reason = super().why_not_spec(problem, spec)
        method = spec.option("method")
        if reason is None and method is not None:
            reason = self._why_not_method(problem, None, method)
        return reason

    def _why_not_method(self, problem, planner, method) -> str | None:
        n = problem.n
        if method not in METHODS:
            return f"real has no method {method!r} (methods: {', '.join(METHODS)})"
        if method == "half" and n % 2:
            return f"method=half needs an even n; n={n} is odd (method=full takes any n)"
        if method == "half" and n < 2:
            return "method=half needs n ≥ 2"
        if method == "gemm" and n > MAX_GEMM_N:
            return f"method=gemm is for n ≤ {MAX_GEMM_N} (its matrix is n × (n+2)); n={n}"
        if method == "lib" and planner is not None and not planner.has_native_fft(problem.precision):
            return f"the {problem.device} backend has no real FFT library for precision {problem.precision}"
        return None

    def plan(self, problem, planner, spec):
        forced = spec.option("method") if spec is not None else None
        methods = [forced] if forced else [m for m in METHODS if self._why_not_method(problem, planner, m) is None]
        if forced and (reason := self._why_not_method(problem, planner, forced)):
            raise PlanningError(reason)
        return best_variant(lambda m: self._plan_method(problem, planner, spec, m), methods,
                            tol=planner.tol(problem))

    def _plan_method(self, problem, planner, spec, method):
        n, b, size = problem.n, problem.batch, itemsize(problem)
        h = n // 2 + 1
        u = UNIT_ROUNDOFF[problem.precision]
        params = {"method": method}
        child_spec = spec.child(0) if spec is not None else None
        if method == "lib":
            p = max(prime_factors(n), default=1)
            # half a complex transform's nominal flops; the library's pass is in its measured rate;
            # packing split input is not (nor made at the root)
            shape = LeafShape.of(problem, native.PRIME_SLOWDOWN)
            work = library_io(problem, planner) + leaf_work(problem, planner, "real", shape)
            error = native.ERROR_C[problem.precision] * u * log_growth(n)
            if p > native.BLUESTEIN_PRIME:
                error *= native.LARGE_PRIME_GAIN
            if problem.device == "cpu":  # torch.fft's rfft is MKL there: r2c 510 measured 3.1e-15 in fp64
                error = max(error, native.mkl_fp64_floor(n, problem.precision))
            return self.node(problem, planner, work, error, params=params, direct=True)
        if method == "gemm":
            rows = 2 * h if problem.inverse else n
            flops = 2.0 * rows * (n if problem.inverse else 2 * h) * b
            work = Work(launches=2, bytes=(rows * b + 2 * h * b + n * 2 * h) * size)
            work += gemm_work(problem.precision, planner.profile, flops, rows * b, size,
                              shape=(b, rows, n if problem.inverse else 2 * h))
            if problem.inverse:
                work += copy(2 * h * b, size)  # cat [re | im]
            a, slope = ERROR_GEMM[storage(problem.precision)]
            error = u * (a + slope * sqrt_growth(rows))
            error = combine(error, gemm_error(problem.precision, 1, planner.probe, n * b))
            return self.node(problem, planner, work, error, params=params)
        # the child is planned to this node's own bound (a share, when a composite above plans this
        # node to one: planner.tol(problem)), less what this node adds: a child planned to the
        # default bar made an r2c pass of a 128³ nd plan miss its share by 1 % (2.92e-7 > 2.89e-7)
        tol = planner.tol(problem)
        if method == "half":
            post = ERROR_POST * u
            child = planner.plan(problem.unscaled(n // 2, b, problem.inverse), child_spec,
                                 tol=math.sqrt(tol * tol - post * post) if tol > post else tol)
            # flips, adds and the twiddle product on h complex values; c2r interleaves the output
            work = cmul_work(h * b, size) + elementwise(8, h * b, size) + copy(4 * h * b, size, launches=4)
            error = combine(child.error, post)
            return self.node(problem, planner, work, error, params=params, children=(child,))
        child = planner.plan(problem.unscaled(n, b, problem.inverse), child_spec, tol=tol)
        work = copy(2 * n * b, size, launches=3)  # zeros / Hermitian extension, crop
        return self.node(problem, planner, work, child.error, params=params, children=(child,))

    def runs_on_user_tensor(self, node):
        return node.param("method") == "lib"

    def scale_folds(self, node):
        return node.param("method") == "gemm"

    def build_scaled(self, node, ctx, scale):
        """method=gemm is one GEMM: the scale goes into its matrix."""
        return RealGemm(node.n, node.inverse, ctx, scale) if node.param("method") == "gemm" else None

    def build(self, node, ctx):
        method = node.param("method")
        if method == "lib":
            return RealLibrary(node.n, node.inverse)
        if method == "gemm":
            return RealGemm(node.n, node.inverse, ctx)
        child = ctx.build(node.children[0])
        if method == "half":
            return RealHalf(node.n, node.inverse, child, ctx)
        return RealFull(node.n, node.inverse, child, ctx)
