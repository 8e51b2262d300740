"""nd: transforms of rank ≥ 2 as row-column passes, one child plan per axis.

The N-D DFT is separable: it is the 1-D DFT applied along each axis in turn, in any order
(FFTW's "rank-geq2" solver; Van Loan 1992, §3.4). Each pass is planned through the planner as
a 1-D batch — the other axes are the batch — so every axis gets its own best solver, and a
matrix engine sees one batched GEMM tree per axis.

Planning order (:func:`passes`): the last (contiguous) axis first, then the others from the
back. For r2c the real transform must come first, on the last axis, and the complex passes run
on the half spectrum (torch.fft.rfftn's layout); c2r runs the complex inverse passes first and
the real one last. The lowering (:class:`NDRowColumn`) keeps the data in one buffer whose re/im
axis travels beside the axis being transformed, so a pass whose child is one GEMM runs on the
data where it lies: no transposes, no per-pass copies (64³ c2c on the accelerators' graph:
17 MB counted against the 12.6 MB of three read+write passes; the lowering it replaced moved
37.9 MB — tests/test_trainium_cost.py). Other children run on planes copied out and back.

``method=lib`` instead calls the device library's own N-D transform (torch.fft.fftn / rfftn /
irfftn) as a leaf, where there is one; the cost model chooses.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from trnplan.core.accuracy import UNIT_ROUNDOFF, combine, log_growth
from trnplan.core.cost import Work, copy, products, transpose
from trnplan.core.errors import PlanningError
from trnplan.kernels import dft_matrix, fused_complex_matrix
from trnplan.kernels.complex import interleave_order, interleave_planes
from trnplan.kernels.gemm import Gemm
from trnplan.planner import native
from trnplan.planner.dft_gemm import chunk_work, node_chunking
from trnplan.planner.leafcost import LeafShape, leaf_work
from trnplan.planner.real import real_gemm_matrix
from trnplan.planner.solver import (
    Solver,
    WholeShape,
    best_variant,
    itemsize,
    library_io,
)

METHODS = ("lib", "rowcol")
#: torch.fft's N-D c2r (irfftn) on the CPU runs well above its r2c, which the leaf model prices
#: alike. Measured 2026-11-27 (torch 2.13.0+cpu, 1 thread, busy 2-vCPU box, medians of 9–15 calls,
#: two runs) irfftn / rfftn = 1.0–1.4 at 32²×512, 6.9–17 at 64²×128, 2.0–14 at 128²×32, 5.7–10 at
#: 128²×128, 2.9–5.9 at 256²×8; 4.9–18 at 16³×128, 1.5 at 32³×16, 1.7–2.1 at 64³×8 (1-D irfft ran
#: at rfft's time; pyFFTW's N-D c2r at 1.1–1.9× its r2c). Beside the truncated solver's pruned
#: inverses (15 truncated shapes timed as r2c and c2r, torch 1 thread, load 5–7; docs/benchmarks.md),
#: the default's c2r measured 3.4–6.3× (one row 0.85×) the r2c's measured/priced ratio at rank 2
#: with a factor 2 here, and 0.8–0.9× (one row 3.4×) at rank 3.
#: Taken per rank, below most measurements: a plan that avoids the N-D c2r (the truncated solver's
#: pruned inverse) is not priced against a default cheaper than it runs
C2R_ND_FACTOR = {2: 4.0, 3: 2.0}


def passes(shape: tuple, kind: str):
    """The 1-D passes of a row-column plan, in order: (axis, kind, data shape before the pass)."""
    rank, cur = len(shape), list(shape)
    if kind == "c2r":
        cur[-1] = shape[-1] // 2 + 1
    out = []
    first = [(rank - 1, "r2c" if kind == "r2c" else "c2c")] if kind != "c2r" else []
    others = [(a, "c2c") for a in range(rank - 2, -1, -1)]
    last = [(rank - 1, "c2r")] if kind == "c2r" else []
    for axis, k in first + others + last:
        out.append((axis, k, tuple(cur)))
        if k == "r2c":
            cur[-1] = shape[-1] // 2 + 1
        elif k == "c2r":
            cur[-1] = shape[-1]
    return out


class NDLibrary(torch.nn.Module):
    """torch.fft.fftn / rfftn / irfftn over the trailing axes (the device library's N-D transform)."""

    def __init__(self, shape: tuple, kind: str, inverse: bool):
        super().__init__()
        self.shape, self.kind, self.inverse = tuple(shape), kind, inverse
        self.in_shape = (*shape[:-1], shape[-1] // 2 + 1) if kind == "c2r" else self.shape

    def library_call(self, norm: str | None = None):
        """The torch.fft function on the user-facing tensor (batch, *in_shape), with ``norm``."""
        dims = tuple(range(-len(self.shape), 0))
        unscaled = "forward" if self.inverse else "backward"
        if self.kind == "r2c":
            return functools.partial(torch.fft.rfftn, dim=dims, norm=norm or unscaled)
        if self.kind == "c2r":
            return functools.partial(torch.fft.irfftn, s=self.shape, dim=dims, norm=norm or unscaled)
        fn = torch.fft.ifftn if self.inverse else torch.fft.fftn
        return functools.partial(fn, dim=dims, norm=norm or unscaled)

    def forward(self, *inputs):
        M = inputs[0].shape[0]
        x = inputs[0] if self.kind == "r2c" else torch.complex(*inputs)
        y = self.library_call()(x.reshape(M, *self.in_shape)).reshape(M, -1)
        return (y,) if self.kind == "c2r" else (y.real, y.imag)


def lean_pass(child) -> bool:
    """Whether a pass runs as GEMMs on the data where it lies (:class:`NDRowColumn`): a dft-gemm
    leaf (one GEMM, or one per chunk of its contraction) or a real DFT-GEMM leaf (``real method=gemm``)."""
    if child.solver == "dft-gemm":
        return True
    return child.solver == "real" and child.param("method") == "gemm"


class PartialGemms(torch.nn.Module):
    """``W @ x`` (``side="left"``; ``x @ W`` for ``"right"``) as one GEMM per run of at most
    ``chunk`` terms of the contraction, each product added to the running sum once
    (:meth:`~trnplan.kernels.gemm.Gemm.accumulate`): a chunked dft-gemm's contraction, on slices
    (views) of the operand instead of a zero-padded, transposed copy of it."""

    def __init__(self, w: np.ndarray, chunk: int, ctx, side: str):
        super().__init__()
        self.side = side
        k = w.shape[1] if side == "left" else w.shape[0]
        self.bounds = [(a, min(a + chunk, k)) for a in range(0, k, chunk)]
        self.gemms = torch.nn.ModuleList(
            Gemm(w[:, a:b] if side == "left" else w[a:b], ctx, side=side) for a, b in self.bounds)

    def forward(self, x):
        dim = -2 if self.side == "left" else -1
        y = self.gemms[0](x.narrow(dim, 0, self.bounds[0][1]))
        for (a, b), gemm in zip(self.bounds[1:], self.gemms[1:], strict=True):
            y = gemm.accumulate(y, x.narrow(dim, a, b - a))
        return y


def lean_order(rank: int, kind: str) -> list[int]:
    """The order in which :class:`NDRowColumn` runs the passes, as indices into :func:`passes`.

    c2c and c2r run the axes first to last (c2r's real pass is last: on the last axis); r2c
    runs them as :func:`passes` lists them (its real pass first, on the last axis, then the
    others from the back). In both orders the re/im axis stays next to the next pass's axis
    (the class docstring)."""
    if kind == "r2c":
        return list(range(rank))
    if kind == "c2r":  # passes(): axes rank-2 … 0, then the real one
        return [*range(rank - 2, -1, -1), rank - 1]
    return list(range(rank - 1, -1, -1))  # passes(): the last axis, then rank-2 … 0


class NDRowColumn(torch.nn.Module):
    """The passes on one buffer whose re/im axis travels with the axis being transformed.

    The data is one real tensor ``(M, …)`` holding the axes of the transform and one axis of
    size 2, the re/im plane ``r``, always next to the axis the next pass transforms. A pass
    over axis ``d`` with ``r`` beside it is then one GEMM over the contiguous pair (``r``, ``d``)
    — ``x.view(lead, 2n, trail) → W @ x`` (a batched GEMM with one shared matrix), or
    ``x.view(lead, 2n) @ Wᵀ`` where ``d`` is last — whose matrix is the fused complex DFT
    (:func:`~trnplan.kernels.complex.fused_complex_matrix`) with its rows and columns ordered
    as the pair lies in and out. Its output pair is written in the order that puts ``r`` beside
    the next axis, so no pass transposes, copies or concatenates anything:

    * c2c, axes first to last: the two planes are stacked once into ``(M, r, d0, d1, …)``; each
      pass maps (``r``, ``d``) to (``d'``, ``r``), which leaves ``r`` before the next axis and,
      after the last, as the innermost axis: the interleaved layout of the complex64 result,
      which the plan packs without a pass.
    * c2r: the same, its last pass the real inverse GEMM over (``r``, ``h``) → the real axis.
    * r2c: the real GEMM on the last axis writes (``r``, ``h``) in place; each following pass,
      from the back, maps (``d``, ``r``) to (``r``, ``d'``): after the first axis the result is
      ``(M, r, d0, …, h)``, the two planes of each batch item one after the other (returned as
      views; the plan packs them).

    This is the DNS sample's layout trick (its axes cycle through the GEMMs instead of being
    transposed) with the re/im axis carried along. A pass whose child is not one GEMM
    (:func:`lean_pass`: a Stockham, butterfly, four-step, half-length real or chunked leaf)
    runs as its own module on planes copied out of the buffer (one transposing copy unless the
    axis is last) and stacked back in (one copy).
    """

    def __init__(self, shape: tuple, kind: str, inverse: bool, children, ctx, scale: float = 1.0):
        super().__init__()
        self.shape, self.kind = tuple(shape), kind
        steps = passes(self.shape, kind)
        self.order = lean_order(len(self.shape), kind)
        self.steps = [steps[i] for i in self.order]
        if scale != 1.0 and not lean_pass(children[self.order[-1]]):
            raise ValueError(f"the norm scale folds into a last pass that is one GEMM, not {children[self.order[-1]]}")
        sign = 1 if inverse else -1
        mods = []
        for i in self.order:
            node, s = children[i], scale if i == self.order[-1] else 1.0
            mods.append(self._gemm(node, steps[i], sign, ctx, s) if lean_pass(node) else ctx.build(node))
        self.passes = torch.nn.ModuleList(mods)
        self.lean = [lean_pass(children[i]) for i in self.order]

    def _gemm(self, node, step, sign, ctx, scale: float = 1.0) -> torch.nn.Module:
        """A lean pass's GEMM; ``scale`` (the plan's norm, on the last pass) is folded into its
        matrix in float64, before the cast."""
        axis, kind, cur = step
        n = self.shape[axis]
        if kind != "c2c":  # the real DFT-GEMM's own matrix: x @ [Re F | Im F] (r2c), [Re X | Im X] @ W (c2r)
            return Gemm(real_gemm_matrix(n, kind == "c2r") * scale, ctx, side="right")
        w = fused_complex_matrix(dft_matrix(n, sign), left=True) * scale  # rows (r', k), columns (r, j)
        order = interleave_order(n)
        w = w[:, order] if self.kind == "r2c" else w[order]  # r2c: (j, r) in, (r', k) out; else (r, j) in, (k, r') out
        trail = math.prod(cur[axis + 1:])
        k, c = node_chunking(node, ctx.precision)
        if k > 1:
            return PartialGemms(w.T, c, ctx, "right") if trail == 1 else PartialGemms(w, c, ctx, "left")
        return Gemm(w.T, ctx, side="right") if trail == 1 else Gemm(w, ctx, side="left")

    def forward(self, *inputs):
        M = inputs[0].shape[0]
        x = inputs[0] if self.kind == "r2c" else torch.stack(inputs, dim=1)  # (M, r, points)
        for (axis, kind, cur), mod, lean in zip(self.steps, self.passes, self.lean, strict=True):
            lead, n, trail = M * math.prod(cur[:axis]), cur[axis], math.prod(cur[axis + 1:])
            if kind == "r2c":
                x = self._r2c(x.reshape(lead, n), mod, lean)
            elif kind == "c2r":
                x = mod(x.reshape(lead, 2 * n)) if lean else mod(*self._planes(x, lead, n, 1))[0]
            elif lean:
                x = mod(x.reshape(lead, 2 * n)) if trail == 1 else mod(x.reshape(lead, 2 * n, trail))
            else:
                x = self._generic(x, mod, lead, n, trail)
        if self.kind == "c2r":
            return (x.reshape(M, -1),)
        x = x.reshape(M, 2, -1) if self.kind == "r2c" else x.reshape(M, -1, 2)
        return (x[:, 0], x[:, 1]) if self.kind == "r2c" else (x[..., 0], x[..., 1])

    @staticmethod
    def _r2c(x, mod, lean):
        """The real pass on the last axis: (rows, n) → (rows, r, h)."""
        if lean:
            return mod(x)
        re, im = mod(x)
        return torch.stack([re, im], dim=1)

    def _planes(self, x, lead, n, trail):
        """The planes of the pair around the pass's axis as ``(rows, n)`` tensors a child takes:
        views where the axis is last, else one transposing copy of both (into one buffer)."""
        pair = x.reshape(lead, n, 2, trail) if self.kind == "r2c" else x.reshape(lead, 2, n, trail)
        re, im = (pair[:, :, 0], pair[:, :, 1]) if self.kind == "r2c" else (pair[:, 0], pair[:, 1])
        if trail == 1:
            return re.reshape(lead, n), im.reshape(lead, n)
        re, im = interleave_planes(re.transpose(1, 2), im.transpose(1, 2))
        return re.reshape(-1, n), im.reshape(-1, n)

    def _generic(self, x, mod, lead, n, trail):
        """A pass by its own module: planes out of the buffer, the child, the pair stacked back
        in the order the next pass reads ((r, d') for r2c, (d', r) else)."""
        re, im = mod(*self._planes(x, lead, n, trail))
        re, im = (t.reshape(lead, trail, -1).transpose(1, 2) for t in (re, im))  # (lead, n', trail)
        return torch.stack([re, im], dim=1 if self.kind == "r2c" else 2)


def rowcol_work(problem, children, size: int) -> tuple[Work, list]:
    """The row-column lowering's own work (:class:`NDRowColumn`), beside its children's: the
    work of its own copies, and ``(i, extra)`` for each lean pass, what the lowering changes in
    pass ``i``'s stage (priced inside it: :meth:`~trnplan.core.cost.CostProfile.priced`).

    The two planes are stacked into one buffer once (not for r2c: its input is real). A lean
    pass (:func:`lean_pass`) is its child's GEMM on the buffer as it lies: the child's own cost
    includes interleaving its ``(re, im)`` pair (dft-gemm's copy; the c2r real GEMM's ``cat``),
    which the buffer makes unnecessary, so that copy is taken off its stage. Any other pass copies
    its planes out (a transposing copy, unless the axis is last or the pass is c2r's real one) and
    stacks its result back (a copy, transposing where the axis is not last).
    """
    b = problem.batch
    work = Work() if problem.kind == "r2c" else copy(2 * math.prod(problem.in_shape) * b, size)
    folded = []
    last = len(problem.shape) - 1
    for i, ((axis, kind, cur), child) in enumerate(zip(passes(problem.shape, problem.kind), children, strict=True)):
        points = math.prod(cur) * b
        if lean_pass(child):
            folded.append((i, _lean_pass_extra(problem, child, axis, kind, cur, size)))
            continue
        if kind == "c2r":
            continue  # the planes are views of the buffer; the child writes the real result
        h = problem.shape[-1] // 2 + 1
        out = points // cur[axis] * h if kind == "r2c" else points
        if kind == "c2c" and axis != last:
            work += transpose(2 * points, size, run=1)  # the planes out, the axis moved last
        work += transpose(2 * out, size, run=1) if axis != last else copy(2 * out, size)  # stacked back
    return work, folded


def _lean_pass_extra(problem, child, axis: int, kind: str, cur, size: int) -> Work:
    """What a lean pass changes in its leaf's own work (:func:`rowcol_work`): the interleaving
    copy not made, the matrix broadcast over the lead axes, the chunked sums added in place."""
    b = problem.batch
    points = math.prod(cur) * b
    extra = Work()
    if kind != "r2c":  # dft-gemm's interleave of the pair, RealGemm's cat([re, im]): not made
        extra += copy(2 * points, size) * -1.0
    lead = b * math.prod(cur[:axis])
    if kind == "c2c" and math.prod(cur[axis + 1:]) > 1 and lead > 1:
        # a pass between other axes is a batched GEMM whose matrix is broadcast over the lead
        # axes: written (XLA:CPU materializes the broadcast: tests/xla/test_traffic_xla.py), then
        # read once per batch item (trnplan.plan.traffic), where the child prices one read
        matrix = (2 * child.n) ** 2 * size * products(problem.precision)
        extra += Work(bytes=(2 * lead - 1) * matrix)
    k, c = node_chunking(child, problem.precision) if kind == "c2c" else (1, 0)
    if k > 1:  # partial sums added in place (each reads the running sum) for the chunked leaf's own
        extra += chunk_work(child.n, child.batch, k, c, size) * -1.0
        extra += Work(launches=k - 1, bytes=(k - 1) * 2 * points * size)
    return extra


class ND(WholeShape, Solver):
    name = "nd"
    #: 2: passes whose errors together exceed the bound are re-planned to shares of it; 3: MKL's fp64 floor;
    #: 4: the lean row-column lowering (one buffer, no transposes around GEMM passes) and its price;
    #: 5: torch.fft's N-D c2r priced at C2R_ND_FACTOR (per rank) × its r2c on the CPU
    version = 5
    composite = True
    takes_factors = True
    kinds = ("c2c", "r2c", "c2r")
    ranks = "n"
    options = ("method", "kind")
    word_options = ("method", "kind")

    def why_not(self, problem, planner, forced):
        return None

    def why_not_spec(self, problem, spec):
        reason = super().why_not_spec(problem, spec)  # WholeShape: the factors and kind=
        if reason is not None:
            return reason
        method = spec.option("method")
        if method is not None and method not in METHODS:
            return f"nd has no method {method!r} (methods: {', '.join(METHODS)})"
        return None

    def plan(self, problem, planner, spec):
        forced = spec.option("method") if spec is not None else None
        methods = [forced] if forced else list(METHODS)
        if "lib" in methods and not planner.has_native_fft(problem.precision):
            if forced:
                raise PlanningError(f"the {problem.device} backend has no N-D FFT library for precision "
                                    f"{problem.precision} (use method=rowcol)")
            methods.remove("lib")
        return best_variant(lambda m: self._plan_method(problem, planner, spec, m), methods,
                            tol=planner.tol(problem))

    def _params(self, problem, method):
        params = {"factors": problem.shape, "method": method}
        if problem.kind != "c2c":
            params["kind"] = problem.kind
        return params

    def _plan_method(self, problem, planner, spec, method):
        b, size, shape = problem.batch, itemsize(problem), problem.shape
        u = UNIT_ROUNDOFF[problem.precision]
        if method == "lib":
            n = problem.n
            # the library's passes are in its measured rate; packing split input is not (nor made at the root)
            leaf = LeafShape.of(problem, (), primes=False, calls=len(shape))
            slow = C2R_ND_FACTOR[min(problem.rank, 3)] if problem.kind == "c2r" and problem.device == "cpu" else 1.0
            work = library_io(problem, planner, launches=3) + leaf_work(problem, planner, "nd", leaf, factor=slow)
            error = native.ERROR_C[problem.precision] * u * log_growth(n)
            if problem.device == "cpu":  # torch.fft's fftn is MKL there (native.mkl_fp64_floor, per axis)
                error = max([error, *(native.mkl_fp64_floor(length, problem.precision) for length in shape)])
            return self.node(problem, planner, work, error, params=self._params(problem, method), direct=True)
        subs = []
        for i, (axis, kind, cur) in enumerate(passes(shape, problem.kind)):
            length = shape[axis]
            elems = math.prod(cur) // cur[axis]  # transforms in this pass, per batch item
            subs.append((problem.unscaled(length, elems * b, problem.inverse, kind=kind),
                         spec.child(i) if spec is not None else None))
        children = self._children(planner, subs, planner.tol(problem))
        work, folded = rowcol_work(problem, children, size)
        error = combine(*(c.error for c in children))
        return self.node(problem, planner, work, error, params=self._params(problem, method),
                         children=tuple(children), folded=folded)

    @staticmethod
    def _children(planner, subs, tol) -> list:
        """Each pass's cheapest plan within the bound; while together they exceed it (errors of
        the passes add in quadrature), two ways to meet it, the cheaper kept:

        * greedy: the passes planned again one at a time, largest error first, each to what the
          others leave of the bound (an equal share ``tol/√passes`` while the others alone
          exceed it). Three fp32 dft-gemm 128 passes are 3.1e-7 each, 5.4e-7 together, over the
          5e-7 bar: one Stockham pass (1.6e-7) brings them to 4.7e-7;
        * equal shares: every pass planned to ``tol/√passes`` (2.9e-7 there: three
          ``(dft-gemm 128 chunk=128)`` passes at 2.7e-7, 4.7e-7 together), which a pass that is
          a little over its share alone (a finer GEMM contraction) meets more cheaply than one
          pass of another family that takes up the whole rest.
        """
        first = [planner.plan(sub, child_spec, tol=tol) for sub, child_spec in subs]
        if combine(*(c.error for c in first)) <= tol:
            return first
        children = list(first)
        for i in sorted(range(len(children)), key=lambda i: -children[i].error):
            if combine(*(c.error for c in children)) <= tol:
                break
            rest = sum(c.error**2 for j, c in enumerate(children) if j != i)
            share = math.sqrt(tol * tol - rest) if rest < tol * tol else tol / math.sqrt(len(children))
            tighter = planner.plan_share(subs[i][0], subs[i][1], share)
            if tighter is not None:
                children[i] = tighter
        equal = [planner.plan_share(sub, child_spec, tol / math.sqrt(len(subs))) for sub, child_spec in subs]
        if None in equal or combine(*(c.error for c in equal)) > tol:
            return children
        if combine(*(c.error for c in children)) > tol or sum(c.time_us for c in equal) < sum(
                c.time_us for c in children):
            return equal
        return children

    def runs_on_user_tensor(self, node):
        return node.param("method") == "lib"

    def build(self, node, ctx):
        shape = tuple(node.param("factors"))
        kind = node.param("kind", "c2c")
        if node.param("method") == "lib":
            return NDLibrary(shape, kind, node.inverse)
        return NDRowColumn(shape, kind, node.inverse, node.children, ctx)

    def scale_folds(self, node):
        """The row-column lowering whose last pass is one GEMM on the buffer (any other last pass
        is a module of its own: the scale stays a pass)."""
        if node.param("method") == "lib":
            return False
        shape = tuple(node.param("factors"))
        return lean_pass(node.children[lean_order(len(shape), node.param("kind", "c2c"))[-1]])

    def build_scaled(self, node, ctx, scale):
        """The scale goes into the last GEMM pass's matrix (:meth:`scale_folds`)."""
        if not self.scale_folds(node):
            return None
        shape = tuple(node.param("factors"))
        return NDRowColumn(shape, node.param("kind", "c2c"), node.inverse, node.children, ctx, scale)
