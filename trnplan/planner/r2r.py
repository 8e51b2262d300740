"""r2r: the real-to-real transforms, DCT and DST of types I–IV (FFTW's REDFT/RODFT kinds).

Definitions, norms and inverses are scipy.fft's (``scipy.fft.dct``/``dst``/``idct``/``idst``;
Britanak, Yip & Rao, *Discrete Cosine and Sine Transforms*, 2007, ch. 2), unscaled ("backward"):

=====  ===================================================================================
dct1   y[k] = x[0] + (−1)^k x[N−1] + 2 Σ_{n=1}^{N−2} x[n] cos(π k n / (N−1))        (N ≥ 2)
dct2   y[k] = 2 Σ x[n] cos(π k (2n+1) / (2N))
dct3   y[k] = x[0] + 2 Σ_{n=1}^{N−1} x[n] cos(π n (2k+1) / (2N))
dct4   y[k] = 2 Σ x[n] cos(π (2k+1)(2n+1) / (4N))
dst1   y[k] = 2 Σ x[n] sin(π (k+1)(n+1) / (N+1))
dst2   y[k] = 2 Σ x[n] sin(π (k+1)(2n+1) / (2N))
dst3   y[k] = (−1)^k x[N−1] + 2 Σ_{n=0}^{N−2} x[n] sin(π (2k+1)(n+1) / (2N))
dst4   y[k] = 2 Σ x[n] sin(π (2k+1)(2n+1) / (4N))
=====  ===================================================================================

Every plan of these kinds computes ``T = s · diag(post) · U_e · diag(pre)``: ``U_e`` the unscaled
transform of the *effective* type (the inverse of type 2 is type 3 and back; types 1 and 4 are
their own inverses), ``s`` the norm's factor over the logical length ``L`` (2(N−1) for dct1,
2(N+1) for dst1, 2N otherwise) and ``pre``/``post`` scipy's "ortho" weights (√2 on the samples
its ``orthogonalize=True`` rescales). The Problem's own ``scale`` is 1: this solver applies the
whole norm (:func:`norm_factors`), so a tree of r2r nodes composes per axis as scipy.fft.dctn does.

Methods (the cost model chooses; ``strategy="(r2r method=fft …)"`` forces one):

``method=scipy``
    scipy.fft's pocketfft (``scipy.fft._pocketfft``, ``_duccfft`` from scipy 1.18, called directly so that a process whose
    scipy.fft backend is trnplan does not dispatch back to itself), whole shape, one call; CPU.
``method=gemm`` (1-D, n ≤ :data:`MAX_GEMM_N`)
    One real GEMM with the n × n matrix of ``T`` (norm folded in, float64 on the host, exact
    index reduction), through :class:`~trnplan.kernels.gemm.Gemm`, so the precision modes apply:
    the accelerators' lowering for short axes.
``method=fft`` (1-D)
    Through one child DFT planned by the planner (Makhoul, IEEE TASSP 28(1), 1980, and the
    symmetric extensions of Martucci, IEEE TSP 42(5), 1994): dct1 is the real part of the r2c of
    the even extension of length 2(N−1); dst1 minus the imaginary part of the r2c of the odd
    extension of length 2(N+1); dct2 the r2c of ``[x, reversed x]`` (length 2N) times
    ``e^{−iπk/2N}``; dct3 its adjoint, a c2r of length 2N of ``x[k]·e^{iπk/2N}``; dct4 the c2c of
    length 2N of ``x[n]·e^{−iπ(2n+1)/4N}`` zero-padded, times ``2e^{−iπk/2N}``; the DSTs II–IV are
    DCTs of the alternated or reversed input (dst2(x)[k] = dct2((−1)^n x)[N−1−k],
    dst3/dst4(x)[k] = (−1)^k dct3/dct4(reversed x)[k]). On an accelerator the child is a GEMM tree.
``method=rowcol`` (rank ≥ 2)
    One 1-D r2r child per axis (the transforms are separable), as the nd solver does for the DFT.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import torch

from trnplan.core.accuracy import SMALL_SAMPLE, UNIT_ROUNDOFF, combine, gemm_error, log_growth, sqrt_growth
from trnplan.core.cost import Work, copy, elementwise, gemm_work, transpose
from trnplan.core.errors import PlanningError
from trnplan.core.problem import R2R_KINDS
from trnplan.kernels import hostlib
from trnplan.kernels.gemm import Gemm
from trnplan.planner.leafcost import LeafShape, leaf_work, thread_factor
from trnplan.planner.library import ScipyFFT
from trnplan.planner.solver import Solver, WholeShape, best_variant, itemsize

METHODS = ("scipy", "gemm", "fft", "rowcol")
#: the n × n matrix of method=gemm: n² multiply-adds against O(n log n) for method=fft, and an
#: error growing as √n; beyond this n it loses on every profile (the real solver's limit)
MAX_GEMM_N = 512
#: real-GEMM error u·(a + b·√n), n the contraction length (the real solver's constants)
ERROR_GEMM = {"fp32": (2.5, 0.3), "fp64": (3.0, 0.45)}
#: the rounding method=fft adds around its child (a twiddle product, an add, the norm's scaling),
#: in units of u: the real solver's post-processing constant plus one for the scaling
ERROR_POST = 3.0
#: pocketfft's DCT/DST error c·u·√log2(L), L the logical length (fp32: 1.6, measured up to 1.39×
#: fp64 2.0, the library leaves' error_c), checked against scipy.fft in float64 by tests/test_r2r.py
ERROR_LIB = {"fp32": 1.6, "fp64": 2.0}
#: pocketfft's DCT/DST priced uncalibrated: (longest axis up to, multiplier on the nominal flops of the
#: real FFT under it, 2.5·L·log2 L for a length L), the profile's FFT rate and thread factor applied.
#: Measured 2026-11-27 (scipy 1.17.1, torch 1 thread, busy 2-vCPU box, least of 7 cells), dct2/dct3/
#: dct4/dst2 against the price then (the scipy c2c leaf's speeds, 10.4 up to 256 points): 64×1024
#: 1.8–1.9, 256×256 1.25–1.5, 1024×64 0.98–1.18, 4096×16 1.09–1.35, 16384×4 1.11–1.32 (times these
#: multipliers). The c2c leaf's 10.4 had priced it 5–7× its time at n ≤ 256, where the one-GEMM plan
#: then won on paper and ran 1.3–3× slower (128×512, 256×256, 256×16)
LIB_SPEED = ((128, 1.9), (256, 1.4), (8192, 1.2), (float("inf"), 1.35))
#: its fixed cost per call (a pypocketfft call from a tensor's numpy view, and the result's
#: tensor), µs: 2.0–2.5 measured (1024×4: 7.5 µs, 64×16: 3.8 µs; the scipy c2c leaf's
#: 10 µs beyond torch.fft's 8 µs had priced them at 23 and 25)
LIB_CALL_US = 2.5
#: method=gemm on the CPU profile in fp32: (multiplier on the priced traffic and products, fixed µs
#: per call). Measured 2026-11-27 (torch 1 thread, busy 2-vCPU box, least of 9 cells; dct2 and
#: dct4) against the price then (one 8 µs launch + the rest): n×batch 16×4096 30–32 µs (priced 48),
#: 32×4096 65–69 (117), 64×1024 63–67 (91), 128×512 104–108 (149), 256×256 204–217 (271),
#: 128×4096 818–852 (1116), and 15 µs at 32×64 (10): the products and traffic run at 0.5–0.75×
#: their price and the call (the Gemm module's Python, the fp32 matmul scope) costs ~14 µs, not 8.
#: 0.7 and 12 leave the GEMM priced at or above its time but for the largest row (0.96×).
GEMM_CPU = (0.7, 12.0)
#: the inverse of each type (scipy: idct type 2 is dct type 3 scaled, and so on)
INVERSE_TYPE = {1: 1, 2: 3, 3: 2, 4: 4}


def family(kind: str) -> tuple[str, int]:
    """``"dct2"`` → ``("dct", 2)``."""
    return kind[:3], int(kind[3])


def effective_kind(kind: str, inverse: bool) -> str:
    """The kind whose unscaled transform a plan of ``kind`` (inverse or not) runs: idct2 runs dct3."""
    fam, t = family(kind)
    return f"{fam}{INVERSE_TYPE[t] if inverse else t}"


def logical_length(kind: str, n: int) -> int:
    """The length of the DFT the transform is a symmetric part of: the divisor of its norms."""
    if kind == "dct1":
        return 2 * (n - 1)
    if kind == "dst1":
        return 2 * (n + 1)
    return 2 * n


def norm_factors(kind: str, n: int, inverse: bool, norm: str):
    """``(effective kind, s, pre, post)``: the plan computes ``s · post ⊙ U_e(pre ⊙ x)``.

    ``pre`` and ``post`` are float64 arrays of length ``n`` (ones but for "ortho", where scipy's
    ``orthogonalize=True`` multiplies the first/last input by √2 and divides the first/last output
    by √2, per type: scipy.fft.dct's Notes).
    """
    eff = effective_kind(kind, inverse)
    length = logical_length(eff, n)
    scaled = (norm == "forward") != inverse  # the side that carries 1/L
    s = 1.0 / math.sqrt(length) if norm == "ortho" else (1.0 / length if scaled else 1.0)
    pre, post = np.ones(n), np.ones(n)
    if norm == "ortho":
        r = math.sqrt(2.0)
        if eff == "dct1":
            pre[[0, -1]] *= r
            post[[0, -1]] /= r
        elif eff == "dct2":
            post[0] /= r
        elif eff == "dct3":
            pre[0] *= r
        elif eff == "dst2":
            post[-1] /= r
        elif eff == "dst3":
            pre[-1] *= r
    return eff, s, pre, post


def _edge_weights(eff: str, n: int) -> np.ndarray:
    """w with ``U_e = C_e · diag(w)`` for the types whose end samples carry weight 1/2 (dct1, dct3, dst3)."""
    w = np.ones(n)
    if eff == "dct1":
        w[[0, -1]] = 0.5
    elif eff == "dct3":
        w[0] = 0.5
    elif eff == "dst3":
        w[-1] = 0.5
    return w


def unscaled_matrix(eff: str, n: int) -> np.ndarray:
    """The float64 n × n matrix of the unscaled transform (``y = U @ x``), angles reduced exactly.

    Each entry is 2·w[j]·cos(π m/D) or 2·w[j]·sin(π m/D) with an integer m, reduced mod 2D before
    the angle is formed (the DFT matrices' rule), so no angle loses bits to a large argument.
    """
    k, j = np.arange(n)[:, None], np.arange(n)[None, :]
    fam, t = family(eff)
    if fam == "dct":
        m, d = {1: (k * j, max(n - 1, 1)), 2: (k * (2 * j + 1), 2 * n), 3: (j * (2 * k + 1), 2 * n),
                4: ((2 * k + 1) * (2 * j + 1), 4 * n)}[t]
        trig = np.cos
    else:
        m, d = {1: ((k + 1) * (j + 1), n + 1), 2: ((k + 1) * (2 * j + 1), 2 * n),
                3: ((2 * k + 1) * (j + 1), 2 * n), 4: ((2 * k + 1) * (2 * j + 1), 4 * n)}[t]
        trig = np.sin
    return 2.0 * trig(np.pi * (m % (2 * d)) / d) * _edge_weights(eff, n)[None, :]


def matrix(kind: str, n: int, inverse: bool, norm: str) -> np.ndarray:
    """The whole transform's float64 matrix ``T`` (``y = T @ x``), norm included."""
    eff, s, pre, post = norm_factors(kind, n, inverse, norm)
    return s * post[:, None] * unscaled_matrix(eff, n) * pre[None, :]


def adjoint_factors(kind: str, n: int, inverse: bool, norm: str):
    """``(kind', A, B)`` with ``Tᵀ g = A ⊙ U'(B ⊙ g)``, U' the unscaled forward transform of ``kind'``.

    From ``U_eᵀ = diag(a) · U_e' · diag(b)``: the cosine and sine matrices C of types 1 and 4 are
    symmetric and those of types 2 and 3 each other's transposes, so with the edge weights w
    (``U = C·diag(w)``): dct1 ``Uᵀ = diag(w) U diag(1/w)``; dct2 ``Uᵀ = U₃ diag(1/w₃)``; dct3
    ``Uᵀ = diag(w) U₂``; likewise for the DSTs; types 4 and dst1 are symmetric. Autograd's
    backward pass runs ``U'`` as another cached plan (``Plan.backward``).
    """
    eff, s, pre, post = norm_factors(kind, n, inverse, norm)
    fam, t = family(eff)
    adj = f"{fam}{INVERSE_TYPE[t]}"
    a, b = np.ones(n), np.ones(n)
    if t == 1 and fam == "dct":
        w = _edge_weights(eff, n)
        a, b = w, 1.0 / w
    elif t == 2:
        b = 1.0 / _edge_weights(adj, n)
    elif t == 3:
        a = _edge_weights(eff, n)
    return adj, s * pre * a, b * post


# ---------------------------------------------------------------------------- modules
class R2RLibrary(torch.nn.Module):
    """pocketfft's DCT/DST over the trailing axes, norm included, on (M, points) real tensors."""

    def __init__(self, shape: tuple, kind: str, inverse: bool, norm: str):
        super().__init__()
        self.shape = tuple(shape)
        # scipy's own pocketfft (never its uarray dispatch, which may be trnplan), called directly
        self.call = hostlib.r2r_call(self.shape, kind, inverse, norm)

    def library_call(self, norm: str | None = None):
        """The library's transform on the user-facing tensor ``(batch, *shape)`` (norm already in)."""
        return self.call

    def forward(self, x):
        return (self.call(x.reshape(x.shape[0], *self.shape)).reshape(x.shape[0], -1),)


class R2RGemm(torch.nn.Module):
    """``y = x @ Tᵀ``: one real GEMM with the whole transform's matrix."""

    def __init__(self, kind: str, n: int, inverse: bool, norm: str, ctx):
        super().__init__()
        self.gemm = Gemm(matrix(kind, n, inverse, norm).T, ctx, side="right")

    def forward(self, x):
        return (self.gemm(x),)


class R2RFFT(torch.nn.Module):
    """A DCT/DST through one child DFT (see the module docstring), then the norm's factors."""

    def __init__(self, kind: str, n: int, inverse: bool, norm: str, child, ctx):
        super().__init__()
        eff, s, pre, post = norm_factors(kind, n, inverse, norm)
        self.fam, self.t, self.n, self.child = eff[:3], int(eff[3]), n, child
        self.register_buffer("pre", ctx.const(pre))
        self.register_buffer("post", ctx.const(s * post))
        self.pre_ones = bool(np.all(pre == 1.0))
        k = np.arange(n)
        # e^{∓iπk/2N} (dct2, dct3, dct4 post) and e^{−iπ(2n+1)/4N} (dct4 pre), angles reduced exactly
        tw = np.exp(-1j * np.pi * (k % (4 * n)) / (2 * n))
        self.register_buffer("tr", ctx.const(tw.real))
        self.register_buffer("ti", ctx.const(tw.imag))
        pre4 = np.exp(-1j * np.pi * ((2 * k + 1) % (8 * n)) / (4 * n))
        self.register_buffer("pr", ctx.const(pre4.real))
        self.register_buffer("pi", ctx.const(pre4.imag))
        self.register_buffer("alt", ctx.const((-1.0) ** k))

    def _dct(self, x):
        n, t, zeros = self.n, self.t, torch.zeros_like(x[:, :1])  # zeros_like: on the Neuron allowlist
        if t == 1:
            ur, _ = self.child(torch.cat([x, x[:, 1:n - 1].flip(1)], 1))
            return ur[:, :n]
        if t == 2:
            ur, ui = self.child(torch.cat([x, x.flip(1)], 1))
            return ur[:, :n] * self.tr - ui[:, :n] * self.ti  # Re(e^{−iπk/2N} U[k]); ti = −sin
        if t == 3:
            vr = torch.cat([x * self.tr, zeros], 1)  # x[k]·e^{+iπk/2N}, and V[N] = 0
            vi = torch.cat([-x * self.ti, zeros], 1)
            (u,) = self.child(vr, vi)
            return u[:, :n]
        zr, zi = x * self.pr, x * self.pi
        pad = torch.zeros_like(x)
        ur, ui = self.child(torch.cat([zr, pad], 1), torch.cat([zi, pad], 1))
        return 2.0 * (ur[:, :n] * self.tr - ui[:, :n] * self.ti)

    def forward(self, x):
        if not self.pre_ones:
            x = x * self.pre
        if self.fam == "dst" and self.t == 1:
            zeros = torch.zeros_like(x[:, :1])
            _, ui = self.child(torch.cat([zeros, x, zeros, -x.flip(1)], 1))
            y = -ui[:, 1:self.n + 1]
        elif self.fam == "dst" and self.t == 2:
            y = self._dct(x * self.alt).flip(1)
        elif self.fam == "dst":
            y = self._dct(x.flip(1)) * self.alt
        else:
            y = self._dct(x)
        return (y * self.post,)


class R2RRowColumn(torch.nn.Module):
    """One 1-D r2r child per axis, the last axis first, on (M, points) real tensors."""

    def __init__(self, shape: tuple, children):
        super().__init__()
        self.shape = tuple(shape)
        self.passes = torch.nn.ModuleList(children)

    def forward(self, x):
        m, last = x.shape[0], len(self.shape)
        state = x.reshape(m, *self.shape)
        for i, child in enumerate(self.passes):
            dim = last - i
            moved = state.movedim(dim, -1) if dim != last else state
            (out,) = child(moved.reshape(-1, moved.shape[-1]))
            out = out.reshape(moved.shape)
            state = out.movedim(-1, dim) if dim != last else out
        return (state.reshape(m, -1),)


# ---------------------------------------------------------------------------- the solver
class R2R(WholeShape, Solver):
    name = "r2r"
    # 2: method=gemm priced and bounded per precision mode (gemm_work, gemm_error);
    # 3: method=scipy priced as pocketfft's DCT/DST runs (LIB_SPEED, LIB_CALL_US), dct1/dst1 at their logical length
    version = 3
    composite = True
    kinds = R2R_KINDS
    ranks = "any"
    takes_factors = True
    # kind= and norm= are in every node (a stored tree replays them; they must match the problem)
    options = ("method", "kind", "norm")
    word_options = ("method", "kind", "norm")

    def why_not(self, problem, planner, forced):
        return None

    def why_not_spec(self, problem, spec):
        reason = super().why_not_spec(problem, spec)  # WholeShape: the factors and kind=
        norm = spec.option("norm")
        if reason is None and norm is not None and norm != problem.norm:
            reason = f"the strategy's r2r node has norm={norm} but the problem's norm is {problem.norm}"
        method = spec.option("method")
        if reason is None and method is not None:
            reason = self._why_not_method(problem, None, method)
        return reason

    def _why_not_method(self, problem, planner, method) -> str | None:
        if method not in METHODS:
            return f"r2r has no method {method!r} (methods: {', '.join(METHODS)})"
        if method == "rowcol" and problem.rank < 2:
            return "method=rowcol is for rank ≥ 2 (a 1-D transform is method=gemm, fft or scipy)"
        if method in ("gemm", "fft") and problem.rank != 1:
            return f"method={method} plans one axis; shape {problem.shape} is planned by method=rowcol or scipy"
        if method == "gemm" and problem.n > MAX_GEMM_N:
            return f"method=gemm is for n ≤ {MAX_GEMM_N} (its matrix is n × n); n={problem.n}"
        if method == "scipy":
            return self._why_not_library(problem, planner)
        return None

    def _why_not_library(self, problem, planner) -> str | None:
        if problem.device != "cpu":
            return (f"method=scipy is a host-CPU leaf; on {problem.device!r} the r2r plan is a GEMM or FFT tree "
                    f"on the device (x.cpu() and device='cpu' runs it there)")
        if problem.precision not in ("fp32", "fp64"):
            return f"scipy computes in fp32 or fp64 only, not {problem.precision}"
        if planner is not None and planner.exportable:
            return "an artifact (compile='aot') cannot call a host library; it runs torch ops only"
        if hostlib.installed("scipy") is None:
            return "scipy is not installed (pip install scipy)"
        return None

    def plan(self, problem, planner, spec):
        forced = spec.option("method") if spec is not None else None
        if forced and (reason := self._why_not_method(problem, planner, forced)):
            raise PlanningError(reason)
        methods = [forced] if forced else [m for m in METHODS if self._why_not_method(problem, planner, m) is None]
        return best_variant(lambda m: self._plan_method(problem, planner, spec, m), methods,
                            tol=planner.tol(problem))

    def _plan_method(self, problem, planner, spec, method):
        u = UNIT_ROUNDOFF[problem.precision]
        params = {"method": method, "kind": problem.kind}
        if problem.norm != "backward":
            params["norm"] = problem.norm
        if problem.rank > 1:
            params["factors"] = problem.shape
        if method == "scipy":
            work, error = self._library_work(problem, planner), self._library_error(problem, u)
            return self.node(problem, planner, work, error, params=params, direct=True)
        if method == "gemm":
            n, b = problem.n, problem.batch
            # the error its GEMM stage adds (gemm_error: bf16 measured 2.2e-3 at n=64 where the fp32
            # terms alone said 2.9e-7)
            work = self._gemm_work(problem, planner)
            a, slope = ERROR_GEMM["fp64" if problem.precision == "fp64" else "fp32"]
            error = combine(u * (a + slope * sqrt_growth(n)), gemm_error(problem.precision, 1, planner.probe, n * b))
            return self.node(problem, planner, work, error, params=params)
        if method == "fft":
            return self._plan_fft(problem, planner, spec, params, u)
        return self._plan_rowcol(problem, planner, spec, params)

    @staticmethod
    def _gemm_work(problem, planner) -> Work:
        """method=gemm: the mode's products and operand splits (gemm_work), the operands' traffic;
        on the CPU in fp32, as measured (:data:`GEMM_CPU`)."""
        n, b, size = problem.n, problem.batch, itemsize(problem)
        work = Work(launches=1, bytes=(2 * n * b + n * n) * size)
        work += gemm_work(problem.precision, planner.profile, 2.0 * n * n * b, n * b, size, shape=(b, n, n))
        if planner.profile.name == "cpu" and problem.precision == "fp32":
            scale, call_us = GEMM_CPU
            work = work * scale + Work(launches=call_us / planner.profile.launch_us - scale)
        return work

    def _library_work(self, problem, planner) -> Work:
        """pocketfft's DCT/DST: one real FFT per axis of about N points (types 2–4; 2(N−1) for dct1,
        2(N+1) for dst1), plus its pre- and post-twiddles. With a fitted profile, that real FFT's
        fitted scipy price; uncalibrated, its nominal flops at :data:`LIB_SPEED` and :data:`LIB_CALL_US`."""
        shape = tuple(logical_length(problem.kind, n) if problem.kind in ("dct1", "dst1") else n
                      for n in problem.shape)
        real = attrs.evolve(problem, kind="r2c", inverse=False, norm="backward", shape=shape)
        leaf = LeafShape.of(real, ScipyFFT.prime_slowdown, calls=problem.rank)
        if "scipy" in planner.profile.leaves:
            return leaf_work(real, planner, "scipy", leaf)
        speed = next(f for limit, f in LIB_SPEED if max(shape) <= limit)
        flops = leaf.batch * (leaf.smooth + leaf.prime_part * (leaf.slowdown - 1.0))
        flops *= speed * thread_factor("scipy", planner.profile, leaf.batch)
        return Work(launches=problem.rank * LIB_CALL_US / planner.profile.launch_us, fft_flops=flops)

    @staticmethod
    def _library_error(problem, u) -> float:
        length = math.prod(logical_length(problem.kind, n) for n in problem.shape)
        error = ERROR_LIB["fp64" if problem.precision == "fp64" else "fp32"] * u * log_growth(length)
        return error * (1.0 + SMALL_SAMPLE / math.sqrt(problem.n * problem.batch))

    def _plan_fft(self, problem, planner, spec, params, u):
        n, b, size = problem.n, problem.batch, itemsize(problem)
        eff = effective_kind(problem.kind, problem.inverse)
        t = family(eff)[1]
        length, kind, inverse = {1: (logical_length(eff, n), "r2c", False), 2: (2 * n, "r2c", False),
                                 3: (2 * n, "c2r", True), 4: (2 * n, "c2c", False)}[t]
        child_spec = spec.child(0) if spec is not None else None
        child = planner.plan(problem.unscaled(length, b, inverse, kind=kind), child_spec)
        # the extension or padding copy, the twiddle products and the scaling, on ~2N values
        work = copy(2 * length * b, size, launches=2) + elementwise(6, 2 * n * b, size)
        return self.node(problem, planner, work, combine(child.error, ERROR_POST * u), params=params,
                         children=(child,))

    def _plan_rowcol(self, problem, planner, spec, params):
        b, size, shape = problem.batch, itemsize(problem), problem.shape
        children, work = [], Work()
        for i, axis in enumerate(range(len(shape) - 1, -1, -1)):
            child_spec = spec.child(i) if spec is not None else None
            sub = attrs.evolve(problem, shape=(shape[axis],), batch=b * problem.n // shape[axis])
            children.append(planner.plan(sub, child_spec))
            if axis != len(shape) - 1:  # moved last and back: two transposing copies
                work += transpose(2 * problem.n * b, size, run=1, launches=2)
        return self.node(problem, planner, work, combine(*(c.error for c in children)), params=params,
                         children=tuple(children))

    def runs_on_user_tensor(self, node):
        return node.param("method") == "scipy"

    def build(self, node, ctx):
        method, kind = node.param("method"), node.param("kind")
        norm = node.param("norm", "backward")
        shape = tuple(node.param("factors", (node.n,)))
        if method == "scipy":
            return R2RLibrary(shape, kind, node.inverse, norm)
        if method == "gemm":
            return R2RGemm(kind, node.n, node.inverse, norm, ctx)
        if method == "fft":
            return R2RFFT(kind, node.n, node.inverse, norm, ctx.build(node.children[0]), ctx)
        return R2RRowColumn(shape, [ctx.build(c) for c in node.children])
