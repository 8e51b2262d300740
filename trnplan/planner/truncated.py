"""truncated: real transforms that keep only some frequencies (pruned FFTs; the Fourier neural operator).

A Fourier neural operator layer (Li et al., "Fourier Neural Operator for Parametric PDEs", ICLR
2021) takes an rfftn, keeps the lowest ``m`` bins of the last axis and the lowest and highest ``m``
frequencies of every other axis, multiplies them by its weights, and zero-fills the rest before the
irfftn. A problem with ``modes`` (:attr:`trnplan.core.problem.Problem.kept_shape`) asks for exactly
that: r2c returns only the kept spectrum, c2r reads only it (the rest taken as zero); the non-last
axes in ``Problem.low`` keep only their lowest ``m`` frequencies (a node parameter ``low=``). FFTW and
cuFFT have no pruned transform; this solver gives the planner two ways:

``method=full``
    The whole transform (a child plan: r2c/c2r, any rank, the device's best), then the kept
    spectrum cut out (c2r: zero-filled in first). What a user writes by hand: rfftn + slice +
    zero-fill + irfftn, planned and cached.
``method=gemm`` (pruned row-column, Markel, IEEE Trans. Audio Electroacoust. 19(4), 1971)
    One GEMM per axis with only the kept columns of its DFT matrix: the last axis first as a
    real GEMM ``x @ [Re F_K | Im F_K]`` (n × 2m), then each other axis a complex GEMM with its 2m
    kept rows, so every later pass runs on the already-pruned data. c2r runs the transposed
    passes in reverse: each non-last axis expanded from 2m to n, then the real axis from m bins
    with the Hermitian weights (1 for DC and an included Nyquist bin, 2 for the rest). The work
    is ``2·n·2m`` multiply-adds per row and axis instead of a whole FFT and a copy: a fraction of
    a transform when ``m ≪ n`` (on a matrix engine the GEMM form is also the cheap one).

The root applies the norm as for the full transform (the scale of the whole length).
"""

from __future__ import annotations

import math
from typing import ClassVar

import attrs
import numpy as np
import torch

from trnplan.core.accuracy import UNIT_ROUNDOFF, combine, gemm_error
from trnplan.core.cost import SHORT_RUN, Work, add_terms, copy, gemm_work, transpose, work_terms
from trnplan.core.errors import PlanningError
from trnplan.kernels.gemm import Gemm
from trnplan.kernels.scratch import PerThread, plain_cpu_call
from trnplan.planner.solver import Solver, WholeShape, best_variant, itemsize, library_io

METHODS = ("gemm", "full")
#: the longest axis method=gemm takes: its matrices are n × 2m per axis, and its error grows as
#: √n (the dft-gemm bound); beyond it the full transform is cheaper on every profile
MAX_GEMM_N = 4096
#: method=gemm's error u·(a + b·log2 n)·(1 + c·(rank − 1)), n the longest axis. Measured here (fp32,
#: 3 seeds, r2c and c2r, vs numpy float64): 1-D n = 256…4096 with m = 16…513 gave 2.1–3.7e-7 (3.5–6.3 u),
#: nearly flat in n (the kept low frequencies are long sums of well-scaled terms, not the √n worst
#: case the full dft-gemm bound assumes: u(2.5 + 0.3√n) = 7.2e-7 at n=1024 kept it out of every fp32
#: plan); 128² (16²) 3.5e-7 and 64³ (12³) 3.1e-7, the passes after the first adding little. The
#: constants bound every measurement by ≥ 1.2×; fp64 (not measured at these sizes) takes them doubled
ERROR_GEMM = {"fp32": (4.0, 0.35, 0.1), "fp64": (8.0, 0.7, 0.2)}


def kept_rows(n: int, m: int, low: bool = False) -> np.ndarray:
    """The frequencies a non-last axis keeps: 0..m−1 and n−m..n−1 (the FNO pattern), or 0..m−1 (``low``)."""
    return np.arange(m) if low else np.concatenate([np.arange(m), np.arange(n - m, n)])


def kept_lengths(modes: tuple, low: tuple) -> tuple:
    """The kept spectrum's shape (:attr:`trnplan.core.problem.Problem.kept_shape`)."""
    return tuple(m if axis == len(modes) - 1 or axis in low else 2 * m for axis, m in enumerate(modes))


def _dft_columns(n: int, ks: np.ndarray, sign: int) -> np.ndarray:
    """exp(sign·2πi·j·k/n) for j < n and the frequencies ``ks``: an n × len(ks) complex128 matrix,
    the index product reduced mod n before the angle (exact)."""
    jk = (np.arange(n)[:, None] * ks[None, :]) % n
    return np.exp(sign * 2j * np.pi * jk / n)


def complex_gemm_matrix(f: np.ndarray) -> np.ndarray:
    """[[Re F, Im F], [−Im F, Re F]]: ``[xr | xi] @ W = [Re(x F) | Im(x F)]``."""
    return np.block([[f.real, f.imag], [-f.imag, f.real]])


def _moved(state, dim: int, last: int):
    return [t.movedim(dim, -1) for t in state] if dim != last else list(state)


def _back(state, dim: int, last: int):
    return tuple(t.movedim(-1, dim) for t in state) if dim != last else tuple(state)


class PrunedRowColumn(torch.nn.Module):
    """method=gemm: one kept-column GEMM per axis (r2c: last axis first; c2r: last axis last)."""

    def __init__(self, shape: tuple, modes: tuple, inverse: bool, ctx, low: tuple = (), scale: float = 1.0):
        super().__init__()
        self.shape, self.modes, self.inverse = tuple(shape), tuple(modes), inverse
        self.kept = kept_lengths(self.modes, tuple(low))
        n, m = shape[-1], modes[-1]
        f = _dft_columns(n, np.arange(m), 1 if inverse else -1)  # n × m
        if inverse:  # [Re X | Im X] (·, 2m) @ W (2m × n), the Hermitian weights in W's rows
            c = np.full(m, 2.0)
            c[0] = 1.0
            if n % 2 == 0 and m == n // 2 + 1:
                c[-1] = 1.0
            w = np.concatenate([c[:, None] * f.real.T, -c[:, None] * f.imag.T])
            w[m] = 0.0  # Im X[0] is ignored, as torch.fft.irfft ignores it
            if n % 2 == 0 and m == n // 2 + 1:
                w[2 * m - 1] = 0.0  # and Im of the Nyquist bin
        else:
            w = np.concatenate([f.real, f.imag], axis=1)  # x @ [Re F | Im F]
        # c2r: the plan's norm scale folded into the last GEMM's matrix, in float64 (Truncated.build_scaled)
        self.real = Gemm(w * scale if inverse and scale != 1.0 else w, ctx, side="right")
        mats = []
        for axis in range(len(shape) - 1):
            fa = _dft_columns(shape[axis], kept_rows(shape[axis], modes[axis], axis in low), 1 if inverse else -1)
            mats.append(Gemm(complex_gemm_matrix(fa.T if inverse else fa), ctx, side="right"))
        self.axes = torch.nn.ModuleList(mats)

    def _complex_pass(self, gemm, state, dim, last):
        moved = _moved(state, dim, last)
        lead = moved[0].shape[:-1]
        y = gemm(torch.cat([t.reshape(-1, t.shape[-1]) for t in moved], 1))
        half = y.shape[1] // 2
        return _back((y[:, :half].reshape(*lead, half), y[:, half:].reshape(*lead, half)), dim, last)

    def forward(self, *inputs):
        M, last = inputs[0].shape[0], len(self.shape)
        if not self.inverse:
            x = inputs[0].reshape(M, *self.shape)
            y = self.real(x.reshape(-1, self.shape[-1]))
            m = self.modes[-1]
            state = (y[:, :m].reshape(*x.shape[:-1], m), y[:, m:].reshape(*x.shape[:-1], m))
            for axis in range(len(self.shape) - 2, -1, -1):
                state = self._complex_pass(self.axes[axis], state, axis + 1, last)
            return tuple(t.reshape(M, -1) for t in state)
        state = tuple(t.reshape(M, *self.kept) for t in inputs)
        for axis in range(len(self.shape) - 1):
            state = self._complex_pass(self.axes[axis], state, axis + 1, last)
        lead = state[0].shape[:-1]
        y = self.real(torch.cat([t.reshape(-1, self.modes[-1]) for t in state], 1))
        return (y.reshape(*lead, self.shape[-1]).reshape(M, -1),)


def _fill_blocks(shape: tuple, modes: tuple, low: tuple) -> list:
    """Where each block of the kept spectrum goes in the whole one: ``(source, target)`` index tuples
    (over the trailing dims, after ``...``), one per combination of the non-last axes' low and high
    rows (``2^(rank−1)`` blocks, fewer with ``low`` axes); the last axis's ``m`` bins go to its first ``m``."""
    blocks = [((), ())]
    for axis, m in enumerate(modes[:-1]):
        parts = [(slice(0, m), slice(0, m))]
        if axis not in low:
            parts.append((slice(m, 2 * m), slice(shape[axis] - m, shape[axis])))
        blocks = [(src + (a,), dst + (b,)) for src, dst in blocks for a, b in parts]
    last = slice(0, modes[-1])
    return [((..., *src, slice(None)), (..., *dst, last)) for src, dst in blocks]


class TruncateFull(torch.nn.Module):
    """method=full: the whole r2c then the kept spectrum cut out; c2r: zero-filled in, then the whole c2r.

    Where the child is a library call (torch.fft's rfft/rfftn/irfftn), the plan's root calls it on
    the user's complex tensor (:meth:`library_call`): the cut and the fill are done in complex
    and nothing is split into ``(re, im)`` — the call an FNO layer makes with torch.fft, planned.
    On the CPU that call's c2r fills a kept zero spectrum (:meth:`_filled`).
    """

    def __init__(self, shape: tuple, modes: tuple, inverse: bool, child, low: tuple = ()):
        super().__init__()
        self.shape, self.modes, self.inverse, self.child = tuple(shape), tuple(modes), inverse, child
        self.low = tuple(low)
        self.full = (*shape[:-1], shape[-1] // 2 + 1)
        self.kept = kept_lengths(self.modes, self.low)
        self._blocks = _fill_blocks(self.shape, self.modes, self.low)
        self._scratch = PerThread()  # per calling thread: (its zero-filled spectrum, the kept blocks' views)
        if hasattr(child, "library_call"):
            self.library_call = self._library_call

    def _cut(self, t):
        t = t[..., : self.modes[-1]]  # a view: the non-last axes' cuts below copy only the kept bins
        for axis, m in enumerate(self.modes[:-1]):
            dim = axis + 1
            low = t.narrow(dim, 0, m)
            t = low.contiguous() if axis in self.low else torch.cat([low, t.narrow(dim, t.shape[dim] - m, m)], dim)
        return t

    def _fill(self, t):
        t = torch.nn.functional.pad(t, (0, self.full[-1] - self.modes[-1]))
        for axis, m in enumerate(self.modes[:-1]):
            dim, n = axis + 1, self.shape[axis]
            kept = [t.narrow(dim, 0, m)] if axis in self.low else [t.narrow(dim, 0, m), t.narrow(dim, m, m)]
            zeros = torch.zeros_like(t.narrow(dim, 0, 1)).expand(*t.shape[:dim], n - m * len(kept), *t.shape[dim + 1:])
            t = torch.cat([kept[0], zeros, *kept[1:]], dim)
        return t

    def _filled(self, z):
        """``z`` zero-filled to the whole spectrum: on the CPU, with no gradient to record, the
        calling thread's kept spectrum of ``z``'s signature, zeroed once, the kept bins written over
        its own (the library's c2r only reads its input: torch.fft.irfft is functional); else a new
        tensor (:meth:`_fill`).

        Why: the fill wrote the whole spectrum into a fresh buffer on every call (512 × 1024
        keeping 16: 2.1 MB zeroed for 32 kB of kept bins), a third ~2 MB buffer beside the forward's
        spectrum and the output, and glibc's malloc maps such buffers afresh (page faults) whenever
        the heap's top was trimmed (mallopt(3): its trim threshold is twice a dynamic mmap threshold
        that follows the largest block freed). Measured (busy machine, 2026-11-27): in a process
        where the heap was trimmed every call the 1-D round trip took 994 faults a call and
        ~2× its time, torch.fft's hand-written one too; with the kept spectrum, none. The kept one
        costs one copy of the kept bins. The kept buffers' rules: :mod:`trnplan.kernels.scratch`.
        """
        if not plain_cpu_call(z):
            return self._fill(z)

        def zeros():
            whole = torch.zeros(*z.shape[: z.ndim - len(self.shape)], *self.full, dtype=z.dtype, device=z.device)
            return whole, [whole[dst] for _, dst in self._blocks]

        whole, targets = self._scratch.make((z.shape, z.dtype), zeros)
        if len(targets) == 1:
            targets[0].copy_(z)
        else:
            for (src, _), target in zip(self._blocks, targets):
                target.copy_(z[src])
        return whole

    def _library_call(self, norm: str | None = None):
        """The child's library function with ``norm`` on the user's tensor ``(batch, *in_shape)``,
        the cut after it (r2c) or the zero-fill before it (c2r), in complex."""
        call = self.child.library_call(norm)
        if self.inverse:
            return lambda z: call(self._filled(z))
        # 1-D: the cut is a view of the whole spectrum, as rfft(x)[..., :m] written by hand returns
        # (a copy of the kept bins, which would free the whole spectrum at once, cost the forward
        # alone 1.03–1.12× the view at 512 × 1024 keeping 16/64, busy machine, 2026-11-27)
        return lambda x: self._cut(call(x))

    def forward(self, *inputs):
        M = inputs[0].shape[0]
        if not self.inverse:
            re, im = self.child(*inputs)
            return tuple(self._cut(t.reshape(M, *self.full)).reshape(M, -1) for t in (re, im))
        re, im = (self._fill(t.reshape(M, *self.kept)).reshape(M, -1) for t in inputs)
        return self.child(re, im)


#: the pruned passes move (n × inner) blocks, ``inner`` the kept length of the later axes (12–16
#: values in the FNO shapes; whole rows where the axis is already last): measured 2026-11-27 (torch
#: 1 thread, busy machine) at 2.3–2.5× a contiguous copy of the same data — (128, 128, 16) moving
#: axis 1 last 122 µs vs 48 µs, (8, 64, 64, 12) axis 2: 226 vs 100 µs — the long-run price
#: (cost.LONG_RUN_PENALTY 2), not the short-run one (10, measured on large square transposes) that
#: a run under cost.SHORT_RUN would get; blocks narrower than this keep the short-run price
BLOCK_RUN = 8


def _gather(rows: int, width: int, inner: int, size: int) -> Work:
    """A pass's operand gathered: its re and im planes (rows × width/2 each) moved so that the
    pass's axis is last (a transposing copy of (axis × inner) blocks; none where inner is 1, the
    axis already last) and concatenated into one rows × width matrix (a contiguous copy)."""
    elements = rows * width
    work = copy(elements, size)
    if inner > 1:
        work += transpose(elements, size, run=SHORT_RUN if inner >= BLOCK_RUN else 1, launches=2)
    return work


def modes_word(modes) -> str:
    """``(16, 8)`` → ``"16x8"``: how a node prints (and a strategy names) the kept modes."""
    return "x".join(map(str, modes))


class Truncated(WholeShape, Solver):
    name = "truncated"
    # 2: the fitted method=gemm error model (the √n bound kept it out of every fp32 plan at n ≥ 1024),
    # and the precision modes' GEMM cost and error (gemm_work, gemm_error); 3: method=gemm's passes
    # priced as they run (gathers per pass, blocks at the long-run price), method=full over a library
    # leaf at the root calls it on the user's tensor, and the root's default is that tree (margin rule);
    # 4: the pruned c2r folds the norm scale into its last GEMM (build_scaled), and its own margin sigma on the CPU
    version = 4
    composite = True
    truncates = True
    takes_factors = True
    kinds = ("r2c", "c2r")
    ranks = "any"
    options = ("method", "modes", "kind", "low")
    #: the margin rule's sigma when method=gemm meets method=full (the default: over torch.fft) on the
    #: CPU: exp(−2·0.46) = 0.40, so the pruned GEMMs replace it where predicted below 0.40× its time
    #: (full over another library keeps the profile's sigma: that comparison was not measured). Measured 2026-11-27 (torch 1 thread, load 5–7, round-robin medians) on 15 shapes × r2c/c2r
    #: (1-D n = 256…4096, 2-D 64²…256², 3-D 32³…64³, 8–64 modes, 0.5–8 M points): every row predicted
    #: below 0.40× measured 0.08–0.59× (all N-D inverses but 32³, and one 1-D: 512 keeping 8); a second
    #: run after the fixes (load 6–9) 0.09–0.67× for the same picks; above it the nearest rows measured
    #: 0.65–0.70× (predicted 0.41), 0.68–0.71× (0.47, 32³), 0.20–0.84× (0.45), and the worst predicted
    #: win 1.31–1.33× (0.70). The model's rms log-error on the ratio was ~0.6 there, biased to
    #: flatter the GEMMs on forwards and 1-D and to under-rate them on N-D inverses; the profile's own
    #: sigma (1.2: 0.09×) kept out every measured 2–12× win
    MARGIN_SIGMAS: ClassVar[dict] = {"cpu": 0.46}
    word_options = ("method", "kind")  # modes= is an int (1-D) or a word like 16x8, checked here

    def margin_sigma(self, trees, profile):
        methods = {t.param("method") for t in trees}
        return self.MARGIN_SIGMAS.get(profile.name) if methods == {"gemm", "full"} else None

    def why_not(self, problem, planner, forced):
        return None if problem.modes else "plans truncated transforms only (modes=...)"

    def why_not_spec(self, problem, spec):
        modes, low = spec.option("modes"), spec.option("low")
        others = attrs.evolve(spec, options=tuple(o for o in spec.options if o[0] not in ("modes", "low")))
        reason = super().why_not_spec(problem, others)  # WholeShape: the factors and kind=
        if reason is None and modes is not None and str(modes) != modes_word(problem.modes):
            reason = f"the strategy's truncated node keeps modes {modes} but the problem keeps {modes_word(problem.modes)}"
        if reason is None and low is not None and str(low) != modes_word(problem.low):
            reason = (f"the strategy's truncated node keeps the lowest modes only on axes {low} but the problem on "
                      f"{modes_word(problem.low) or 'none'}")
        method = spec.option("method")
        if reason is None and method is not None:
            reason = self._why_not_method(problem, method)
        return reason

    @staticmethod
    def _why_not_method(problem, method) -> str | None:
        if method not in METHODS:
            return f"truncated has no method {method!r} (methods: {', '.join(METHODS)})"
        if method == "gemm" and max(problem.shape) > MAX_GEMM_N:
            return f"method=gemm is for axes ≤ {MAX_GEMM_N} (its matrices are n × 2m); shape {problem.shape}"
        return None

    def plan(self, problem, planner, spec):
        forced = spec.option("method") if spec is not None else None
        if forced and (reason := self._why_not_method(problem, forced)):
            raise PlanningError(reason)
        methods = [forced] if forced else [m for m in METHODS if self._why_not_method(problem, m) is None]
        return best_variant(lambda m: self._plan_method(problem, planner, spec, m), methods,
                            tol=planner.tol(problem))

    def _plan_method(self, problem, planner, spec, method):
        params = {"factors": problem.shape, "kind": problem.kind, "method": method,
                  "modes": modes_word(problem.modes)}
        if problem.low:  # absent for the FNO pattern, so those trees print (and are stored) as before
            params["low"] = modes_word(problem.low)
        b, size = problem.batch, itemsize(problem)
        kept = math.prod(problem.kept_shape)
        if method == "full":
            return self._plan_full(problem, planner, spec, params, kept)
        work, errors = self._pruned_work(problem, planner, b, size)
        return self.node(problem, planner, work, combine(*errors), params=params)

    def _plan_full(self, problem, planner, spec, params, kept):
        whole = attrs.evolve(problem, modes=(), low=(), norm="forward" if problem.inverse else "backward")
        child = planner.plan(whole, spec.child(0) if spec is not None else None)
        b, size = problem.batch, itemsize(problem)
        full = math.prod(whole.out_shape if not problem.inverse else whole.in_shape)
        solver = planner.solver(child.solver)
        if not (planner.at_root(problem) and solver is not None and solver.runs_on_user_tensor(child)):
            work = copy(2 * (kept + (full if problem.inverse else 0)) * b, size, launches=2 * problem.rank)
            return self.node(problem, planner, work, child.error, params=params, children=(child,))
        # at the root a library child runs on the user's complex tensor (TruncateFull.library_call):
        # the cut copies the kept bins, the fill writes the whole spectrum once; the child's packing
        # of split input (library_io, priced in it) is not made
        work = copy(2 * (kept + (full if problem.inverse else 0)) * b, size, launches=problem.rank)
        node = self.node(problem, planner, work, child.error, params=params, children=(child,), direct=True)
        unpacked = library_io(whole, planner)
        dtype = str(problem.real_dtype).removeprefix("torch.")
        return attrs.evolve(node, time_us=node.time_us - planner.profile.time_us(unpacked, dtype),
                            terms=add_terms(node.terms, {k: -v for k, v in work_terms(unpacked, dtype).items()}))

    @staticmethod
    def _pruned_work(problem, planner, b, size):
        """The work of method=gemm, pass by pass on the data as it is at that pass (pruned passes
        shrink it); the inverse runs the same passes on the same row counts, in reverse."""
        u = UNIT_ROUNDOFF[problem.precision]
        a, slope, per_axis = ERROR_GEMM["fp64" if problem.precision == "fp64" else "fp32"]
        shape, modes, last = problem.shape, problem.modes, len(problem.shape) - 1
        cur = list(shape)
        work = Work()
        for axis in [last, *range(last - 1, -1, -1)]:
            n = shape[axis]
            rows = math.prod(cur) // cur[axis] * b
            kept = modes[axis] if axis == last or axis in problem.low else 2 * modes[axis]
            real = 1 if axis == last else 2  # the real pass reads one plane (r2c) or writes one (c2r)
            full_side, kept_side = real * n, 2 * kept
            if axis != last or problem.inverse:  # its planes gathered into one [re | im] operand
                work += _gather(rows, kept_side if problem.inverse else full_side, math.prod(cur[axis + 1:]), size)
            # the GEMM's operands (data, matrix, result) beside its flops, as every GEMM solver counts them
            work += Work(launches=1, bytes=(rows * (full_side + kept_side) + full_side * kept_side) * size)
            work += gemm_work(problem.precision, planner.profile, 2.0 * rows * full_side * kept_side,
                              rows * full_side, size, shape=(rows, full_side, kept_side))
            cur[axis] = kept
        if not problem.inverse and len(shape) > 1:  # the kept re and im planes, moved back, copied out
            work += transpose(2 * b * math.prod(cur), size, run=SHORT_RUN if cur[-1] >= BLOCK_RUN else 1, launches=2)
        longest = math.log2(max(max(shape), 2))
        errors = [u * (a + slope * longest) * (1.0 + per_axis * (len(shape) - 1)),
                  gemm_error(problem.precision, len(shape), planner.probe, problem.n * b)]  # the mode's GEMM stages
        return work, errors

    #: the pruned c2r's norm scale is folded into its last GEMM on the CPU too: as a pass of its own
    #: it read and wrote the whole real output, the plan's largest tensor (512 × 1024 keeping 16: ~560
    #: µs of ~1100 in torch.profiler, more than the GEMM's ~510; busy machine, 2026-11-27)
    folds_scale_always = True

    def build(self, node, ctx):
        pruned = self.build_scaled(node, ctx, 1.0)
        return pruned if pruned is not None else self._build_full(node, ctx)

    def scale_folds(self, node):
        return node.param("method") == "gemm" and node.inverse

    def build_scaled(self, node, ctx, scale):
        """method=gemm: the c2r's last pass (the real GEMM) takes the scale; r2c's last pass is a
        complex one and method=full's is its child's: None (the scale stays a pass)."""
        if node.param("method") != "gemm" or (scale != 1.0 and not self.scale_folds(node)):
            return None
        shape, modes, low = self._shape(node)
        return PrunedRowColumn(shape, modes, node.inverse, ctx, low, scale)

    @staticmethod
    def _shape(node):
        shape = tuple(node.param("factors"))
        modes = tuple(int(m) for m in str(node.param("modes")).split("x"))
        low = tuple(int(a) for a in str(node.param("low", "")).split("x") if a)
        return shape, modes, low

    def _build_full(self, node, ctx):
        shape, modes, low = self._shape(node)
        return TruncateFull(shape, modes, node.inverse, ctx.build(node.children[0]), low)
