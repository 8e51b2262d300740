"""Distributed FFTs over ``torch.distributed``: slab and pencil N-D transforms, six-step 1-D.

The standard transpose method of FFTW-MPI, heFFTe and cuFFTMp: every rank transforms the axes
it holds whole with an ordinary local :func:`trnplan.plan_many` plan, then an all-to-all
*transpose* redistributes the data so that the next axes are whole, and so on; by default a
last transpose puts the output back in the input's distribution.

* **slab** (rank ≥ 2): split along axis 0 over the P ranks. Local transform over axes 1..,
  transpose (axis 0 whole, axis 1 split), 1-D transforms along axis 0, transpose back.
* **pencil** (rank 3): split along axes 0 and 1 over a P0×P1 process grid (P0 ≤ P1, as
  square as P allows). Three 1-D passes (axes 2, 1, 0) with a transpose inside a grid row and
  one inside a grid column between them, and two transposes back.
* **1-D** (rank 1): Bailey's six-step algorithm, N = n1·n2 viewed as an n1×n2 matrix:
  transpose, n1-point DFTs, twiddle, transpose, n2-point DFTs, transpose to natural order.

The only collective on the data path is ``torch.distributed.all_to_all_single`` (with uneven
split sizes, on real views of the complex data); plan time adds one ``all_gather`` of a small
int64 descriptor that detects arguments differing across ranks, and (pencil only)
``new_group`` for the grid's rows and columns. gloo's ``all_to_all`` (the list form) rejects
blocks of different sizes in torch 2.13, so uneven splits need the single-tensor form anyway.

References
----------
.. [1] M. Frigo and S. G. Johnson, "FFTW-MPI", FFTW 3.3 manual, ch. 6 (2012).
.. [2] D. H. Bailey, "FFTs in external or hierarchical memory", J. Supercomputing 4 (1990).
.. [3] A. Ayala et al., "heFFTe: Highly Efficient FFT for Exascale", ICCS (2020).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
import torch.distributed as dist

from trnplan.backends.accel import is_accelerator_kind
from trnplan.core import state
from trnplan.core.collectives import DFT_RATES, PROFILES, CollectiveProfile, profile_for
from trnplan.core.errors import NotSupportedYet
from trnplan.core.problem import NORMS, PRECISIONS, Problem
from trnplan.plan.api import DEFAULT_CACHE
from trnplan.plan.api import plan_many as _local_plan_many
from trnplan.plan.autograd import PlanFunction
from trnplan.planner.real import hermitian_weights

__all__ = ["DistributedPlan", "plan_many", "predict", "split_sizes"]

LAYOUTS = ("slab", "pencil")
_KIND_CODES = {"c2c": 0, "r2c": 1, "c2r": 2}
_DTYPE_CODES = {"complex64": 0, "complex128": 1}
_PRECISION_CODES = {name: i for i, name in enumerate((*PRECISIONS, "auto"))}
_NORM_CODES = {name: i for i, name in enumerate(NORMS)}
_LAYOUT_CODES = {"slab": 0, "pencil": 1}
_EFFORT_CODES = {"estimate": 0, "measure": 1, "patient": 2, "wisdom_only": 3}
_MAX_RANK = 16
#: (world size, P0, P1, backend) -> (the world group they were made in, ((column group, r0),
#: (row group, r1))): new_group is a collective over the whole world and every group costs
#: sockets/communicators, so each grid's groups are made once per world
_GRID_GROUPS: dict = {}
state.register("distributed.grid_groups", _GRID_GROUPS.clear)


# ---------------------------------------------------------------------- block distribution
def split_sizes(n: int, parts: int) -> list[int]:
    """Block sizes of ``n`` items over ``parts`` ranks: the first ``n % parts`` get one more.

    Parameters
    ----------
    n : int
        Length of the distributed axis.
    parts : int
        Number of ranks sharing it.

    Returns
    -------
    list of int
        ``parts`` sizes (some 0 when ``n < parts``) summing to ``n``; rank ``q`` holds indices
        ``sum(sizes[:q]) .. sum(sizes[:q+1]) - 1``, the same rule as FFTW-MPI's default blocks
        when ``parts`` divides ``n``.

    Examples
    --------
    >>> split_sizes(6, 4)
    [2, 2, 1, 1]
    """
    base, extra = divmod(n, parts)
    return [base + (1 if q < extra else 0) for q in range(parts)]


def _offset(n: int, parts: int, q: int) -> int:
    return sum(split_sizes(n, parts)[:q])


def _balanced_grid(p: int) -> tuple[int, int]:
    """P0×P1 = p with P0 ≤ P1 and P0 the largest divisor of p not above √p (4 → 2×2, 6 → 2×3)."""
    p0 = max(d for d in range(1, math.isqrt(p) + 1) if p % d == 0)
    return p0, p // p0


def _six_step_factors(n: int, parts: int) -> tuple[int, int]:
    """n = n1·n2 for the 1-D six-step: n1 the divisor nearest √n, preferring both divisible by ``parts``.

    Divisible factors give every rank the same block in every transpose (no idle rank); among
    those (or among all, if none) the one nearest √n keeps the two DFT lengths and the three
    transposes balanced.
    """
    divisors = [d for d in range(1, n + 1) if n % d == 0] if n <= 1 << 20 else \
        sorted({d for k in range(1, math.isqrt(n) + 1) if n % k == 0 for d in (k, n // k)})
    root = math.sqrt(n)

    def score(d):
        return (not (d % parts == 0 and (n // d) % parts == 0), abs(math.log(d / root)), d)

    n1 = min(divisors, key=score)
    return n1, n // n1


# ---------------------------------------------------------------------- steps
class _Transpose:
    """All-to-all inside ``group`` (size Q, my index q): ``gather`` axis becomes whole, ``scatter`` split.

    Before: local ``gather`` extent ``sizes_g[q]``, ``scatter`` whole. After: ``gather`` whole,
    ``scatter`` extent ``sizes_s[q]``. Rank j receives the slice of my ``scatter`` axis it owns.
    Implemented with one ``all_to_all_single`` on the real view of a complex buffer laid out
    scatter-axis-first, so each destination's block is one contiguous run.
    """

    def __init__(self, group, q: int, qsize: int, gather: int, scatter: int, gshape: tuple,
                 local_in: tuple, local_out: tuple, batch: int, elem_bytes: int, label: str, split: bool = False):
        self.group, self.q, self.qsize, self.split = group, q, qsize, split
        self.gather, self.scatter, self.gshape = gather, scatter, gshape
        self.local_in, self.local_out, self.label = local_in, local_out, label
        self.sizes_g = split_sizes(gshape[gather], qsize)
        self.sizes_s = split_sizes(gshape[scatter], qsize)
        # elements per (scatter index, gather index), then per scatter index
        per_g = batch * math.prod(n for a, n in enumerate(local_in) if a not in (gather, scatter))
        rest = per_g * local_in[gather]
        self.send = [s * rest for s in self.sizes_s]
        self.recv = [self.sizes_s[q] * per_g * g for g in self.sizes_g]
        self.bytes_sent = sum(c for j, c in enumerate(self.send) if j != q) * elem_bytes

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.qsize == 1:
            return x
        # split form (no complex dtype on the device): x is real (batch, *local, 2), the pair last,
        # the same bytes as the complex view_as_real: one all_to_all_single carries both parts
        split = not x.is_complex() and self.split
        s, g = 1 + self.scatter, 1 + self.gather  # tensor dims: (batch, *local[, 2])
        t = x.movedim(s, 0).contiguous()
        flat = torch.view_as_real(t).reshape(-1) if t.is_complex() else t.reshape(-1)
        factor = 2 if t.is_complex() or split else 1
        out = torch.empty(sum(self.recv) * factor, dtype=flat.dtype, device=flat.device)
        dist.all_to_all_single(out, flat, output_split_sizes=[c * factor for c in self.recv],
                               input_split_sizes=[c * factor for c in self.send], group=self.group)
        if t.is_complex():
            out = torch.view_as_complex(out.view(-1, 2))
        elif split:
            out = out.view(-1, 2)
        g_moved = g + 1 if g < s else g  # where the gather axis sits once scatter moved to the front
        moved = list(t.shape[:-1] if split else t.shape)
        pieces = []
        for j, chunk in enumerate(out.split(self.recv)):
            moved[0], moved[g_moved] = self.sizes_s[self.q], self.sizes_g[j]
            pieces.append(chunk.view(*moved, 2) if split else chunk.view(moved))
        return torch.cat(pieces, dim=g_moved).movedim(0, s)

    def describe(self) -> str:
        return (f"transpose ({self.label}, {self.qsize} ranks): axis {self.gather} whole, axis {self.scatter} "
                f"split; local {self.local_in} → {self.local_out}; sends {_bytes(self.bytes_sent)}")


class _Stage:
    """Local transforms over the whole axes ``axes`` (a contiguous run) with one trnplan plan."""

    def __init__(self, axes: tuple, kind: str, local_in: tuple, local_out: tuple, transform_shape: tuple,
                 batch: int, plan_kwargs: dict, out_dtype: torch.dtype, device, split: bool = False):
        self.axes, self.kind, self.local_in, self.local_out = axes, kind, local_in, local_out
        self.split = split
        self.transform_shape, self.out_dtype, self.device = transform_shape, out_dtype, device
        self.trailing = axes[-1] == len(local_in) - 1
        self.count = batch * math.prod(local_in) // math.prod(local_in[a] for a in axes)
        self.plan = None
        if self.count:  # a rank with an empty block (n0 < P) plans nothing and sends nothing
            self.plan = _local_plan_many(transform_shape, self.count, kind=kind, **plan_kwargs)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        pair_out = self.split and self.kind != "c2r"  # split form: (…, 2) real pairs, except c2r's real output
        if self.plan is None:
            shape = (b, *self.local_out, 2) if pair_out else (b, *self.local_out)
            dtype = (torch.float64 if self.out_dtype == torch.complex128 else torch.float32) if self.split else None
            return torch.empty(shape, dtype=dtype or self.out_dtype, device=x.device)
        if not self.split:
            rows, back = self._rows(x)
            return back(self.plan.execute(rows))
        # split form: the local plan's split interface (execute_split), compiled whole on the device
        if self.kind == "r2c":  # real block in, pair out
            rows, back = self._rows(x)
            yr, yi = self.plan.execute_split(rows)
            return torch.stack((back(yr), back(yi)), dim=-1)
        (re, back), (im, _) = self._rows(x[..., 0]), self._rows(x[..., 1])
        y = self.plan.execute_split((re, im))
        return back(y) if self.kind == "c2r" else torch.stack((back(y[0]), back(y[1])), dim=-1)

    def _rows(self, x: torch.Tensor):
        """(the rows the local plan transforms, the map of its output back to (b, *local_out))."""
        b = x.shape[0]
        dims = [1 + a for a in self.axes]
        if self.trailing:
            return x.reshape(-1, *x.shape[dims[0]:]), lambda y: y.reshape(b, *self.local_out)
        last = x.ndim - len(dims)
        t = x.movedim(dims, list(range(last, x.ndim))).contiguous()
        lead = t.shape[:last]

        def back(y):
            return y.reshape(*lead, *self.plan.problem.out_shape).movedim(list(range(last, x.ndim)), dims)

        return t.reshape(-1, *t.shape[last:]), back

    def describe(self) -> str:
        axes = ",".join(map(str, self.axes))
        tree = str(self.plan.tree) if self.plan is not None else "(none: empty local block)"
        return (f"local {self.kind} over axis {axes} {self.transform_shape} × {self.count}: "
                f"{self.local_in} → {self.local_out}; plan {tree}")


class _Twiddle:
    """Six-step twiddle: element (k1, j2) times exp(±2πi·k1·j2/N), from float64 with exact index reduction."""

    def __init__(self, n: int, rows: int, col0: int, cols: int, sign: int, dtype: torch.dtype, device,
                 split: bool = False):
        k1 = np.arange(rows, dtype=np.int64)[:, None]
        j2 = np.arange(col0, col0 + cols, dtype=np.int64)[None, :]
        angle = sign * 2.0 * np.pi * ((k1 * j2) % n) / n  # (j*k) % n first: exact in int64
        self.split = split
        if split:  # cos and sin cast once from float64 to the real dtype, then moved
            real = torch.float64 if dtype == torch.complex128 else torch.float32
            self.cos, self.sin = (torch.as_tensor(f(angle), dtype=real).to(device) for f in (np.cos, np.sin))
        else:
            self.factor = torch.as_tensor(np.exp(1j * angle), dtype=dtype, device=device)
        self.shape = (rows, cols)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.split:  # (re + i·im)(cos + i·sin), on the (…, 2) pair
            re, im = x[..., 0], x[..., 1]
            return torch.stack((re * self.cos - im * self.sin, re * self.sin + im * self.cos), dim=-1)
        return x * self.factor

    def describe(self) -> str:
        return f"twiddle {self.shape} (exp(±2πi·k1·j2/N), local columns)"


class _Swap:
    """Relabel a local (a, b) block as (b, a): the six-step's local transpose to natural order."""

    def __init__(self, local_in: tuple):
        self.local_in = local_in

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2)

    def describe(self) -> str:
        return f"local transpose {self.local_in} → {self.local_in[::-1]}"


def _bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------------- layout (pure: no collectives)
def _layout(kind: str, shape: tuple, layout: str, grid: tuple, coords: tuple, ti: bool, to: bool,
            factors: tuple | None):
    """The step list for one rank, as data: ``[(op, ...)]``, plus local input and output shapes.

    Pure arithmetic on block sizes, so every rank can compute every other rank's shapes and
    send volumes without communicating. ``op`` is ``"stage"`` (axes, kind, shape before, shape
    after, transform shape), ``"transpose"`` (grid dim, gather axis, scatter axis, global shape),
    ``"twiddle"`` or ``"swap"``.
    """
    if len(shape) == 1:
        return _layout_1d(grid, coords, ti, to, factors)
    if math.prod(grid) == 1:
        # one rank holds everything: one local N-D plan, the same as trnplan.plan_many (and the
        # baseline the scaling benchmark divides by)
        half = (*shape[:-1], shape[-1] // 2 + 1)
        gin, gout = (half if kind == "c2r" else shape), (half if kind == "r2c" else shape)
        return [("stage", tuple(range(len(shape))), gin)], gin, gout
    return _layout_grid(kind, shape, layout, grid, coords, ti, to)


def _local(gshape: tuple, dist_map: dict, grid: tuple, coords: tuple) -> tuple:
    """This rank's block of a global shape whose axis ``a`` is split over grid dim ``dist_map[a]``."""
    return tuple(split_sizes(n, grid[dist_map[a]])[coords[dist_map[a]]] if a in dist_map else n
                 for a, n in enumerate(gshape))


def _layout_1d(grid: tuple, coords: tuple, ti: bool, to: bool, factors: tuple):
    """The six-step 1-D pipeline on the n1 × n2 matrix of the signal, rows over the ranks."""
    n1, n2 = factors
    gmat = (n1, n2)
    if not ti:  # natural input: rows j1 of A[j1, j2] = x[n2·j1 + j2]
        steps = [("transpose", 0, 0, 1, gmat), ("stage", (0,), gmat), ("twiddle",),
                 ("transpose", 0, 1, 0, gmat), ("stage", (1,), gmat)]
        if not to:
            steps += [("swap",), ("transpose", 0, 1, 0, (n2, n1))]
        gout = gmat if to else (n2, n1)
    else:  # transposed input D[k1, k2] = x[k1 + n1·k2], rows k1: the reverse pipeline
        steps = [("stage", (1,), gmat), ("transpose", 0, 0, 1, gmat), ("twiddle",),
                 ("stage", (0,), gmat), ("transpose", 0, 1, 0, gmat)]
        gout = gmat
    lin, lout = _local(gmat, {0: 0}, grid, coords), _local(gout, {0: 0}, grid, coords)
    return steps, ((lin[0] * lin[1],) if not ti else lin), ((lout[0] * lout[1],) if not to else lout)


def _grid_route(layout: str, kind: str, ti: bool, rank: int):
    """(distributions, the transposes linking them, the stages with the distribution each needs)."""
    backwards = kind == "c2r" or ti
    if layout == "slab":
        # distributions: D0 = axis 0 split over grid dim 0; D1 = axis 1 split
        dists = [{0: 0}, {1: 0}]
        links = [(0, 0, 1)]  # D0 -> D1: in grid dim 0, gather axis 0, scatter axis 1
        local_axes = tuple(range(1, rank))
        stages = [((0,), 1), (local_axes, 0)] if backwards else [(local_axes, 0), ((0,), 1)]
    else:
        # X-pencils (0 over P0, 1 over P1) -> (0 over P0, 2 over P1) -> (1 over P0, 2 over P1)
        dists = [{0: 0, 1: 1}, {0: 0, 2: 1}, {1: 0, 2: 1}]
        links = [(1, 1, 2), (0, 0, 1)]
        stages = [((0,), 2), ((1,), 1), ((2,), 0)] if backwards else [((2,), 0), ((1,), 1), ((0,), 2)]
    return dists, links, stages


def _layout_grid(kind: str, shape: tuple, layout: str, grid: tuple, coords: tuple, ti: bool, to: bool):
    """Slab or pencil: each stage in the distribution that keeps its axes local, transposes between."""
    rank = len(shape)
    complex_shape = (*shape[:-1], shape[-1] // 2 + 1) if kind != "c2c" else shape
    dists, links, stages = _grid_route(layout, kind, ti, rank)
    start = len(dists) - 1 if ti else 0
    end = len(dists) - 1 if to else 0
    steps, cur = [], start
    gshape = complex_shape if kind == "c2r" else shape
    gin = gshape

    def walk(target):
        nonlocal cur
        while cur != target:
            if target > cur:
                dim, ga, sc = links[cur]
                steps.append(("transpose", dim, ga, sc, gshape))
                cur += 1
            else:
                dim, ga, sc = links[cur - 1]
                steps.append(("transpose", dim, sc, ga, gshape))
                cur -= 1

    for axes, need in stages:
        walk(need)
        steps.append(("stage", axes, gshape))
        if kind == "r2c" and rank - 1 in axes:
            gshape = complex_shape
        elif kind == "c2r" and rank - 1 in axes:
            gshape = shape
    walk(end)
    return steps, _local(gin, dists[start], grid, coords), _local(gshape, dists[end], grid, coords)


# ---------------------------------------------------------------------- the plan
class DistributedPlan:
    """A distributed FFT plan: this rank's local plans and transposes. Build with :func:`plan_many`.

    Every rank of the group holds its own ``DistributedPlan`` for the same global transform;
    :meth:`execute` is collective (every rank must call it, in the same order as its other
    collectives on the group).

    Attributes
    ----------
    problem : Problem
        The global transform (``shape``, ``batch``, kind, direction, dtype, precision, norm).
    layout : {"slab", "pencil", "1d"}
        The decomposition.
    grid : tuple of int
        Process grid: ``(P,)`` for slab and 1-D, ``(P0, P1)`` for pencil.
    coords : tuple of int
        This rank's position in the grid (pencil: ``rank = r0·P1 + r1``).
    local_shape : tuple of int
        Trailing shape of this rank's input block (its leading dims multiply to ``batch``).
    local_out_shape : tuple of int
        Trailing shape of this rank's output block.
    local_slices : tuple of slice
        Where this rank's input block sits in the global input (one slice per global axis;
        for 1-D with natural input, one slice of the flat index).
    local_out_slices : tuple of slice
        Where this rank's output block sits in the global output (1-D transposed output: in the
        (n1, n2) matrix ``D[k1, k2] = X[k1 + n1·k2]``).
    bytes_sent : int
        Bytes this rank sends to other ranks per :meth:`execute` (data only).
    transposed_input, transposed_output : bool
        Whether the input (output) is in the transposed distribution (see docs/distributed.md).
    """

    def __init__(self, problem: Problem, *, layout: str, group, grid: tuple, coords: tuple, groups: tuple,
                 transposed_input: bool, transposed_output: bool, factors, device, plan_kwargs: dict):
        self.problem, self.layout, self.group = problem, layout, group
        self.grid, self.coords, self._groups = grid, coords, groups
        self.transposed_input, self.transposed_output = transposed_input, transposed_output
        self.factors, self.device, self._plan_kwargs = factors, device, plan_kwargs
        # a device without complex data (TorchNeuron): (re, im) in and out, (…, 2) real blocks inside
        self.split = is_accelerator_kind(torch.device(device).type)
        p, self.batch, cdtype = problem, problem.batch, problem.torch_dtype
        elem = 16 if p.dtype == "complex128" else 8
        kw = dict(inverse=p.inverse, dtype=cdtype, precision=p.precision, norm=p.norm, device=device, **plan_kwargs)
        raw, self.local_shape, self.local_out_shape = _layout(
            p.kind, p.shape, layout, grid, coords, transposed_input, transposed_output, factors)
        self._steps = []
        # build: track this rank's local block through the steps (1-D: as the (n1, n2) matrix)
        cur = self._mat_in_shape() if p.rank == 1 and not transposed_input else self.local_shape
        for op in raw:
            if op[0] == "transpose":
                _, gdim, ga, sc, gshape = op
                out, (grp, q) = list(cur), groups[gdim]
                out[ga], out[sc] = gshape[ga], split_sizes(gshape[sc], grid[gdim])[coords[gdim]]
                names = {0: "whole group" if len(grid) == 1 else "grid column", 1: "grid row"}
                self._steps.append(_Transpose(grp, q, grid[gdim], ga, sc, gshape, tuple(cur), tuple(out),
                                              p.batch, elem, names[gdim], self.split))
                cur = tuple(out)
            elif op[0] == "stage":
                _, axes, gshape = op
                stage_kind = "c2c"
                if p.kind != "c2c" and (p.rank - 1) in axes and p.rank > 1:
                    stage_kind = p.kind
                if p.rank == 1:
                    tshape = (factors[axes[0]],)
                elif stage_kind == "c2c":
                    tshape = tuple(gshape[a] for a in axes)
                else:  # r2c/c2r plans are named by their real shape
                    tshape = tuple(p.shape[a] for a in axes)
                out = list(cur)
                if stage_kind == "r2c":
                    out[-1] = p.half
                elif stage_kind == "c2r":
                    out[-1] = p.shape[-1]
                out_dtype = p.real_dtype if stage_kind == "c2r" else cdtype
                self._steps.append(_Stage(tuple(axes), stage_kind, tuple(cur), tuple(out), tshape, p.batch,
                                          kw, out_dtype, device, self.split))
                cur = tuple(out)
            elif op[0] == "twiddle":
                n1, n2 = factors
                q = coords[0]
                cols = split_sizes(n2, grid[0])
                self._steps.append(_Twiddle(p.n, n1, sum(cols[:q]), cols[q], p.sign, cdtype, device, self.split))
            elif op[0] == "swap":
                self._steps.append(_Swap(tuple(cur)))
                cur = tuple(cur[::-1])
        self._adjoint: DistributedPlan | None = None
        self._weights = None
        self.local_slices = self._slices(self.local_shape, out=False)
        self.local_out_slices = self._slices(self.local_out_shape, out=True)
        self.bytes_sent = sum(s.bytes_sent for s in self._steps if isinstance(s, _Transpose))

    # ------------------------------------------------------------------ shapes
    def _mat_in_shape(self) -> tuple:
        n1, n2 = self.factors
        q, parts = self.coords[0], self.grid[0]
        return (split_sizes(n1, parts)[q], n2)

    def _slices(self, local: tuple, out: bool) -> tuple:
        p, q = self.problem, self.coords
        if p.rank == 1:
            n1, n2 = self.factors
            if (self.transposed_output if out else self.transposed_input):
                return (slice(_offset(n1, self.grid[0], q[0]), _offset(n1, self.grid[0], q[0]) + local[0]),
                        slice(0, n2))
            rows, width = (n2, n1) if out and not self.transposed_input else (n1, n2)
            start = _offset(rows, self.grid[0], q[0]) * width
            return (slice(start, start + local[0]),)
        gshape = p.out_shape if out else p.in_shape
        transposed = self.transposed_output if out else self.transposed_input
        if self.layout == "slab":
            dist_map = {1: 0} if transposed else {0: 0}
        else:
            dist_map = {1: 0, 2: 1} if transposed else {0: 0, 1: 1}
        return tuple(slice(_offset(n, self.grid[dist_map[a]], q[dist_map[a]]),
                           _offset(n, self.grid[dist_map[a]], q[dist_map[a]]) + local[a])
                     if a in dist_map else slice(0, n) for a, n in enumerate(gshape))

    # ------------------------------------------------------------------ running
    def execute(self, x: torch.Tensor) -> torch.Tensor:
        """Run the distributed transform on this rank's block (collective: every rank must call it).

        Parameters
        ----------
        x : torch.Tensor
            This rank's input block, shape ``(*leading, *local_shape)`` with the leading dims
            multiplying to ``batch``: complex (``dtype``) for c2c and c2r, real (float32 for
            complex64, float64 for complex128) for r2c; on the plan's device.

        Returns
        -------
        torch.Tensor
            This rank's output block, shape ``(*leading, *local_out_shape)``: complex for c2c and
            r2c, real for c2r.

        Raises
        ------
        TypeError
            ``x`` is not a tensor, or has the wrong dtype (real vs complex, precision).
        ValueError
            ``x``'s trailing shape is not :attr:`local_shape`, its leading dims do not multiply to
            ``batch``, or it is on another device. Raised on this rank before any collective; the
            other ranks then wait in their first transpose until the process group's timeout, so
            check shapes with :attr:`local_shape` (plan time already checked that every rank
            asked for the same global transform).

        Notes
        -----
        Differentiable: backward runs :meth:`adjoint` (collective too: every rank must run its
        backward pass).

        On a device without a complex dtype (TorchNeuron's ``neuron``) the plan runs in split
        form: ``x`` is a pair ``(re, im)`` of float32 blocks of shape ``(*leading, *local_shape)``
        and the result is such a pair (a complex tensor there is refused: NCC_EVRF004).
        """
        if self.split:
            xs = self._check_split(x)
            if torch.is_grad_enabled() and any(t.requires_grad for t in xs):
                out = _SplitFunction.apply(self, *xs)
            else:
                out = self.run_split(*xs)
            return out[0] if len(out) == 1 else out
        self._check(x)
        if x.requires_grad and torch.is_grad_enabled():
            return PlanFunction.apply(self, x)  # backward runs the adjoint distributed plan
        return self.run(x)

    __call__ = execute

    def run(self, x: torch.Tensor) -> torch.Tensor:
        """The transform of a validated local block, outside autograd (PlanFunction calls it)."""
        lead = x.shape[: x.ndim - len(self.local_shape)]
        if self.problem.rank == 1 and not self.transposed_input:
            t = x.reshape(self.batch, *self._mat_in_shape())
        else:
            t = x.reshape(self.batch, *self.local_shape)
        for step in self._steps:
            t = step(t)
        return t.reshape(*lead, *self.local_out_shape)

    def run_split(self, *xs: torch.Tensor) -> tuple:
        """The split-form transform of validated blocks, outside autograd: ``(re, im)`` (r2c: one real
        block) in, a tuple ``(re, im)`` (c2r: ``(real,)``) out."""
        lead = xs[0].shape[: xs[0].ndim - len(self.local_shape)]
        shape = self._mat_in_shape() if self.problem.rank == 1 and not self.transposed_input else self.local_shape
        t = torch.stack([t.reshape(self.batch, *shape) for t in xs], dim=-1) if len(xs) == 2 else \
            xs[0].reshape(self.batch, *shape)
        for step in self._steps:
            t = step(t)
        if self.problem.kind == "c2r":
            return (t.reshape(*lead, *self.local_out_shape),)
        t = t.reshape(*lead, *self.local_out_shape, 2)
        return t[..., 0].contiguous(), t[..., 1].contiguous()

    def _check_split(self, x) -> tuple:
        """The split-form input: a pair (re, im) of the real dtype, or (r2c) one real block."""
        p = self.problem
        if p.kind == "r2c":
            if not isinstance(x, torch.Tensor) or x.is_complex() or x.dtype != p.real_dtype:
                raise TypeError(f"this r2c plan on {self.device} takes one real {p.real_dtype} block")
            self._check_block(x)
            return (x,)
        if isinstance(x, torch.Tensor):
            raise TypeError(f"this plan runs on {self.device} in split form (no complex dtype on the device): pass "
                            f"the pair (x.real, x.imag) as {p.real_dtype} tensors on {self.device}; it returns a pair")
        if not isinstance(x, (tuple, list)) or len(x) != 2 or not all(isinstance(t, torch.Tensor) for t in x):
            raise TypeError(f"execute() on {self.device} takes a pair (re, im) of {p.real_dtype} tensors")
        re, im = x
        for name, t in (("re", re), ("im", im)):
            if t.is_complex() or t.dtype != p.real_dtype:
                raise TypeError(f"pair input {name} must be {p.real_dtype}; got {t.dtype}")
        if re.shape != im.shape:
            raise ValueError(f"pair input re and im differ in shape: {tuple(re.shape)} and {tuple(im.shape)}")
        self._check_block(re)
        return re, im

    def backward_split(self, grads: tuple) -> tuple:
        """The gradients of the split inputs given those of the split outputs: the adjoint plan's
        split form, with the Hermitian weights of this rank's half-spectrum slice for r2c/c2r."""
        p, adj = self.problem, self.adjoint()
        grads = tuple(g.contiguous() for g in grads)
        if p.kind == "c2c":
            return adj.run_split(*grads)
        w = self._half_weights(grads[0].device)
        if p.kind == "r2c":  # c2r of g / c_k
            return adj.run_split(grads[0] / w, grads[1] / w)
        return tuple(t * w for t in adj.run_split(grads[0]))  # c2r: c_k · r2c(g)

    def _half_weights(self, device) -> torch.Tensor:
        if self._weights is None:
            p = self.problem
            half_slice = (self.local_out_slices if p.kind == "r2c" else self.local_slices)[-1]
            w = hermitian_weights(p.shape[-1])[half_slice]
            self._weights = torch.as_tensor(np.ascontiguousarray(w), dtype=p.real_dtype).to(device)
        return self._weights

    def _check(self, x) -> None:
        p = self.problem
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"execute() takes a torch.Tensor (this rank's block), got {type(x).__name__}")
        want_real = p.kind == "r2c"
        if want_real:
            if x.is_complex() or x.dtype != p.real_dtype:
                raise TypeError(f"this r2c plan takes real {p.real_dtype} input, got {x.dtype}; "
                                f"convert with x.to({p.real_dtype})")
        elif x.dtype != p.torch_dtype:
            raise TypeError(f"this {p.kind} plan takes {p.torch_dtype} input, got {x.dtype}; convert with "
                            f"x.to({p.torch_dtype}) (for real data to a forward transform, plan kind='r2c')")
        self._check_block(x)

    def _check_block(self, x) -> None:
        """Trailing shape, batch and device of one block (or one part of a pair)."""
        p = self.problem
        k = len(self.local_shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k:]) != tuple(self.local_shape):
            raise ValueError(
                f"rank block has shape {tuple(x.shape)}, but this rank's block of the global "
                f"{p.in_shape} ({self.layout}, grid {self.grid}, coords {self.coords}) is local_shape "
                f"{self.local_shape}: pass a tensor of shape (..., {', '.join(map(str, self.local_shape))}) "
                f"(global index ranges: {self.local_slices})")
        lead = math.prod(x.shape[: x.ndim - k])
        if lead != p.batch:
            raise ValueError(f"rank block has shape {tuple(x.shape)}: leading dims multiply to {lead}, but the "
                             f"plan was made for batch={p.batch}; plan with batch={lead}")
        if x.device.type != torch.device(self.device).type:
            raise ValueError(f"rank block is on {x.device} but this plan runs on {self.device}; move it with "
                             f".to('{self.device}')")

    # ------------------------------------------------------------------ adjoint / backward
    def adjoint(self) -> DistributedPlan:
        """The distributed plan of the adjoint transform (built once, no collective).

        The opposite direction with the norm mirrored ("backward" ↔ "forward"), r2c ↔ c2r, and the
        input and output distributions swapped (``transposed_input`` ↔ ``transposed_output``; for
        1-D with natural input and output, the factors n1, n2 swap so that the adjoint's input
        blocks are this plan's output blocks). Its input block on every rank is this plan's
        output block.

        Returns
        -------
        DistributedPlan
        """
        if self._adjoint is None:
            p = self.problem
            kind = {"c2c": "c2c", "r2c": "c2r", "c2r": "r2c"}[p.kind]
            norm = {"backward": "forward", "forward": "backward", "ortho": "ortho"}[p.norm]
            prob = Problem.create(p.shape, p.batch, kind=kind, inverse=not p.inverse, dtype=p.torch_dtype,
                                  precision=p.precision, norm=norm, device=p.device)
            factors = self.factors
            if p.rank == 1 and not self.transposed_input and not self.transposed_output:
                factors = factors[::-1]
            self._adjoint = DistributedPlan(
                prob, layout=self.layout, group=self.group, grid=self.grid, coords=self.coords, groups=self._groups,
                transposed_input=self.transposed_output, transposed_output=self.transposed_input, factors=factors,
                device=self.device, plan_kwargs=self._plan_kwargs)
            self._adjoint._adjoint = self
        return self._adjoint

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        """The gradient with respect to this rank's input block, given the gradient of its output block.

        Runs :meth:`adjoint` (collective). For r2c it is the adjoint c2r of ``g / c_k``, for
        c2r ``c_k`` times the adjoint r2c of ``g``, with the Hermitian weights ``c_k`` (1 for
        DC and Nyquist, 2 otherwise) of this rank's slice of the half-spectrum axis, as
        :meth:`trnplan.Plan.backward`.

        Parameters
        ----------
        g : torch.Tensor
            Gradient of this rank's output block (the shape and dtype :meth:`execute` returns).

        Returns
        -------
        torch.Tensor
            Gradient of this rank's input block.
        """
        p, adj = self.problem, self.adjoint()
        if p.kind == "c2c":
            return adj.execute(g)
        if self._weights is None:
            half_slice = (self.local_out_slices if p.kind == "r2c" else self.local_slices)[-1]
            w = hermitian_weights(p.shape[-1])[half_slice]
            self._weights = torch.as_tensor(np.ascontiguousarray(w), dtype=p.real_dtype, device=g.device)
        if p.kind == "r2c":
            return adj.execute(g / self._weights)
        return adj.execute(g.real.contiguous() if g.is_complex() else g) * self._weights

    # ------------------------------------------------------------------ explaining
    def explain(self) -> str:
        """A multi-line report: decomposition, grid, this rank's steps with local plans, bytes sent.

        Returns
        -------
        str
            The global problem; the layout and process grid; this rank's input and output blocks;
            every step in order (each local trnplan plan with its ``str(tree)``, each transpose
            with its group and the bytes this rank sends); the bytes every rank sends per execute.
        """
        p = self.problem
        world = math.prod(self.grid)
        lines = [
            f"trnplan distributed plan — {p.describe()}",
            (f"  layout     {self.layout}"
             + (f", N = {self.factors[0]}×{self.factors[1]} (six-step)" if p.rank == 1 else "")
             + f"; process grid {'×'.join(map(str, self.grid))} ({world} ranks); this rank at {self.coords}"),
            (f"  input      local {self.local_shape} of global {p.in_shape}, "
             f"{'transposed' if self.transposed_input else 'natural'} distribution, "
             f"index {_fmt(self.local_slices)}"),
            (f"  output     local {self.local_out_shape} of global {p.out_shape}, "
             f"{'transposed' if self.transposed_output else 'natural'} distribution, "
             f"index {_fmt(self.local_out_slices)}"),
            (f"  sends      {_bytes(self.bytes_sent)} per execute from this rank "
             f"({sum(isinstance(s, _Transpose) for s in self._steps)} all_to_all_single)"),
            *([(f"  form       split (re, im) float pairs on {self.device}: no complex tensor on the device; "
                f"each transpose is one all_to_all_single of real pairs")] if self.split else []),
            "",
            "steps on this rank",
        ]
        for i, step in enumerate(self._steps, 1):
            lines.append(f"  {i}. {step.describe()}")
        lines += ["", *self._explain_prediction(), "", "bytes sent per execute, every rank"]
        for r, (coords, sent) in enumerate(self._per_rank_bytes()):
            lines.append(f"  rank {r} {coords}: {_bytes(sent)}")
        return "\n".join(lines)

    def _explain_prediction(self) -> list[str]:
        pred = self.predict()
        prof = pred["profile"]
        lines = [f"predicted on this rank: local plans {pred['compute_us']:.0f} µs (their cost model)"]
        for label, q, sent, us in pred["exchanges"]:
            lines.append(f"  all_to_all_single ({label}, {q} ranks): sends {_bytes(sent)}"
                         + (f" ≈ {us:.0f} µs" if us is not None else " (no collective profile for this backend)"))
        if prof is not None:
            lines.append(f"  total ≈ {pred['total_us']:.0f} µs; exchanges priced as {prof.name}: "
                         f"{prof.latency_us:.0f} µs + bytes / {prof.bandwidth_gbs:g} GB/s ({prof.source})")
        return lines

    def _per_rank_bytes(self):
        out = []
        for r in range(math.prod(self.grid)):
            coords = (r,) if len(self.grid) == 1 else divmod(r, self.grid[1])
            sends = _rank_sends(self.problem, self.layout, self.grid, coords, self.transposed_input,
                                self.transposed_output, self.factors)
            out.append((tuple(coords), sum(b for _, b in sends)))
        return out

    def predict(self, profile: CollectiveProfile | None = None) -> dict:
        """Predicted time of one :meth:`execute` on this rank: local plans plus exchanges.

        Parameters
        ----------
        profile : trnplan.core.collectives.CollectiveProfile, optional
            The all-to-all cost to price the exchanges with; default the backend's
            (:func:`trnplan.core.collectives.profile_for`: neuron → trn1's documented figures,
            gloo → measured here); NCCL has none (exchanges then have no time).

        Returns
        -------
        dict
            ``compute_us`` (the local plans' cost model, ``PlanNode.time_us``), ``exchanges``
            (one ``(group label, ranks, bytes sent, µs or None)`` per all-to-all), ``total_us``
            (None without a profile) and ``profile``.
        """
        prof = profile or profile_for(dist.get_backend(self.group), torch.device(self.device).type)
        compute = sum(s.plan.tree.time_us for s in self._steps if isinstance(s, _Stage) and s.plan is not None)
        exchanges = [(s.label, s.qsize, s.bytes_sent, prof.all_to_all_us(s.bytes_sent) if prof else None)
                     for s in self._steps if isinstance(s, _Transpose) and s.qsize > 1]
        total = compute + sum(e[3] for e in exchanges) if prof else None
        return {"compute_us": compute, "exchanges": exchanges, "total_us": total, "profile": prof}

    def __repr__(self) -> str:
        return (f"<trnplan.distributed.DistributedPlan {self.layout} {'×'.join(map(str, self.grid))}: "
                f"{self.problem.describe()}; local {self.local_shape} → {self.local_out_shape}>")


class _SplitFunction(torch.autograd.Function):
    """Split-form autograd: the gradients of the split inputs are the adjoint plan's split form of the
    output gradients (:meth:`DistributedPlan.backward_split`)."""

    @staticmethod
    def forward(ctx, plan, *xs):
        ctx.plan = plan
        return plan.run_split(*xs)

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.plan.backward_split(grads))


def _rank_sends(p: Problem, layout: str, grid: tuple, coords: tuple, ti: bool, to: bool, factors) -> list:
    """(grid dim, bytes this rank sends) of every transpose of its step list (pure block arithmetic)."""
    elem = 16 if p.dtype == "complex128" else 8
    raw, lin, _ = _layout(p.kind, p.shape, layout, grid, coords, ti, to, factors)
    cur = (split_sizes(factors[0], grid[0])[coords[0]], factors[1]) if p.rank == 1 else lin
    out = []
    for op in raw:
        if op[0] == "transpose":
            _, gdim, ga, sc, gshape = op
            sizes = split_sizes(gshape[sc], grid[gdim])
            rest = p.batch * math.prod(cur) // max(gshape[sc], 1)
            out.append((gdim, sum(s for j, s in enumerate(sizes) if j != coords[gdim]) * rest * elem))
            cur = list(cur)
            cur[ga], cur[sc] = gshape[ga], sizes[coords[gdim]]
            cur = tuple(cur)
        elif op[0] == "stage" and p.rank > 1 and p.rank - 1 in op[1] and p.kind != "c2c":
            cur = (*cur[:-1], p.half if p.kind == "r2c" else p.shape[-1])
        elif op[0] == "swap":
            cur = cur[::-1]
    return out


def predict(global_shape, ranks: int, *, layout: str = "pencil", transposed_output: bool = False,
            transposed_input: bool = False, transforms: int = 1, batch: int = 1, profile: str = "trn1") -> dict:
    """Predict a distributed c2c complex64 plan's time without a process group (what-if planning).

    Dense DFT-as-matmul passes (8·n flop per point and axis of length n, the spectral-DNS sample's
    kernel) at the profile's documented sustained rate (:data:`trnplan.core.collectives.DFT_RATES`),
    plus every all-to-all of rank 0's step list at the profile's alpha-beta cost.

    Parameters
    ----------
    global_shape : sequence of int
        Rank 2 or 3 (slab), 3 (pencil).
    ranks : int
        Process-group size; pencil uses the same P0×P1 grid as :func:`plan_many`.
    layout, transposed_output, transposed_input
        As :func:`plan_many`.
    transforms : int, default 1
        Transforms per step (the DNS sample's step is 27 3-D FFTs).
    batch : int, default 1
    profile : str, default "trn1"
        A key of :data:`trnplan.core.collectives.PROFILES` with a rate in ``DFT_RATES``.

    Returns
    -------
    dict
        ``grid``, ``exchanges`` (one ``(ranks in the group, bytes rank 0 sends, µs)`` per
        all-to-all of one transform), ``compute_us`` and ``exchange_us`` per transform,
        ``step_ms`` for ``transforms`` of them, and the ``profile``.
    """
    prof = PROFILES[profile]
    problem = Problem.create(global_shape, batch, dtype=torch.complex64, device="cpu")
    grid = (ranks,) if layout == "slab" else _balanced_grid(ranks)
    coords = (0,) * len(grid)
    sends = _rank_sends(problem, layout, grid, coords, transposed_input, transposed_output, None)
    exchanges = [(grid[gdim], sent, prof.all_to_all_us(sent)) for gdim, sent in sends if grid[gdim] > 1]
    points = batch * math.prod(problem.shape) / ranks
    compute = sum(8 * n * points for n in problem.shape) / DFT_RATES[profile] * 1e6
    exchange = sum(e[2] for e in exchanges)
    return {"grid": grid, "exchanges": exchanges, "compute_us": compute, "exchange_us": exchange,
            "step_ms": transforms * (compute + exchange) / 1e3, "profile": prof}


def _fmt(slices) -> str:
    return "[" + ", ".join(f"{s.start}:{s.stop}" for s in slices) + "]"


# ---------------------------------------------------------------------- plan_many
def _descriptor(fields: dict) -> torch.Tensor:
    shape = fields["shape"]
    row = [1, fields["error"], len(shape) if len(shape) <= _MAX_RANK else -1]
    row += list(shape[:_MAX_RANK]) + [0] * (_MAX_RANK - min(len(shape), _MAX_RANK))
    row += [fields[k] for k in ("batch", "kind", "inverse", "dtype", "precision", "norm", "layout", "ti", "to",
                                "effort")]
    return torch.tensor(row, dtype=torch.int64)


_FIELD_NAMES = ("batch", "kind", "inverse", "dtype", "precision", "norm", "layout", "transposed_input",
                "transposed_output", "effort")
_DECODE = {"kind": {v: k for k, v in _KIND_CODES.items()}, "dtype": {v: k for k, v in _DTYPE_CODES.items()},
           "precision": {v: k for k, v in _PRECISION_CODES.items()}, "norm": {v: k for k, v in _NORM_CODES.items()},
           "layout": {v: k for k, v in _LAYOUT_CODES.items()}, "effort": {v: k for k, v in _EFFORT_CODES.items()},
           "inverse": {0: False, 1: True}, "transposed_input": {0: False, 1: True},
           "transposed_output": {0: False, 1: True}}


def _decode(row: list) -> dict:
    k = row[2]
    out = {"global_shape": tuple(row[3:3 + k]) if k >= 0 else f"(rank > {_MAX_RANK})"}
    for name, v in zip(_FIELD_NAMES, row[3 + _MAX_RANK:]):
        out[name] = _DECODE.get(name, {}).get(v, v)
    return out


def _exchange_device(backend: str, device, error) -> torch.device:
    """Where the plan-time descriptor travels: the backend's own device (NCCL: the current CUDA
    device; neuron: the neuron device, whose collectives take device tensors), else the host."""
    if backend == "nccl":
        return torch.device(device) if error is None else torch.device(f"cuda:{torch.cuda.current_device()}")
    if backend == "neuron":
        return torch.device("neuron")
    return torch.device("cpu")


def _exchange(fields: dict, group, device, my_rank: int) -> None:
    """all_gather every rank's descriptor; raise the same ValueError on every rank if any differs."""
    mine = _descriptor(fields)
    if device.type not in ("cpu", "cuda"):  # a NeuronCore has no INT64 (it becomes INT32): fields fit in 31 bits
        mine = mine.to(torch.int32)
    mine = mine.to(device)
    size = dist.get_world_size(group)
    rows = [torch.empty(mine.shape, dtype=mine.dtype, device=mine.device) for _ in range(size)]
    dist.all_gather(rows, mine, group=group)
    rows = [r.cpu().tolist() for r in rows]
    failed = [r for r, row in enumerate(rows) if row[1]]
    if failed:
        if fields["error"]:
            return  # this rank raises its own argument error after the exchange
        raise ValueError(f"distributed plan_many: rank(s) {failed} of the group rejected their arguments "
                         f"(see the error on those ranks); every rank must call plan_many with the same, "
                         f"valid arguments")
    ref = _decode(rows[0])
    diffs = []
    for r, row in enumerate(rows[1:], 1):
        got = _decode(row)
        for name, value in got.items():
            if value != ref[name]:
                diffs.append(f"rank {r} has {name}={value!r} but rank 0 has {ref[name]!r}")
    if diffs:
        raise ValueError(
            "distributed plan_many arguments differ across the ranks of the group: " + "; ".join(diffs)
            + f" (this is rank {my_rank}). Every rank must call plan_many with the same global_shape, batch, "
              "kind, direction, dtype, precision, norm, layout and transposed flags; only the data differs")


def _grid_groups(world: int, p0: int, p1: int, rank: int, backend: str):
    """Row and column sub-groups of a P0×P1 grid (rank = r0·P1 + r1), made once per grid."""
    key = (world, p0, p1, backend)
    cached = _GRID_GROUPS.get(key)
    if cached is None or cached[0] is not dist.group.WORLD:  # made under an earlier, destroyed world
        cached = None
    if cached is None:
        r0, r1 = divmod(rank, p1)
        row = col = None
        # new_group is collective over the world: every rank creates every group, in one order
        for i in range(p0):
            members = [i * p1 + j for j in range(p1)]
            g = dist.group.WORLD if p1 == world else (dist.new_group(members) if p1 > 1 else None)
            if i == r0:
                row = g
        for j in range(p1):
            members = [i * p1 + j for i in range(p0)]
            g = dist.group.WORLD if p0 == world else (dist.new_group(members) if p0 > 1 else None)
            if j == r1:
                col = g
        cached = _GRID_GROUPS[key] = (dist.group.WORLD, ((col, r0), (row, r1)))
    return cached[1]


def plan_many(global_shape, batch: int = 1, *, kind: str = "c2c", inverse: bool | None = None,
              dtype=torch.complex64, norm: str | None = "backward", group=None, layout: str = "slab",
              transposed_input: bool = False, transposed_output: bool = False, precision: str | None = None,
              effort: str = "estimate", cache=DEFAULT_CACHE, device=None) -> DistributedPlan:
    """Plan a distributed FFT of ``batch`` global arrays of ``global_shape`` over a process group.

    Collective: every rank of ``group`` must call it with the same arguments (checked: a
    difference raises ValueError on every rank rather than hanging).

    Parameters
    ----------
    global_shape : int or sequence of int
        The global transform shape (for r2c/c2r the real shape). Rank 1 uses the six-step
        algorithm; rank 2 and 3 (and higher) the slab decomposition, rank 3 also pencil.
    batch : int, default 1
        Transforms per execute; the leading dims of every rank's block multiply to it (the batch
        is not distributed: every rank holds its block of every transform).
    kind : {"c2c", "r2c", "c2r"}, default "c2c"
        As :func:`trnplan.plan_many`; r2c and c2r need rank ≥ 2.
    inverse : bool, optional
        Direction; default the kind's own (forward for c2c and r2c, inverse for c2r).
    dtype : torch.dtype, default torch.complex64
        ``torch.complex64`` or ``torch.complex128`` (for r2c/c2r also float32/float64).
    norm : {"backward", "ortho", "forward"}, default "backward"
        torch.fft's meaning, applied to the global transform (each local plan carries its
        share: the scales of the local lengths multiply to the global one).
    group : torch.distributed.ProcessGroup, optional
        The ranks sharing the data; default the whole world. Pencil needs the whole world (its
        row and column sub-groups are made with ``new_group``, a world collective).
    layout : {"slab", "pencil"}, default "slab"
        Slab: split along axis 0 over P ranks (rank ≥ 2). Pencil: split along axes 0 and 1 over a
        P0×P1 grid (rank 3). Ignored for rank 1.
    transposed_input : bool, default False
        Take the input in the transposed distribution (what ``transposed_output=True`` returns),
        saving a transpose; c2c and c2r only. The adjoint of a transposed-output plan uses it.
    transposed_output : bool, default False
        Skip the last transpose(s) and return the transposed distribution (FFTW's
        FFTW_MPI_TRANSPOSED_OUT, but with the axis order kept): slab — global axes unchanged,
        split along axis 1 instead of 0; pencil — split along axis 1 over P0 and axis 2 over P1;
        1-D — the (n1, n2) matrix ``D[k1, k2] = X[k1 + n1·k2]`` split by rows k1. c2c and r2c only.
    precision : str, optional
        Arithmetic of the local plans, as :func:`trnplan.plan_many` ("auto" is not accepted: every
        rank must run the same arithmetic).
    effort : {"estimate", "measure", "patient", "wisdom_only"}, default "estimate"
        Planning effort of the local plans (each rank plans its own; only shapes must agree).
    cache : PlanCache or None, optional
        The on-disk plan cache for the local plans (default: trnplan's default cache).
    device : str or torch.device, optional
        Where the data lives: default ``"cuda"`` (the current device) when the group's backend is
        NCCL, else ``"cpu"``.

    Returns
    -------
    DistributedPlan

    Raises
    ------
    RuntimeError
        ``torch.distributed`` is not initialised and no ``group`` is given (call
        ``torch.distributed.init_process_group``, e.g. under ``torchrun``).
    ValueError, TypeError
        Invalid arguments, or arguments differing across ranks (raised on every rank, naming the
        rank and the field).
    trnplan.core.errors.NotSupportedYet
        r2c/c2r in 1-D, pencil on other than rank 3 or on a sub-group, ``transposed_input`` for
        r2c, ``transposed_output`` for c2r, both for 1-D.

    Examples
    --------
    >>> # under torchrun --nproc-per-node 2 (see docs/distributed.md)
    >>> plan = trnplan.distributed.plan_many((256, 256))              # doctest: +SKIP
    >>> x = torch.randn(plan.local_shape, dtype=torch.complex64)      # doctest: +SKIP
    >>> y = plan.execute(x)                   # this rank's rows of fft2  # doctest: +SKIP
    """
    group, my_rank, size, backend = _member(group)
    problem, device, fields, error = _validate(global_shape, batch, kind, inverse, dtype, precision, norm, layout,
                                               transposed_input, transposed_output, effort, device, backend, size)
    # validated locally, exchanged before raising: a rank that raised alone would leave the others
    # waiting in the all_gather until the process group's timeout
    _exchange(fields, group, _exchange_device(backend, device, error), my_rank)
    if error is not None:
        raise error
    common = {"transposed_input": bool(transposed_input), "transposed_output": bool(transposed_output),
              "device": device, "plan_kwargs": {"effort": effort, "cache": cache}}
    if problem.rank == 1:
        return DistributedPlan(problem, layout="1d", group=group, grid=(size,), coords=(my_rank,),
                               groups=((group, my_rank),), factors=_six_step_factors(problem.n, size), **common)
    if layout == "slab":
        return DistributedPlan(problem, layout="slab", group=group, grid=(size,), coords=(my_rank,),
                               groups=((group, my_rank),), factors=None, **common)
    p0, p1 = _balanced_grid(size)
    groups = _grid_groups(size, p0, p1, my_rank, backend)
    return DistributedPlan(problem, layout="pencil", group=group, grid=(p0, p1), coords=divmod(my_rank, p1),
                           groups=groups, factors=None, **common)


def _member(group):
    """(group, this rank in it, its size, its backend), or the error that says what to set up."""
    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this torch build; trnplan.distributed needs it")
    if group is None and not dist.is_initialized():
        raise RuntimeError(
            "trnplan.distributed.plan_many needs an initialised process group: call "
            "torch.distributed.init_process_group('gloo', 'nccl' or 'neuron', ...) first (torchrun sets the "
            "environment: torchrun --nproc-per-node 2 script.py), or pass group=")
    group = dist.group.WORLD if group is None else group
    my_rank = dist.get_rank(group)
    if my_rank < 0:
        raise ValueError("this process is not a member of the given group; only the group's ranks call "
                         "plan_many (and execute) for it")
    return group, my_rank, dist.get_world_size(group), dist.get_backend(group)


def _validate(global_shape, batch, kind, inverse, dtype, precision, norm, layout, ti, to, effort, device, backend,
              size):
    """(problem, device, the descriptor fields every rank exchanges, the error to raise after the
    exchange or None): the request checked on this rank alone."""
    fields = {"shape": (), "batch": 0, "kind": -1, "inverse": -1, "dtype": -1, "precision": -1, "norm": -1,
              "layout": -1, "ti": int(bool(ti)), "to": int(bool(to)), "effort": -1, "error": 1}
    problem = None
    try:
        if device is None:
            device = (f"cuda:{torch.cuda.current_device()}" if backend == "nccl"
                      else "neuron" if backend == "neuron" else "cpu")
        problem = Problem.create(global_shape, batch, kind=kind, inverse=inverse, dtype=dtype, precision=precision,
                                 norm=norm, device=device)
        if problem.precision == "auto":
            raise ValueError("precision='auto' lets each rank's planner pick its own arithmetic; name a mode "
                             "(e.g. 'fp32') so every rank computes the same way")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(map(repr, LAYOUTS))}; got {layout!r}")
        if effort not in _EFFORT_CODES:
            raise ValueError(f"effort must be one of {', '.join(map(repr, _EFFORT_CODES))}; got {effort!r}")
        fields.update(shape=problem.shape, batch=problem.batch, kind=_KIND_CODES[problem.kind],
                      inverse=int(problem.inverse), dtype=_DTYPE_CODES[problem.dtype],
                      precision=_PRECISION_CODES[problem.precision], norm=_NORM_CODES[problem.norm],
                      layout=_LAYOUT_CODES[layout], effort=_EFFORT_CODES[effort])
        _check_layout_support(problem, layout, ti, to, size)
        if is_accelerator_kind(torch.device(device).type):
            _check_split_route(problem, layout, backend, size)
    except Exception as exc:  # noqa: BLE001 - re-raised by plan_many, after the exchange
        return problem, device, fields, exc
    fields["error"] = 0
    return problem, device, fields, None


def _check_split_route(problem: Problem, layout: str, backend: str, size: int) -> None:
    """What the split-form route on a device without complex data (TorchNeuron) runs."""
    if problem.dtype != "complex64":
        raise ValueError(f"dtype {problem.dtype} on {problem.device}: a NeuronCore has no FP64; use complex64 "
                         f"(float32 pairs)")
    if backend == "neuron" and layout == "pencil" and problem.rank == 3:
        p0, p1 = _balanced_grid(size)
        columns = [[i * p1 + j for i in range(p0)] for j in range(p1)]
        reason = next((r for r in map(_neuron_group_reason, columns) if r), None)
        if reason:
            raise NotSupportedYet(f"layout='pencil' on {size} neuron ranks ({p0}×{p1}): its column groups are "
                                  f"strided, and {reason}; use layout='slab' (contiguous groups)")


def _neuron_group_reason(members: list) -> str | None:
    """Why Neuron collectives refuse a replica group, from the documented rules (runtimes.md §2, §5):
    power-of-two sizes (inf2 ran groups of 2/4/8), contiguous runs aligned to their size ("aligned to
    4/8/16/32"), or one stride inside one chip (4 logical cores on Trn2 with LNC=2); strided groups
    across chips are refused (trn1.32xlarge, the spectral-DNS sample)."""
    size = len(members)
    if size <= 1:
        return None
    if size & (size - 1):
        return f"a group of {size} ranks is not a power of two (Neuron groups are 2/4/8/16/32)"
    if members == list(range(members[0], members[0] + size)):
        return None if members[0] % size == 0 else f"group {members} is not aligned to its size"
    if len({b - a for a, b in itertools.pairwise(members)}) == 1 and len({m // 4 for m in members}) == 1:
        return None
    return f"group {members} is strided across chips (strided cross-chip groups are refused)"


def _check_layout_support(problem: Problem, layout: str, ti: bool, to: bool, size: int) -> None:
    if problem.rank == 1:
        if problem.kind != "c2c":
            raise NotSupportedYet(
                f"distributed {problem.kind} in 1-D is not built yet; transform complex data with kind='c2c' "
                f"(x + 0j) and keep the first N//2+1 outputs, or use a rank ≥ 2 shape")
        if ti and to:
            raise NotSupportedYet("1-D with transposed_input and transposed_output both True is not built; "
                                  "set at most one of them")
        return
    if layout == "pencil":
        if problem.rank != 3:
            raise NotSupportedYet(f"layout='pencil' is built for rank-3 shapes; got {problem.shape} "
                                  f"(rank {problem.rank}); use layout='slab'")
        if size != dist.get_world_size():
            raise NotSupportedYet("layout='pencil' makes its grid's row and column groups with new_group, a "
                                  "collective over the whole world, so it needs group=None (the world); "
                                  "use layout='slab' on a sub-group")
    if problem.kind == "r2c" and ti:
        raise ValueError("transposed_input=True is for c2c and c2r plans (the input of r2c is the real array, "
                         "distributed along axis 0); drop it")
    if problem.kind == "c2r" and to:
        raise ValueError("transposed_output=True is for c2c and r2c plans (c2r's last local step makes the real "
                         "output, distributed like its natural input); drop it")
