"""Distributed FFTs as one SPMD program on torch-xla: slab (2-D, 3-D) and pencil (3-D) on a ``Mesh``.

The route torch-xla users (trn1/inf2, and the way JAX/TPU pods work) scale with: one program
written on the *global* arrays, a :class:`torch_xla.distributed.spmd.Mesh`, and sharding
annotations; XLA's SPMD partitioner turns it into one per-device program with the collectives in
it. The algorithm is the transpose method of :mod:`trnplan.distributed` (FFTW-MPI, heFFTe): each
pass transforms the axes a device holds whole with an ordinary trnplan plan's lowered module (split
``(re, im)`` float tensors: no complex dtype on the device), and between passes the sharded axis
moves, which the partitioner lowers to one all-to-all.

What the partitioner emits must be checked, not assumed: a row-sharded transpose-then-matmul left
to sharding propagation compiled to an ``all-gather`` of the whole array (measured here on XLA:CPU,
torch-xla 2.9: the partitioner folded the transpose into the next matmul and sharded that matmul's
*constant* operand instead). So every intermediate here is annotated (``mark_sharding``): the
shardings are fixed before and after each local pass and each exchange, and the only way from one
to the next is the all-to-all that moves one mesh axis from one tensor dimension to another
(XLA's ``ReshardWithAllToAll``). torch_xla's own ``xm.all_to_all`` cannot be used inside an SPMD
program in 2.9: it emits a replica-indexed all-to-all without a channel id, which XLA:CPU refused
at run time (``replica_id < replica_count 1``). tests/xla/test_spmd.py audits every compiled graph:
exactly the all-to-alls listed in :meth:`SpmdPlan.exchanges`, no all-gather, no all-reduce.

Slab over P devices (mesh ``(P,)``): local pass over axes 1.., exchange (axis 0 whole, axis 1
sharded), pass over axis 0, exchange back: 2 all-to-alls. Pencil over a P0×P1 mesh: passes over
axes 2, 1, 0 with an exchange inside mesh rows (P1) and one inside mesh columns (P0) between them,
and two back: 4 all-to-alls. Shapes must divide evenly (XLA tiles a sharded axis in equal blocks;
trnplan.distributed over torch.distributed takes uneven blocks).

References
----------
.. [1] XLA, "Shardy/GSPMD: general and scalable parallelization for ML computation graphs",
       Xu et al., arXiv:2105.04663 (2021).
.. [2] M. Frigo and S. G. Johnson, "FFTW-MPI", FFTW 3.3 manual, ch. 6 (2012).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from trnplan.core.collectives import PROFILES
from trnplan.core.errors import NotSupportedYet
from trnplan.plan.api import DEFAULT_CACHE
from trnplan.plan.api import plan_many as _local_plan_many

__all__ = ["SpmdPlan", "plan_many"]

LAYOUTS = ("slab", "pencil")


def _xla():
    """torch_xla's SPMD modules, or the error that says how to get them."""
    try:
        import torch_xla
        import torch_xla.distributed.spmd as xs
        import torch_xla.runtime as xr
    except ImportError as exc:  # pragma: no cover - the xla lane has it, the main venv does not
        raise NotSupportedYet("trnplan.spmd needs torch-xla (pip install torch==2.9.0 torch-xla==2.9.0; "
                              "PJRT_DEVICE=CPU runs it on the host's CPUs as virtual devices)") from exc
    return torch_xla, xs, xr


def _balanced_grid(p: int) -> tuple[int, int]:
    """P0×P1 = p with P0 ≤ P1 and P0 the largest divisor of p not above √p (trnplan.distributed's rule)."""
    p0 = max(d for d in range(1, math.isqrt(p) + 1) if p % d == 0)
    return p0, p // p0


def default_mesh(layout: str, devices: int | None = None):
    """The mesh a layout runs on: slab ``(P,)`` with axis ``"p"``; pencil ``(P0, P1)`` with ``("p0", "p1")``.

    Parameters
    ----------
    layout : {"slab", "pencil"}
    devices : int, optional
        Devices to use (default: all, ``xr.global_runtime_device_count()``).

    Returns
    -------
    torch_xla.distributed.spmd.Mesh
    """
    _, xs, xr = _xla()
    p = devices or xr.global_runtime_device_count()
    if layout == "slab":
        return xs.Mesh(np.arange(p), (p,), ("p",))
    return xs.Mesh(np.arange(p), _balanced_grid(p), ("p0", "p1"))


class _Pass:
    """One local pass: trnplan's lowered module over ``axes`` of the global (sharded) arrays."""

    def __init__(self, axes: tuple, shape: tuple, count: int, module, tree: str):
        self.axes, self.shape, self.count, self.module, self.tree = axes, shape, count, module, tree

    def describe(self) -> str:
        return (f"local pass over axis {','.join(map(str, self.axes))} {self.shape} × {self.count} "
                f"(global count; each device runs its share): plan {self.tree}")


class _Exchange:
    """Move one mesh axis from tensor axis ``src`` to ``dst``: one all-to-all in that mesh axis's groups."""

    def __init__(self, mesh_axis: str, src: int, dst: int, group_size: int, groups: int, bytes_per_device: int):
        self.mesh_axis, self.src, self.dst = mesh_axis, src, dst
        self.group_size, self.groups, self.bytes_per_device = group_size, groups, bytes_per_device

    @property
    def bytes_sent(self) -> int:
        """Bytes each device sends: its shard less the part it keeps."""
        return self.bytes_per_device * (self.group_size - 1) // self.group_size

    def describe(self) -> str:
        return (f"all-to-all in mesh axis {self.mesh_axis!r} ({self.groups} group(s) of {self.group_size}): "
                f"axis {self.src} whole, axis {self.dst} sharded; each device sends {self.bytes_sent} B, "
                f"≈ {PROFILES['xla-cpu'].all_to_all_us(self.bytes_sent):.0f} µs on XLA:CPU (measured profile)")


class SpmdPlan:
    """A c2c FFT of sharded global ``xla`` arrays as one SPMD program. Build with :func:`plan_many`.

    Attributes
    ----------
    shape : tuple of int
        The global transform shape; arrays are ``(batch, *shape)``.
    batch : int
    inverse : bool
    layout : {"slab", "pencil"}
    mesh : torch_xla.distributed.spmd.Mesh
    in_spec, out_spec : tuple
        The partition specs of the input and output arrays (natural distribution: slab axis 0
        over ``"p"``; pencil axis 0 over ``"p0"`` and axis 1 over ``"p1"``).
    steps : list
        The passes and exchanges in order (:meth:`explain` lists them).
    """

    def __init__(self, shape, batch, *, inverse, norm, precision, layout, mesh, effort, cache, device):
        self.shape, self.batch, self.inverse, self.norm = tuple(shape), batch, inverse, norm
        self.precision, self.layout, self.mesh, self.device = precision, layout, mesh, device
        self._plan_kwargs = {"effort": effort, "cache": cache}
        names = tuple(mesh.axis_names)
        sizes = dict(zip(names, mesh.mesh_shape))
        self._sizes = sizes
        start = {0: names[0]} if layout == "slab" else {0: names[0], 1: names[1]}
        self.in_spec = self.out_spec = self._spec(start, [None, *range(len(shape))])
        self.steps, self._start = [], dict(start)
        rank = len(shape)
        if layout == "slab":
            route = [("pass", tuple(range(1, rank))), ("move", names[0], 0, 1), ("pass", (0,)),
                     ("move", names[0], 1, 0)]
        else:
            route = [("pass", (2,)), ("move", names[1], 1, 2), ("pass", (1,)), ("move", names[0], 0, 1),
                     ("pass", (0,)), ("move", names[0], 1, 0), ("move", names[1], 2, 1)]
        total = batch * math.prod(shape)
        for op in route:
            if op[0] == "pass":
                axes = op[1]
                tshape = tuple(shape[a] for a in axes)
                count = total // math.prod(tshape)
                plan = _local_plan_many(tshape, count, inverse=inverse, precision=precision, norm=norm,
                                        device=device, compile="eager", **self._plan_kwargs)
                self.steps.append(_Pass(axes, tshape, count, plan.module, str(plan.tree)))
            else:
                _, axis_name, src, dst = op
                q = sizes[axis_name]
                self.steps.append(_Exchange(axis_name, src, dst, q, mesh.size() // q, 8 * total // mesh.size()))

    # ------------------------------------------------------------------ sharding helpers
    def _spec(self, smap: dict, order: list) -> tuple:
        """Partition spec of a tensor whose dims hold ``order`` (global axes; None the batch, "c" re/im)."""
        return tuple(smap.get(a) if isinstance(a, int) else None for a in order)

    def _mark(self, t: torch.Tensor, spec) -> torch.Tensor:
        _, xs, _ = _xla()
        return xs.mark_sharding(t, self.mesh, spec).global_tensor

    def _run_pass(self, step: _Pass, t: torch.Tensor, order: list, smap: dict):
        """Permute so the sharded axes lead and the pass's axes trail; run the module on (count, n).

        ``t`` stacks (re, im) on dim 0 (never sharded), so each exchange is one all-to-all of both
        parts rather than one per part (measured: XLA:CPU does not combine the two). For the pass,
        each part's sharded axes of length n are split into (devices, n / devices) and the device
        factors moved to the front before flattening to (count, n): then every device's rows are
        one contiguous block of ``count``, which a tiled sharding can express. Merging two sharded
        axes directly (a 2×4 pencil, blocks of 4 rows) made the partitioner reshard the flattening
        with 8 extra all-to-alls (measured, 8×8×16 on 8 devices). The parts go through separately
        because torch-xla 2.9 refuses sharded tensors of rank above 5 ("tile_assignment ranks > 5").
        """
        names = tuple(self.mesh.axis_names)
        sharded = sorted(smap, key=lambda a: names.index(smap[a]))
        rest = [a for a in order if a not in ("c", None) and a not in sharded and a not in step.axes]
        new = ["c", *sharded, None, *rest, *step.axes]
        t = self._mark(t.permute([order.index(a) for a in new]), self._spec(smap, new))
        dims, k = tuple(t.shape), len(sharded)
        mesh_of = [smap[a] for a in sharded]
        qs = [self._sizes[m] for m in mesh_of]
        merged = [*dims[1:1 + k], math.prod(dims[1 + k:])]  # (sharded..., everything else)
        split = [x for q, n in zip(qs, merged[:k]) for x in (q, n // q)] + [merged[k]]
        split_spec = (*(x for m in mesh_of for x in (m, None)), None)
        front = [*(2 * i for i in range(k)), *(2 * i + 1 for i in range(k)), 2 * k]
        front_spec = (*mesh_of, *([None] * (k + 1)))
        lead = (tuple(mesh_of) if k > 1 else mesh_of[0]) if k else None
        flats = []
        for part in (t[0], t[1]):
            u = self._mark(self._mark(part.reshape(merged), (*mesh_of, None)).reshape(split), split_spec)
            u = self._mark(u.permute(front), front_spec)
            flats.append(self._mark(u.reshape(step.count, -1), (lead, None)))
        outs = []
        back = [front.index(i) for i in range(len(split))]
        for y in step.module(*flats):
            u = self._mark(self._mark(y, (lead, None)).reshape([split[i] for i in front]), front_spec)
            u = self._mark(self._mark(u.permute(back), split_spec).reshape(merged), (*mesh_of, None))
            outs.append(u.reshape(dims[1:]))
        return self._mark(torch.stack(outs), self._spec(smap, new)), new

    def run(self, re: torch.Tensor, im: torch.Tensor):
        """The transform of global ``(batch, *shape)`` float arrays, outside autograd."""
        natural = ["c", None, *range(len(self.shape))]
        order, smap = list(natural), dict(self._start)
        # the inputs are annotated (or, as device data, resharded) with the natural distribution
        # first: stacking unannotated inputs would leave every device a replica of both arrays
        re, im = self._mark(re, self.in_spec), self._mark(im, self.in_spec)
        t = self._mark(torch.stack((re, im)), self._spec(smap, order))
        for step in self.steps:
            if isinstance(step, _Pass):
                t, order = self._run_pass(step, t, order, smap)
            else:
                del smap[step.src]
                smap[step.dst] = step.mesh_axis
                t = self._mark(t, self._spec(smap, order))
        t = t.permute([order.index(a) for a in natural])
        # clones, not views: a view's base chain stays live and every live lazy tensor becomes an
        # output of the compiled graph (measured: 3 extra intermediates per call without this)
        return self._mark(t[0].clone(), self.out_spec), self._mark(t[1].clone(), self.out_spec)

    def execute(self, re: torch.Tensor, im: torch.Tensor):
        """Run the transform on global ``xla`` arrays in split form.

        Parameters
        ----------
        re, im : torch.Tensor
            Real and imaginary parts, float32, shape ``(batch, *shape)``, on the ``xla`` device
            (sharded or not: they are annotated with :attr:`in_spec`).

        Returns
        -------
        (torch.Tensor, torch.Tensor)
            The spectrum's real and imaginary parts, global ``(batch, *shape)`` arrays sharded as
            :attr:`out_spec`.

        Notes
        -----
        Differentiable: the backward pass runs :meth:`adjoint`, another SPMD plan with the same
        exchanges (so the gradient program is audited the same way).
        """
        self._check(re, im)
        if torch.is_grad_enabled() and (re.requires_grad or im.requires_grad):
            return _SpmdFunction.apply(self, re, im)
        return self.run(re, im)

    __call__ = execute

    def _check(self, re, im) -> None:
        want = (self.batch, *self.shape)
        for name, t in (("re", re), ("im", im)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"execute() takes two float32 tensors (re, im); {name} is {type(t).__name__}")
            if t.dtype != torch.float32:
                raise TypeError(f"{name} is {t.dtype}; the SPMD route runs split float32 (no complex or float64 "
                                f"on the device): pass z.real.float(), z.imag.float()")
            if tuple(t.shape) != want:
                raise ValueError(f"{name} has shape {tuple(t.shape)}; this plan takes global arrays of shape {want} "
                                 f"(batch, *shape)")
            if t.device.type != "xla":
                raise ValueError(f"{name} is on {t.device}; move it with .to(torch_xla.device())")

    def adjoint(self) -> SpmdPlan:
        """The plan of the adjoint: the opposite direction, the norm mirrored, the same mesh and route."""
        if getattr(self, "_adjoint", None) is None:
            norm = {"backward": "forward", "forward": "backward", "ortho": "ortho"}[self.norm]
            self._adjoint = SpmdPlan(self.shape, self.batch, inverse=not self.inverse, norm=norm,
                                     precision=self.precision, layout=self.layout, mesh=self.mesh,
                                     device=self.device, **self._plan_kwargs)
            self._adjoint._adjoint = self
        return self._adjoint

    def exchanges(self) -> list[tuple[str, int]]:
        """(mesh axis, group size) of every all-to-all, in order: what the compiled program must hold."""
        return [(s.mesh_axis, s.group_size) for s in self.steps if isinstance(s, _Exchange)]

    def explain(self) -> str:
        """The decomposition, the mesh and every pass and exchange in order."""
        grid = "×".join(str(self._sizes[n]) for n in self.mesh.axis_names)
        lines = [(f"trnplan SPMD plan — c2c {'inverse' if self.inverse else 'forward'} {self.shape} × {self.batch}, "
                  f"{self.precision}, norm={self.norm}"),
                 f"  layout     {self.layout} on mesh {grid} {tuple(self.mesh.axis_names)}; in/out spec {self.in_spec}",
                 f"  exchanges  {len(self.exchanges())} all-to-all (no all-gather, no all-reduce)", "", "steps"]
        lines += [f"  {i}. {s.describe()}" for i, s in enumerate(self.steps, 1)]
        prof = PROFILES["xla-cpu"]
        lines += ["", (f"exchanges priced as {prof.name}: {prof.latency_us:.0f} µs + bytes / {prof.bandwidth_gbs:g} "
                       f"GB/s ({prof.source})")]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<trnplan.spmd.SpmdPlan {self.layout} {self.shape} × {self.batch} on {self.mesh.mesh_shape}>"


class _SpmdFunction(torch.autograd.Function):
    """y = F x on the pair; the gradient of a real loss is Fᴴ g, the adjoint SPMD plan of the pair g."""

    @staticmethod
    def forward(ctx, plan, re, im):
        ctx.plan = plan
        return plan.run(re, im)

    @staticmethod
    def backward(ctx, g_re, g_im):
        return (None, *ctx.plan.adjoint().run(g_re, g_im))


def plan_many(global_shape, batch: int = 1, *, inverse: bool = False, norm: str = "backward",
              precision: str = "fp32", layout: str = "slab", mesh=None, effort: str = "estimate",
              cache=DEFAULT_CACHE) -> SpmdPlan:
    """Plan a c2c FFT of ``batch`` global arrays of ``global_shape`` as one SPMD program on torch-xla.

    Call after ``torch_xla.runtime.use_spmd()`` (process-global; before any ``xla`` tensor exists).

    Parameters
    ----------
    global_shape : sequence of int
        Rank 2 or 3 for slab, rank 3 for pencil.
    batch : int, default 1
        Leading dimension of the arrays (not sharded).
    inverse : bool, default False
    norm : {"backward", "ortho", "forward"}, default "backward"
    precision : str, default "fp32"
        Arithmetic of the local plans (a named mode; "auto" is refused).
    layout : {"slab", "pencil"}, default "slab"
    mesh : torch_xla.distributed.spmd.Mesh, optional
        Slab: a 1-D mesh; pencil: a 2-D mesh (P0, P1). Default: :func:`default_mesh` over all devices.
    effort : str, default "estimate"
        Planning effort of the local plans.
    cache : PlanCache or None, optional
        The plan cache of the local plans.

    Returns
    -------
    SpmdPlan

    Raises
    ------
    trnplan.core.errors.NotSupportedYet
        torch-xla missing, SPMD not enabled, a layout/rank combination not built, or a sharded
        axis that the mesh does not divide.
    ValueError
        Bad layout, precision or mesh.
    """
    torch_xla, _, xr = _xla()
    if not xr.is_spmd():
        raise NotSupportedYet("trnplan.spmd.plan_many runs one SPMD program: call torch_xla.runtime.use_spmd() "
                              "first (process-global, before any xla tensor is made)")
    shape = tuple(int(n) for n in (global_shape if not isinstance(global_shape, int) else (global_shape,)))
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(map(repr, LAYOUTS))}; got {layout!r}")
    if precision == "auto":
        raise ValueError("precision='auto' lets the planner pick per pass; name a mode (e.g. 'fp32')")
    mesh = default_mesh(layout) if mesh is None else mesh
    _check_mesh(shape, layout, mesh)
    return SpmdPlan(shape, batch, inverse=inverse, norm=norm, precision=precision, layout=layout, mesh=mesh,
                    effort=effort, cache=cache, device=torch_xla.device())


def _check_mesh(shape: tuple, layout: str, mesh) -> None:
    want_rank = {"slab": (2, 3), "pencil": (3,)}[layout]
    if len(shape) not in want_rank:
        raise NotSupportedYet(f"layout={layout!r} on the SPMD route is built for rank {' or '.join(map(str, want_rank))}; "
                              f"got {shape}")
    dims = {"slab": 1, "pencil": 2}[layout]
    if len(mesh.mesh_shape) != dims:
        raise ValueError(f"layout={layout!r} needs a {dims}-D mesh; got mesh shape {tuple(mesh.mesh_shape)}")
    sizes = dict(zip(mesh.axis_names, mesh.mesh_shape))
    # the axes each mesh axis shards at some point of the route: slab 0 and 1; pencil p0 on 0, 1; p1 on 1, 2
    uses = ({mesh.axis_names[0]: (0, 1)} if layout == "slab"
            else {mesh.axis_names[0]: (0, 1), mesh.axis_names[1]: (1, 2)})
    for name, axes in uses.items():
        for a in axes:
            if shape[a] % sizes[name]:
                raise NotSupportedYet(
                    f"axis {a} (length {shape[a]}) is sharded over mesh axis {name!r} of {sizes[name]} devices, which "
                    f"does not divide it; XLA tiles in equal blocks: pick a shape it divides, or use "
                    f"trnplan.distributed over torch.distributed (uneven blocks)")
