"""conv: a convolution with a filter bank, planned as one job (issue 30 item 2; FlashFFTConv).

A problem with ``conv`` (:attr:`trnplan.core.problem.Problem.conv`: mode, channels, the signal's
and the filters' shapes) asks for ``y = F⁻¹(F(x) · S)`` over the transform ``shape``, ``S`` the
bank's kept spectrum (scaled by 1/N, in the layout the route's forward transform gives it: the
front end, :mod:`trnplan.conv`, makes it with the same module). Three ways compete:

``method=library``
    The forward transform and the inverse as two child plans (r2c and c2r for real signals, c2c
    both ways for complex ones: torch.fft or a host library on the CPU, whatever the device plans
    elsewhere), the product with the spectrum between them. What a user writes with torch.fft,
    planned; any rank.
``method=gemm`` (the four-step / Monarch formulation of Fu et al. [1]_, after Bailey's four-step FFT)
    ``N = N1·N2``: the signal as an ``N1 × N2`` matrix, a GEMM with the ``N1``-point DFT matrix
    down its columns (only its first ``⌈L/N2⌉`` columns: the implicit zero-padding is not
    multiplied), the twiddles ``exp(−2πi·k1·n2/N)``, a GEMM with the ``N2``-point DFT matrix; the
    spectrum comes out in the transposed (``k1 + N1·k2``) order, and stays there: the product with
    the bank's spectrum (made in the same order) does not care, and the inverse runs the same
    passes back (conjugate matrices and twiddles), its last GEMM making only the ``⌈out/N2⌉`` rows
    of output kept and, for real signals, only the real part. Four GEMMs of contraction ``√N``
    and three elementwise passes: on a matrix engine (Trainium, a GPU's tensor cores) that is the
    whole job, one graph; on the CPU the library's O(N log N) FFT usually wins. Rank 1.
``method=direct`` (short lengths)
    One GEMM with the DFT matrix (``L`` rows: the zero-padding skipped; real signals: the
    ``N/2 + 1`` bins of a real transform), the product, one GEMM back to only the output's
    samples (real signals: the Hermitian weights, as the pruned c2r of
    :mod:`trnplan.planner.truncated`). ``O(N·L)`` work: for a short transform, two launches.
    Rank 1, ``N ≤`` :data:`MAX_DIRECT_N`.
``method=spatial`` (short filters, the CPU)
    No transform: the signal zero-padded (circular: wrapped) and torch's depthwise ``conv1d``
    with the flipped bank (conv1d is a correlation) — what a user writes for a short filter.
    ``O(L·K)`` work at the rate oneDNN's depthwise kernel runs: on the CPU it beats the library's
    two transforms for short filters on long signals (0.25–0.7× trnplan's library route at K ≤ 16,
    L = 4096…16384, one thread; docs/benchmarks.md). Rank 1, real float32, ``K ≤``
    :data:`MAX_SPATIAL_K`, priced on the CPU only (:data:`SPATIAL_CPU`).

Every route's module maps ``(x parts, spectrum parts)`` to the output parts on split ``(re, im)``
real tensors (no complex dtype on a device), and has ``transform`` (the forward half alone, for
the bank's spectrum).

References
----------
.. [1] D. Y. Fu, H. Kumbong, E. Nguyen, C. Ré, "FlashFFTConv: Efficient Convolutions for Long
   Sequences with Tensor Cores", ICLR 2024, arXiv:2311.05908 (§3.1: the FFT convolution as
   Monarch-decomposed GEMMs with twiddles, the spectrum kept in the permuted order).
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import torch

from trnplan.core.accuracy import UNIT_ROUNDOFF, combine, gemm_error, sqrt_growth
from trnplan.core.cost import Work, cmul_work, copy, gemm_work, transpose
from trnplan.core.errors import PlanningError
from trnplan.kernels.complex import cmul
from trnplan.kernels.gemm import Gemm
from trnplan.kernels.scratch import PerThread, plain_cpu_call
from trnplan.kernels.twiddle import twiddle_table
from trnplan.planner.solver import Solver, best_variant, itemsize

METHODS = ("library", "gemm", "direct", "spatial")
#: method=direct's longest transform: its matrices are L × (N + 2) and (N + 2) × out (real), so
#: 2048 keeps each ≤ 32 MiB in fp32 and its O(N·L) work within ~10× the FFT's at the CPU's rates
MAX_DIRECT_N = 2048
#: method=spatial's longest filter: its O(L·K) price is fitted on K = 3…128 (:data:`SPATIAL_CPU`)
MAX_SPATIAL_K = 256
#: method=spatial's CPU price, ``scale · (fixed + outputs · (per_output + per_tap · K))`` in µs, ns, ns:
#: (fixed µs, ns per output sample, ns per output sample and tap, scale). Measured here
#: (2026-11-27, torch 2.13's oneDNN, one thread, busy machine; the plan's call, paired per round
#: against the library route's alone in a round-robin): F.pad + depthwise F.conv1d ran ~70 µs of
#: fixed cost (1×64 signals of 256: 92–100 µs) and 1.45 + 0.017·K ns per output sample beyond it
#: within ~20% on 1×64 and 8×32 float32 signals at L = 256…16384, K = 3…128. ``scale``: the pick
#: compares this price with the library route's, which ran 0.5–1.9× its measured time on those
#: shapes (2× at N = 288, where MKL is fast; 0.5–0.6× at N ≈ 16.4k, where trnplan's library call
#: ran 33–43 ms at 8×32), so this route is taken only where it measured clearly faster: 0.25–0.5×
#: the library route at L = 4096…16384 and K ≤ 16, 0.8–1.0× at L = 1024 and K ≤ 8 (8×32); left to
#: the library at L = 256 (conv1d 1.5–2.5× there but for 8×32 and K ≤ 8, 0.75×) and at K ≥ 64
#: for L ≤ 4096 (1.0–2.0×; 0.54–0.69 at L = 1024, K = 64, where the library's N = 1125 is slow).
#: torch's ``conv1d(x, w, padding=K − 1)`` ran 1.3–27× slower than on the padded input (another
#: kernel), and its float64 depthwise conv 3–24× its float32 time: neither is used.
SPATIAL_CPU = (70.0, 1.45, 0.015, 1.4)
#: method=spatial's gain with torch's threads: the per-sample part of :data:`SPATIAL_CPU` runs T^this
#: faster at T threads. Fitted at 2 threads (2026-11-27, bench/conv_picks.py --threads 2 --quick,
#: effort="measure"'s timings of both routes, 1×64 and 8×32, L = 256…16384, K = 3…128, busy machine):
#: with the library leaves' assumed 0.8 (leafcost.THREAD_EXPONENT) the measured spatial / library
#: time ran 1.3–1.8× the priced ratio on every cell (the library's transforms gained more from the
#: second thread than conv1d: 1.7× against 1.3–2×), and the estimate took conv1d at 1×64, L = 1024,
#: K ≤ 8 (1.3–1.6× the library) and L = 16384, K = 128 (1.75×); with 0.4 every cell of that grid
#: priced the faster route
SPATIAL_THREAD_EXPONENT = 0.4
#: method=spatial's fp32 error ``u·(1 + c·√K)``: measured 3.6e-8 (K = 3), 5.4e-8 (8), 7.5e-8 (16),
#: 1.0e-7 (32), 1.4e-7 (64), 2.0e-7 (128) relative L2 against float64 (8×32 signals, L = 256…16384);
#: c = 0.5 bounds each by ≥ 1.5×
ERROR_SPATIAL = 0.5
#: method=gemm's splits tried: the divisors N2 of N nearest √N on each side (the least work per
#: point; FlashFFTConv uses the square split where it exists), at most this many
SPLITS = 3


def monarch_splits(n: int) -> list[tuple[int, int]]:
    """``(N1, N2)`` with ``N1·N2 = n``, both > 1, nearest the square first (at most :data:`SPLITS`)."""
    root = math.isqrt(n)
    pairs = sorted(((n // d, d) for d in range(2, n) if n % d == 0 and d * d >= n), key=lambda p: p[1])
    near = sorted(pairs, key=lambda p: abs(math.log(p[1] / max(root, 1))))
    return [p for p in near if p[0] > 1][:SPLITS]


#: the routes' fp32 error u·(a + b·g)·(complex signals: c), g = √N1 + √N2 (gemm) or √N (direct),
#: fitted to measurements here (fp32, causal L = N/2 with K = L, 4 channels × 2, 2 seeds, against
#: numpy's complex128 convolution, 2026-11-27): gemm real 1.3e-7 (N=64, 8x8), 2.3e-7 (512), 3.5e-7
#: (4096, 64x64), 4.9e-7 (16384), 5.2e-7 (65536), complex 1.9, 3.0, 4.6, 6.4, 7.0e-7; direct real
#: 1.9e-7 (64), 4.0e-7 (256), 5.4e-7 (1024), 5.3e-7 (2048), complex 3.3, 4.9, 5.3, 6.0e-7. The
#: constants bound every one by ≥ 1.2× (so fp32 takes gemm up to N ≈ 4096 real, direct to N ≈ 128:
#: beyond, four GEMM stages' sums are over fp32's 5e-7 bar, as measured); fp64 (not measured) doubled
ERROR_ROUTE = {"gemm": (1.5, 0.4, 1.25), "direct": (2.5, 0.4, 1.3)}


def route_error(problem, method: str, growth: float, probe) -> float:
    """method=gemm's or method=direct's predicted error (:data:`ERROR_ROUTE`), with the mode's GEMM stages."""
    a, b, c = ERROR_ROUTE[method]
    scale = 2.0 if problem.precision == "fp64" else 1.0
    e = UNIT_ROUNDOFF[problem.precision] * scale * (a + b * growth) * (c if problem.kind == "c2c" else 1.0)
    stages = 4 if method == "gemm" else 2
    return combine(e, gemm_error(problem.precision, stages, probe, problem.n * problem.batch))


def _left_complex(f: np.ndarray, real_in: bool, real_out: bool) -> np.ndarray:
    """The real matrix ``W`` with ``W @ [xr; xi] = [Re(F x); Im(F x)]`` (rows stacked): only xr's
    columns for real input, only the real rows for a real output."""
    top = np.concatenate([f.real, -f.imag], axis=1)
    bottom = np.concatenate([f.imag, f.real], axis=1)
    w = top if real_out else np.concatenate([top, bottom])
    return w[:, : f.shape[1]] if real_in else w


def _right_complex(f: np.ndarray, real_in: bool = False, real_out: bool = False) -> np.ndarray:
    """The real matrix ``W`` with ``[xr | xi] @ W = [Re(x F) | Im(x F)]`` (columns side by side)."""
    left = np.concatenate([f.real, -f.imag])
    right = np.concatenate([f.imag, f.real])
    w = left if real_out else np.concatenate([left, right], axis=1)
    return w[: f.shape[0]] if real_in else w


class MonarchConv(torch.nn.Module):
    """method=gemm on ``(M, L)`` signals (real: one tensor; complex: two); the spectrum ``(N1, C, N2)`` parts.

    The data are kept ``k1``-major, ``(N1, M, N2)``: the first GEMM takes the signals' rows
    transposed to ``(rows, M·N2)`` (one copy of the input) and writes its re and im halves as
    contiguous ``(N1, M·N2)`` blocks, so every later GEMM is one plain 2-D GEMM over the whole batch
    (no batched small GEMMs, no concatenation of re and im: a complex product is two GEMMs summed in
    one ``addmm``); the output's rows are transposed back once at the end."""

    def __init__(self, n1: int, n2: int, width: int, out: int, real: bool, ctx, channels: int):
        super().__init__()
        self.n1, self.n2, self.out, self.real, self.channels = n1, n2, out, real, channels
        # width: the longer of the signal and the filters (both go through transform)
        self.r_in, self.r_out = -(-width // n2), -(-out // n2)
        n = n1 * n2
        self.first = Gemm(_left_complex(twiddle_table(n1, self.r_in, n1, -1), real, False), ctx, side="left")
        f2 = twiddle_table(n2, n2, n2, -1)  # symmetric: x @ F2 is the N2-point DFT of each row; x @ conj(F2) its inverse
        self.f_re, self.f_im, self.f_nim = (Gemm(w, ctx, side="right") for w in (f2.real, f2.imag, -f2.imag))
        g = twiddle_table(self.r_out, n1, n1, 1)  # the inverse N1-point DFT, only the output's rows
        self.g_re, self.g_im, self.g_nim = (Gemm(w, ctx, side="left") for w in (g.real, g.imag, -g.imag))
        t = twiddle_table(n1, n2, n, -1)[:, None, :]  # exp(−2πi·k1·n2/N), broadcast over the batch
        for name, value in (("tr", t.real), ("ti", t.imag), ("tni", -t.imag)):
            self.register_buffer(name, ctx.const(value))

    def transform(self, *parts):
        """The forward four-step transform: ``(re, im)`` of shape ``(N1, M, N2)``, entry
        ``[k1, m, k2]`` the frequency ``k1 + N1·k2`` of signal ``m``."""
        m, pad = parts[0].shape[0], self.r_in * self.n2 - parts[0].shape[-1]
        rows = [(torch.nn.functional.pad(t, (0, pad)) if pad else t).reshape(m, self.r_in, self.n2).transpose(0, 1)
                for t in parts]
        x = (rows[0] if len(rows) == 1 else torch.cat(rows, 0)).reshape(-1, m * self.n2)
        a = self.first(x)  # (2·N1, M·N2): the N1-point DFTs down the columns, re rows over im rows
        ar, ai = cmul(a[: self.n1].reshape(self.n1, m, self.n2), a[self.n1:].reshape(self.n1, m, self.n2),
                       self.tr, self.ti)
        ar, ai = ar.reshape(-1, self.n2), ai.reshape(-1, self.n2)
        br = self.f_nim.accumulate(self.f_re(ar), ai)  # the N2-point DFTs along the rows
        bi = self.f_re.accumulate(self.f_im(ar), ai)
        return br.reshape(self.n1, m, self.n2), bi.reshape(self.n1, m, self.n2)

    def forward(self, *inputs):
        *parts, sr, si = inputs
        xr, xi = self.transform(*parts)
        m = xr.shape[1]
        lead = (self.n1, m // self.channels, self.channels, self.n2)
        spec = (self.n1, 1, self.channels, self.n2)
        yr, yi = cmul(xr.reshape(lead), xi.reshape(lead), sr.reshape(spec), si.reshape(spec))
        yr, yi = yr.reshape(-1, self.n2), yi.reshape(-1, self.n2)
        cr = self.f_im.accumulate(self.f_re(yr), yi)  # the inverse N2-point DFTs (conj F2)
        ci = self.f_re.accumulate(self.f_nim(yr), yi)
        cr, ci = cmul(cr.reshape(self.n1, m, self.n2), ci.reshape(self.n1, m, self.n2), self.tr, self.tni)
        cr, ci = cr.reshape(self.n1, -1), ci.reshape(self.n1, -1)
        ys = [self.g_nim.accumulate(self.g_re(cr), ci)]  # (rows kept, M·N2): the real part
        if not self.real:
            ys.append(self.g_im.accumulate(self.g_re(ci), cr))
        return tuple(y.reshape(self.r_out, m, self.n2).transpose(0, 1).reshape(m, -1)[:, : self.out] for y in ys)


class DirectConv(torch.nn.Module):
    """method=direct: one GEMM with the DFT matrix's first ``L`` rows, the product, one GEMM back to
    the output's samples."""

    def __init__(self, n: int, width: int, out: int, real: bool, ctx, channels: int):
        super().__init__()
        self.real, self.channels, self.width = real, channels, width
        bins = n // 2 + 1 if real else n
        self.bins = bins
        f = twiddle_table(width, bins, n, -1)  # width: the longer of the signal and the filters
        self.fwd = Gemm(_right_complex(f, real_in=real), ctx, side="right")
        g = twiddle_table(bins, out, n, 1)  # bins × out
        if real:  # the Hermitian weights: the bins above N/2 are the conjugates of those below
            c = np.full(bins, 2.0)
            c[0] = 1.0
            if n % 2 == 0:
                c[-1] = 1.0
            g = c[:, None] * g
        self.inv = Gemm(_right_complex(g, real_out=real), ctx, side="right")

    def transform(self, *parts):
        pad = self.width - parts[0].shape[-1]
        parts = [torch.nn.functional.pad(t, (0, pad)) if pad else t for t in parts]
        y = self.fwd(parts[0] if self.real else torch.cat(parts, -1))
        return y[:, : self.bins], y[:, self.bins:]

    def forward(self, *inputs):
        *parts, sr, si = inputs
        xr, xi = self.transform(*parts)
        m = xr.shape[0]
        lead = (m // self.channels, self.channels, self.bins)
        yr, yi = cmul(xr.reshape(lead), xi.reshape(lead), sr.reshape(self.channels, self.bins),
                       si.reshape(self.channels, self.bins))
        y = self.inv(torch.cat([yr, yi], -1).reshape(m, 2 * self.bins))
        if self.real:
            return (y,)
        half = y.shape[1] // 2
        return y[:, :half], y[:, half:]


class Conv(Solver):
    name = "conv"
    version = 4  # 4: spatial priced with its own thread gain, transform lengths multiples of 16; 3: method=spatial
    composite = True
    convolves = True
    kinds = ("r2c", "c2c")
    ranks = "any"
    options = ("method", "split")
    word_options = ("method", "split")

    def why_not(self, problem, planner, forced):
        return None if problem.conv else "plans convolutions with a filter bank only (plan_conv)"

    def why_not_spec(self, problem, spec):
        reason = super().why_not_spec(problem, spec)
        method = spec.option("method")
        if reason is None and method is not None:
            reason = why_not_method(problem, method)
        return reason

    def plan(self, problem, planner, spec):
        forced = spec.option("method") if spec is not None else None
        if forced and (reason := why_not_method(problem, forced)):
            raise PlanningError(reason)
        methods = [forced] if forced else [m for m in METHODS if why_not_method(problem, m) is None]
        split = spec.option("split") if spec is not None else None
        splits = [tuple(int(v) for v in str(split).split("x"))] if split else monarch_splits(problem.n)
        if split and (len(splits[0]) != 2 or math.prod(splits[0]) != problem.n):
            raise PlanningError(f"split={split} is not a factor pair N1xN2 of the transform length {problem.n}")
        variants = [(m, s) for m in methods for s in (splits if m == "gemm" else [None])]
        return best_variant(lambda v: self._plan_method(problem, planner, spec, *v), variants,
                            tol=planner.tol(problem))

    def _plan_method(self, problem, planner, spec, method, split):
        mode, channels, length, kernel = problem.conv
        params = {"factors": problem.shape, "kind": problem.kind, "method": method, "mode": mode,
                  "channels": channels, "length": "x".join(map(str, length)),
                  "kernel": "x".join(map(str, kernel))}
        if method == "library":
            return self._plan_library(problem, planner, spec, params)
        if method == "spatial":
            work, errors = _spatial_work(problem, planner)
        else:
            work, errors = (_gemm_work(problem, planner, *split) if method == "gemm"
                            else _direct_work(problem, planner))
        if split is not None:
            params["split"] = f"{split[0]}x{split[1]}"
        return self.node(problem, planner, work, combine(*errors), params=params)

    def _plan_library(self, problem, planner, spec, params):
        complex_ = problem.kind == "c2c"
        fwd = attrs.evolve(problem, conv=(), norm="backward")
        inv = attrs.evolve(problem, conv=(), kind="c2c" if complex_ else "c2r", inverse=True, norm="forward")
        children = _plan_as_roots(planner, (fwd, inv), spec)
        b, size = problem.batch, itemsize(problem)
        spectrum = math.prod(fwd.out_shape)
        planes = 2 if complex_ else 1
        if problem.device in ("cpu", "cuda"):  # trnplan.conv's product there: one complex multiply
            work = Work(launches=1, elementwise_flops=6.0 * b * spectrum,
                        bytes=(4 * b + 2 * problem.conv[1]) * spectrum * size)
        else:
            work = cmul_work(b * spectrum, size)
        if math.prod(problem.shape) > math.prod(problem.in_shape):  # the signal zero-padded to N (one copy)
            work += copy(planes * b * math.prod(problem.in_shape), size)
        # the two transforms' errors: the bank's spectrum is made by the forward's plan too, but the
        # children's models bound their measurements by ≥ 1.3× and the convolution measured within
        # them (2.0–3.3e-7 at N = 120…65536, real and complex, against a prediction of 2.7–3.5e-7)
        error = combine(*(c.error for c in children))
        return self.node(problem, planner, work, error, params=params, children=children)

    def build(self, node, ctx):
        channels = int(node.param("channels"))
        length, out = _lengths(node)
        real = node.param("kind") == "r2c"
        width = max(length[0], int(str(node.param("kernel")).split("x")[0]))
        if node.param("method") == "gemm":
            n1, n2 = (int(v) for v in str(node.param("split")).split("x"))
            return MonarchConv(n1, n2, width, out[0], real, ctx, channels)
        if node.param("method") == "direct":
            return DirectConv(node.n, width, out[0], real, ctx, channels)
        if node.param("method") == "spatial":
            return SpatialConv(length[0], int(str(node.param("kernel"))), node.param("mode"), channels)
        return LibraryConv(ctx.build(node.children[0]), ctx.build(node.children[1]), node, channels)


class SpatialConv(torch.nn.Module):
    """method=spatial: the signals zero-padded (circular: wrapped) and one depthwise ``conv1d`` with
    the flipped bank, on ``(M, L)`` real signals; the "spectrum" is conv1d's weight ``(C, 1, K)``
    (with a zero imaginary part: the routes take ``(re, im)``).

    On the CPU, with no gradient to record, the padded signals go into a buffer kept per calling
    thread and input shape (:class:`trnplan.kernels.scratch.PerThread`; its zeros written once, the
    signals copied into its middle each call; circular: the wrapped samples too), so that a call allocates only
    conv1d's output. Why: ``F.pad`` + ``conv1d`` allocate two batch-sized buffers a call, and on
    this machine each fresh one cost its page faults in some heap states (8×32 signals of 4096,
    K = 64: ~3100 faults a call in one mixed round-robin, where the call took 5.3 ms against 2.3
    without faults; measured 2026-11-27).
    """

    def __init__(self, length: int, kernel: int, mode: str, channels: int):
        super().__init__()
        self.length, self.kernel, self.mode, self.channels = length, kernel, mode, channels
        self._kept = PerThread()  # per calling thread, under the input's signature: the padded buffer

    def transform(self, *parts):
        """The bank ``(C, K)`` as conv1d's weight, flipped (conv1d correlates), and a zero imaginary part."""
        w = parts[0].reshape(self.channels, 1, self.kernel).flip(-1)
        return w, torch.zeros_like(w)

    def _pads(self) -> tuple[int, int]:
        k = self.kernel - 1
        return (k, k) if self.mode == "linear" else (k, 0)

    def _padded(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(B, C, L)`` padded for conv1d: into this thread's kept buffer on the CPU without a
        gradient, else a new tensor (``F.pad``; circular: wrapped)."""
        left, right = self._pads()
        if not plain_cpu_call(x):
            mode = "circular" if self.mode == "circular" and left else "constant"
            return torch.nn.functional.pad(x, (left, right), mode=mode)
        buf = self._kept.make((x.shape, x.dtype), lambda: x.new_zeros(*x.shape[:-1], left + self.length + right))
        buf[..., left:left + self.length].copy_(x)
        if self.mode == "circular" and left:  # the last K − 1 samples wrapped in front (K ≤ L)
            buf[..., :left].copy_(x[..., self.length - left:])
        return buf

    def ready_call(self, x: torch.Tensor, w: torch.Tensor, shape: tuple):
        """The call on signals like ``x`` ``(B, C, L)`` (CPU, no gradient) as one closure over this
        thread's kept buffer: copy in (circular: the wrap too), conv1d with ``w``, the output as
        ``shape`` (``trnplan.conv`` keeps it per thread and signature)."""
        buf = self._padded(x)
        left, length, groups, circular = self._pads()[0], self.length, self.channels, self.mode == "circular"
        head, wrap = buf[..., left:left + length], buf[..., :left]
        conv1d = torch.nn.functional.conv1d

        def call(signal: torch.Tensor) -> torch.Tensor:
            signal = signal.reshape(head.shape)
            head.copy_(signal)
            if circular and left:
                wrap.copy_(signal[..., length - left:])
            return conv1d(buf, w, groups=groups).reshape(shape)

        return call

    def forward(self, *inputs):
        x, w, _ = inputs
        x = self._padded(x.reshape(-1, self.channels, self.length))
        y = torch.nn.functional.conv1d(x, w, groups=self.channels)
        return (y.reshape(-1, y.shape[-1]),)


class LibraryConv(torch.nn.Module):
    """method=library on split tensors (the planned children's modules): pad, forward, product, inverse, crop."""

    def __init__(self, fwd, inv, node, channels: int):
        super().__init__()
        self.fwd, self.inv, self.channels = fwd, inv, channels
        self.shape = tuple(node.param("factors"))
        self.length, self.out = _lengths(node)

    def _pad(self, t):
        t = t.reshape(t.shape[0], *self.length)
        pad = []
        for size, want in zip(reversed(self.length), reversed(self.shape)):
            pad += [0, want - size]
        return torch.nn.functional.pad(t, pad).reshape(t.shape[0], -1) if any(pad) else t.reshape(t.shape[0], -1)

    def transform(self, *parts):
        return self.fwd(*(self._pad(t) for t in parts))

    def forward(self, *inputs):
        *parts, sr, si = inputs
        xr, xi = self.transform(*parts)
        m = xr.shape[0]
        lead = (m // self.channels, self.channels, -1)
        yr, yi = cmul(xr.reshape(lead), xi.reshape(lead), sr.reshape(self.channels, -1),
                       si.reshape(self.channels, -1))
        ys = self.inv(yr.reshape(m, -1), yi.reshape(m, -1))
        out = []
        for y in ys:
            y = y.reshape(m, *self.shape)
            for d, keep in enumerate(self.out):
                y = y.narrow(d + 1, 0, keep)
            out.append(y.reshape(m, -1))
        return tuple(out)


def _plan_as_roots(planner, problems, spec) -> tuple:
    """The library route's transforms, each planned as the root of a plan of its own: that is how
    they run (trnplan.conv calls each one's cached plan on the user's tensors: a library leaf there
    is called directly, with no packing of split tensors, and the estimate keeps the device's own
    FFT unless another tree is predicted faster beyond the model's error). Priced as children of
    this node they paid the packing and picked other trees (a real GEMM at n = 120: 22 µs predicted,
    against torch.fft's rfft, 8.6 µs, at the root)."""
    outer = planner.root
    try:
        nodes = []
        for i, sub in enumerate(problems):
            planner.root = sub
            nodes.append(planner.plan(sub, spec.child(i) if spec is not None else None))
        return tuple(nodes)
    finally:
        planner.root = outer


def _lengths(node) -> tuple[tuple, tuple]:
    length = tuple(int(v) for v in str(node.param("length")).split("x"))
    kernel = tuple(int(v) for v in str(node.param("kernel")).split("x"))
    mode = node.param("mode")
    return length, tuple(n + k - 1 for n, k in zip(length, kernel)) if mode == "linear" else length


def why_not_method(problem, method) -> str | None:
    """Why ``method`` cannot plan the convolution ``problem`` (None: it can)."""
    if method not in METHODS:
        return f"conv has no method {method!r} (methods: {', '.join(METHODS)})"
    if method != "library" and problem.rank != 1:
        return f"method={method} plans 1-D convolutions; shape {problem.shape} has rank {problem.rank} (method=library)"
    if method == "gemm" and not monarch_splits(problem.n):
        return f"method=gemm needs a transform length with a factor pair N1·N2 (both > 1); {problem.n} is prime"
    if method == "spatial":
        return _why_not_spatial(problem)
    if method == "direct" and problem.n > MAX_DIRECT_N:
        return f"method=direct is for transforms ≤ {MAX_DIRECT_N} (its DFT matrices are N × L); N={problem.n}"
    return None


def _why_not_spatial(problem) -> str | None:
    """Why method=spatial cannot plan the (rank-1) convolution ``problem`` (None: it can)."""
    kernel = problem.conv[3][0]
    if problem.kind == "c2c":
        return "method=spatial convolves real signals with a real bank (torch's conv1d); complex: method=library"
    if problem.device != "cpu":
        return (f"method=spatial (torch's depthwise conv1d) is measured and priced on the CPU only; "
                f"device {problem.device}: method=library")
    if problem.precision != "fp32":
        return ("method=spatial plans float32 (torch's float64 depthwise conv1d ran 3–24× its float32 time "
                "here); float64: method=library")
    if kernel > MAX_SPATIAL_K:
        return f"method=spatial is for filters ≤ {MAX_SPATIAL_K} taps (its work is L·K); K={kernel}"
    return None


def _spatial_work(problem, planner):
    """method=spatial's price (:data:`SPATIAL_CPU`, in launch units: one padded conv1d as measured)
    and its error (:data:`ERROR_SPATIAL`)."""
    kernel = problem.conv[3][0]
    fixed, per_output, per_tap, scale = SPATIAL_CPU
    outputs = problem.batch * problem.out_shape[0]
    # measured at one thread: at T threads the per-sample part gains T^SPATIAL_THREAD_EXPONENT
    threads = (1.0 / max(1, torch.get_num_threads())) ** SPATIAL_THREAD_EXPONENT
    us = scale * (fixed + outputs * (per_output + per_tap * kernel) * 1e-3 * threads)
    error = UNIT_ROUNDOFF[problem.precision] * (1.0 + ERROR_SPATIAL * math.sqrt(kernel))
    return Work(launches=us / planner.profile.launch_us), [error]


def _gemm(problem, planner, rows: int, k: int, cols: int, size: int) -> Work:
    """One GEMM ``(rows × k) @ (k × cols)`` with a constant operand: its flops and operands."""
    work = Work(launches=1, bytes=(rows * k + k * cols + rows * cols) * size)
    return work + gemm_work(problem.precision, planner.profile, 2.0 * rows * k * cols, rows * k, size,
                            shape=(rows, k, cols))


def _gemm_work(problem, planner, n1: int, n2: int):
    """method=gemm's work (:class:`MonarchConv`: the input's rows transposed in, eleven or thirteen
    2-D GEMMs, three complex elementwise passes, the output's rows transposed out) and its error."""
    _, _, length, kernel = problem.conv
    out = problem.out_shape[0]
    b, size, real = problem.batch, itemsize(problem), problem.kind == "r2c"
    planes = 1 if real else 2
    r_in, r_out = -(-max(length[0], kernel[0]) // n2), -(-out // n2)
    n = n1 * n2
    work = copy(planes * b * r_in * n2, size) if r_in * n2 > length[0] else Work()
    work += transpose(planes * b * r_in * n2, size, run=n2, launches=planes)
    work += _gemm(problem, planner, 2 * n1, planes * r_in, b * n2, size)  # the N1-point DFTs (left)
    for _ in range(8):  # the N2-point DFTs forward and back: four real GEMMs each
        work += _gemm(problem, planner, b * n1, n2, n2, size)
    work += cmul_work(b * n, size) * 3  # the twiddles, the product, the conjugate twiddles
    for _ in range(2 * planes):  # the inverse N1-point DFTs, only the kept rows (left)
        work += _gemm(problem, planner, r_out, n1, b * n2, size)
    work += transpose(planes * b * r_out * n2, size, run=n2, launches=planes)
    return work, [route_error(problem, "gemm", sqrt_growth(n1) + sqrt_growth(n2), planner.probe)]


def _direct_work(problem, planner):
    """method=direct's work (two GEMMs, the product, the concatenations) and errors."""
    length, out = max(problem.in_shape[0], problem.conv[3][0]), problem.out_shape[0]
    b, size, real = problem.batch, itemsize(problem), problem.kind == "r2c"
    planes = 1 if real else 2
    bins = problem.n // 2 + 1 if real else problem.n
    work = Work() if real else copy(2 * b * length, size)
    work += _gemm(problem, planner, b, planes * length, 2 * bins, size)
    work += cmul_work(b * bins, size) + copy(2 * b * bins, size)
    work += _gemm(problem, planner, b, 2 * bins, planes * out, size)
    return work, [route_error(problem, "direct", sqrt_growth(problem.n), planner.probe)]
