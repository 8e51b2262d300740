"""nd: transforms of rank ≥ 2 as row-column passes, one child plan per axis.

The N-D DFT is separable: it is the 1-D DFT applied along each axis in turn, in any order
(FFTW's "rank-geq2" solver; Van Loan 1992, §3.4). Each pass is planned through the planner as
a 1-D batch — the other axes are the batch — so every axis gets its own best solver, and a
matrix engine sees one batched GEMM tree per axis.

Order: the last (contiguous) axis first, then the others from the back. For r2c the real
transform must come first, on the last axis, and the complex passes run on the half spectrum
(torch.fft.rfftn's layout); c2r runs the complex inverse passes first and the real one last.
A pass over a non-last axis moves that axis last (a transposing copy), runs, and moves it back.
On the complex side the copy writes re and im into one interleaved buffer (one pass, not one per
plane), which a GEMM leaf reads as it lies; so does the final gather into ``(batch, points)``,
whose result the plan then packs into the complex output without another pass.

``method=lib`` instead calls the device library's own N-D transform (torch.fft.fftn / rfftn /
irfftn) as a leaf, where there is one; the cost model chooses.
"""

from __future__ import annotations

import functools
import math

import torch

from trnplan.core.accuracy import UNIT_ROUNDOFF, combine, log_growth
from trnplan.core.cost import Work, copy, transpose
from trnplan.core.errors import PlanningError
from trnplan.kernels.complex import interleave_planes
from trnplan.planner import native
from trnplan.planner.leafcost import LeafShape, leaf_work
from trnplan.planner.solver import (
    Solver,
    WholeShape,
    best_variant,
    itemsize,
    library_io,
)

METHODS = ("lib", "rowcol")


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


class NDRowColumn(torch.nn.Module):
    """One child module per axis, applied in :func:`passes` order on (M, *shape) data."""

    def __init__(self, shape: tuple, kind: str, inverse: bool, children):
        super().__init__()
        self.shape, self.kind = tuple(shape), kind
        self.steps = passes(self.shape, kind)
        self.passes = torch.nn.ModuleList(children)

    def forward(self, *inputs):
        M = inputs[0].shape[0]
        state = tuple(t.reshape(M, *self.steps[0][2]) for t in inputs)
        last = len(self.shape)  # the last data axis (dim 0 is the batch)
        for (axis, _kind, _before), child in zip(self.steps, self.passes, strict=True):
            dim = axis + 1
            moved = [t.movedim(dim, -1) for t in state] if dim != last else list(state)
            if dim != last and len(moved) == 2:
                moved = list(interleave_planes(*moved))  # one transposing copy for both planes
            lead = moved[0].shape[:-1]
            out = child(*(t.reshape(-1, t.shape[-1]) for t in moved))
            out = [t.reshape(*lead, t.shape[-1]) for t in out]
            state = tuple(t.movedim(-1, dim) for t in out) if dim != last else tuple(out)
        if len(state) == 2 and not all(t.is_contiguous() for t in state):
            state = interleave_planes(*state)  # one gather for both planes, packed by the plan without a copy
        return tuple(t.reshape(M, -1) for t in state)


class ND(WholeShape, Solver):
    name = "nd"
    #: 2: passes whose errors together exceed the bound are re-planned to shares of it; 3: MKL's fp64 floor
    version = 3
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
        if "lib" in methods and not planner.backend.has_native_fft(problem.precision):
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
        total_out = math.prod(problem.out_shape)
        u = UNIT_ROUNDOFF[problem.precision]
        if method == "lib":
            n = problem.n
            # the library's passes are in its measured rate; packing split input is not (nor made at the root)
            leaf = LeafShape.of(problem, (), primes=False, calls=len(shape))
            work = library_io(problem, planner, launches=3) + leaf_work(problem, planner, "nd", leaf)
            error = native.ERROR_C[problem.precision] * u * log_growth(n)
            if problem.device == "cpu":  # torch.fft's fftn is MKL there (native.mkl_fp64_floor, per axis)
                error = max([error, *(native.mkl_fp64_floor(length, problem.precision) for length in shape)])
            return self.node(problem, planner, work, error, params=self._params(problem, method), direct=True)
        subs, work = [], Work()
        for i, (axis, kind, cur) in enumerate(passes(shape, problem.kind)):
            length = shape[axis]
            elems = math.prod(cur) // cur[axis]  # transforms in this pass, per batch item
            subs.append((problem.unscaled(length, elems * b, problem.inverse, kind=kind),
                         spec.child(i) if spec is not None else None))
            if axis != len(shape) - 1:
                # the pass's axis moved last: a transposing copy of re and im (movedim is a view;
                # the reshape to rows copies). Moving it back is a view again, which the next
                # pass's copy (or the final one) reads
                work += transpose(2 * math.prod(cur) * b, size, run=1, launches=2)
        # the final reshape to (batch, points): a copy of re and im, transposing after a non-last pass
        work += (transpose(2 * total_out * b, size, run=1, launches=2) if len(shape) > 1 and problem.kind != "c2r"
                 else copy(2 * total_out * b, size, launches=2))
        children = self._children(planner, subs, planner.tol(problem))
        error = combine(*(c.error for c in children))
        return self.node(problem, planner, work, error, params=self._params(problem, method),
                         children=tuple(children))

    @staticmethod
    def _children(planner, subs, tol) -> list:
        """Each pass's cheapest plan within the bound; while together they exceed it (errors of
        the passes add in quadrature), the passes are planned again one at a time, largest error
        first, each to what the others leave of the bound (an equal share ``tol/√passes`` while
        the others alone exceed it). Three fp32 dft-gemm 128 passes are 3.1e-7 each, 5.4e-7
        together, over the 5e-7 bar: one Stockham pass (1.6e-7) brings them to 4.7e-7, where
        three Stockham passes would cost three times the GEMM work."""
        children = [planner.plan(sub, child_spec, tol=tol) for sub, child_spec in subs]
        for i in sorted(range(len(children)), key=lambda i: -children[i].error):
            if combine(*(c.error for c in children)) <= tol:
                break
            rest = sum(c.error**2 for j, c in enumerate(children) if j != i)
            share = math.sqrt(tol * tol - rest) if rest < tol * tol else tol / math.sqrt(len(children))
            tighter = planner.plan_share(subs[i][0], subs[i][1], share)
            if tighter is not None:
                children[i] = tighter
        return children

    def runs_on_user_tensor(self, node):
        return node.param("method") == "lib"

    def build(self, node, ctx):
        shape = tuple(node.param("factors"))
        kind = node.param("kind", "c2c")
        if node.param("method") == "lib":
            return NDLibrary(shape, kind, node.inverse)
        return NDRowColumn(shape, kind, node.inverse, [ctx.build(c) for c in node.children])
