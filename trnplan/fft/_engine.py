"""Run one trnplan plan over chosen dimensions of a tensor: the engine call under every front function.

The transformed dimensions are moved to the end, every other dimension becomes the plan's batch,
the plan (from the process-wide plan cache, :func:`~trnplan.plan.api.cached_plan`) runs, and the
dimensions are moved back (:func:`_transform`). A plan's kind travels as a word (``"c2c"``,
``"dct2"``, ``"r2c@16Lx8"`` for a truncated one), so that the same call can be a torch operator:
under ``torch.compile`` the plan runs as the opaque custom operator ``trnplan::execute`` (with a
fake kernel for tracing and ``trnplan::execute_backward`` for autograd).
"""

from __future__ import annotations

import math

import torch

from trnplan.core.problem import COMPLEX_OF, R2R_KINDS, REAL_OF
from trnplan.plan.api import cached_plan
from trnplan.plan.memo import PLANS


# ---------------------------------------------------------------------------- the kind word and shapes
def _split_kind(kind: str):
    """``"r2c@16x8"`` (a truncated transform, as the operators carry it) → ``("r2c", (16, 8), None)``;
    an axis keeping the lowest modes only is marked ``L``: ``"r2c@16Lx8"`` → ``("r2c", (16, 8), (0,))``."""
    base, _, word = kind.partition("@")
    if not word:
        return base, None, None
    parts = word.split("x")
    low = tuple(i for i, part in enumerate(parts) if part.endswith("L"))
    return base, tuple(int(part.removesuffix("L")) for part in parts), low or None


def kind_word(kind: str, modes, low) -> str:
    """The inverse of :func:`_split_kind`."""
    return f"{kind}@" + "x".join(f"{m}L" if i in (low or ()) else str(m) for i, m in enumerate(modes))


def _kept(shape, modes, low=None) -> tuple:
    return tuple(m if i == len(modes) - 1 or i in (low or ()) else 2 * m for i, m in enumerate(modes))


def _out_meta(kind: str, shape: tuple, dtype: torch.dtype):
    """(trailing output shape, output dtype) of a plan of ``kind`` over ``shape`` on ``dtype`` input."""
    cdtype = dtype if dtype.is_complex else COMPLEX_OF[dtype]
    kind, modes, low = _split_kind(kind)
    if modes:
        return (_kept(shape, modes, low), cdtype) if kind == "r2c" else (tuple(shape), REAL_OF[cdtype])
    if kind == "r2c":
        return (*shape[:-1], shape[-1] // 2 + 1), cdtype
    return tuple(shape), (REAL_OF[cdtype] if kind == "c2r" or kind in R2R_KINDS else cdtype)


def _in_meta(kind: str, shape: tuple, dtype: torch.dtype):
    """(trailing input shape, input dtype) of a plan whose *output* has ``dtype`` (for backward)."""
    cdtype = dtype if dtype.is_complex else COMPLEX_OF[dtype]
    kind, modes, low = _split_kind(kind)
    if modes:
        return (_kept(shape, modes, low), cdtype) if kind == "c2r" else (tuple(shape), REAL_OF[cdtype])
    if kind == "c2r":
        return (*shape[:-1], shape[-1] // 2 + 1), cdtype
    return tuple(shape), (REAL_OF[cdtype] if kind == "r2c" or kind in R2R_KINDS else cdtype)


def _run_plan(x: torch.Tensor, kind: str, shape: tuple, inverse: bool, norm: str, remember=None) -> torch.Tensor:
    """Fetch the plan for ``x`` (transform over its trailing ``len(shape)`` dims) and run it; once it
    ran, ``remember`` (a :func:`_direct_key`, or None) names it for the next call's shortcut."""
    lead = x.shape[: x.ndim - len(shape)]
    batch = math.prod(lead)
    if batch == 0:  # no transform to run (torch.fft raises here on the CPU); keep the graph connected
        tail, dtype = _out_meta(kind, shape, x.dtype)
        y = torch.zeros((*lead, *tail), dtype=dtype, device=x.device)
        if x.requires_grad and torch.is_grad_enabled():
            y = y + (x.real if x.is_complex() else x).sum() * 0
        return y
    cdtype = x.dtype if x.is_complex() else COMPLEX_OF[x.dtype]
    kind, modes, low = _split_kind(kind)
    plan = cached_plan(kind, shape, batch, cdtype, norm, inverse, x.device, modes=modes, low=low)
    y = plan.execute(x)
    if remember is not None:
        PLANS.add_alias(remember, plan, plan.direct_calls.get((x.shape, x.dtype, x.device)))
    return y


def _own(out: tuple, inputs: list) -> list:
    """A custom operator's outputs (trnplan::execute's, trnplan::execute_split's): on cpu/cuda
    contiguous (the fake kernel promises it; a truncated plan's 1-D cut is a view of the whole
    spectrum) and aliasing no input (a custom op may not alias); elsewhere as they are (an
    accelerator plan makes new tensors, and data_ptr() of an xla tensor crashed torch-xla 2.9's
    dynamo bridge)."""
    if inputs[0].device.type not in ("cpu", "cuda"):
        return list(out)
    ptrs = {t.data_ptr() for t in inputs}
    return [t.clone() if t.data_ptr() in ptrs and t.numel() else t.contiguous() for t in out]


# Under torch.compile the plan runs as an opaque custom operator: Dynamo cannot trace planning
# (attrs classes, hashing, the on-disk cache) and Inductor generates no code for complex tensors,
# so the graph holds one trnplan::execute node per transform, with a fake (shape-only) version for
# tracing and a trnplan::execute_backward node for autograd, which runs the plan's adjoint plan.
@torch.library.custom_op("trnplan::execute", mutates_args=())
def _execute_op(x: torch.Tensor, kind: str, shape: list[int], inverse: bool, norm: str) -> torch.Tensor:
    return _own((_run_plan(x, kind, tuple(shape), inverse, norm),), [x])[0]


@_execute_op.register_fake
def _execute_fake(x, kind, shape, inverse, norm):
    tail, dtype = _out_meta(kind, tuple(shape), x.dtype)
    return x.new_empty((*x.shape[: x.ndim - len(shape)], *tail), dtype=dtype)


@torch.library.custom_op("trnplan::execute_backward", mutates_args=())
def _execute_backward_op(g: torch.Tensor, kind: str, shape: list[int], inverse: bool, norm: str) -> torch.Tensor:
    shape = tuple(shape)
    lead = g.shape[: g.ndim - len(shape)]
    batch = math.prod(lead)
    tail, dtype = _in_meta(kind, shape, g.dtype)
    if batch == 0:
        return torch.zeros((*lead, *tail), dtype=dtype, device=g.device)
    cdtype = g.dtype if g.is_complex() else COMPLEX_OF[g.dtype]
    kind, modes, low = _split_kind(kind)
    return cached_plan(kind, shape, batch, cdtype, norm, inverse, g.device, modes=modes, low=low).backward(g)


@_execute_backward_op.register_fake
def _execute_backward_fake(g, kind, shape, inverse, norm):
    tail, dtype = _in_meta(kind, tuple(shape), g.dtype)
    return g.new_empty((*g.shape[: g.ndim - len(shape)], *tail), dtype=dtype)


def _execute_setup(ctx, inputs, output):
    ctx.args = inputs[1:]


def _execute_grad(ctx, g):
    return _execute_backward_op(g, *ctx.args), None, None, None, None


_execute_op.register_autograd(_execute_grad, setup_context=_execute_setup)


def _split_plan(t: torch.Tensor, kind: str, shape: tuple, inverse: bool, norm: str):
    """The plan of a split call whose first tensor is ``t`` (real; trailing ``len(shape)`` dims transformed)."""
    batch = math.prod(t.shape[: t.ndim - len(shape)])
    base, modes, low = _split_kind(kind)
    return cached_plan(base, shape, batch, COMPLEX_OF[t.dtype], norm, inverse, t.device, modes=modes, low=low)


def _split_counts(kind: str) -> tuple[int, int]:
    """How many real tensors a split call of ``kind`` takes and returns ((re, im) or one)."""
    base = _split_kind(kind)[0]
    return (1 if base == "r2c" else 2), (1 if base == "c2r" else 2)




# The split form under torch.compile (Plan.execute_split: real tensors only, the form a NeuronCore
# takes): as trnplan::execute, an opaque operator with a fake kernel, so that Dynamo traces a layer
# with split weights (nn.SpectralConv(dtype=torch.float32)) in one graph instead of tracing into
# planning (it stopped at the plan cache's lock: "Unsupported method call", 2 graph breaks).
@torch.library.custom_op("trnplan::execute_split", mutates_args=())
def execute_split_op(inputs: list[torch.Tensor], kind: str, shape: list[int], inverse: bool,
                     norm: str) -> list[torch.Tensor]:
    """``Plan.execute_split`` of the plan for ``inputs`` (``[x]`` for r2c, ``[re, im]`` else) as a
    torch operator: a list of real tensors, ``[re, im]`` (c2c, r2c) or ``[y]`` (c2r)."""
    plan = _split_plan(inputs[0], kind, tuple(shape), inverse, norm)
    out = plan.execute_split(inputs[0] if len(inputs) == 1 else tuple(inputs))
    return _own(out if isinstance(out, tuple) else (out,), inputs)


@execute_split_op.register_fake
def _execute_split_fake(inputs, kind, shape, inverse, norm):
    tail, _ = _out_meta(kind, tuple(shape), inputs[0].dtype)
    lead = inputs[0].shape[: inputs[0].ndim - len(shape)]
    return [inputs[0].new_empty((*lead, *tail)) for _ in range(_split_counts(kind)[1])]


@torch.library.custom_op("trnplan::execute_split_backward", mutates_args=())
def _execute_split_backward_op(grads: list[torch.Tensor], kind: str, shape: list[int], inverse: bool,
                               norm: str) -> list[torch.Tensor]:
    plan = _split_plan(grads[0], kind, tuple(shape), inverse, norm)
    return _own(plan._backward_split(tuple(grads)), grads)


@_execute_split_backward_op.register_fake
def _execute_split_backward_fake(grads, kind, shape, inverse, norm):
    tail, _ = _in_meta(kind, tuple(shape), grads[0].dtype)
    lead = grads[0].shape[: grads[0].ndim - len(shape)]
    return [grads[0].new_empty((*lead, *tail)) for _ in range(_split_counts(kind)[0])]


def _execute_split_setup(ctx, inputs, output):
    ctx.args = inputs[1:]
    ctx.out_meta = [(t.shape, t.dtype, t.device) for t in output]


def _execute_split_grad(ctx, grads):
    grads = [g if g is not None else torch.zeros(shape, dtype=dtype, device=device)
             for g, (shape, dtype, device) in zip(grads, ctx.out_meta)]
    return _execute_split_backward_op(grads, *ctx.args), None, None, None, None


execute_split_op.register_autograd(_execute_split_grad, setup_context=_execute_split_setup)


def _transform(x: torch.Tensor, kind: str, inverse: bool, dims, shape, norm: str, remember=None) -> torch.Tensor:
    """Run one plan over ``dims`` of ``x`` (already promoted and resized to the plan's input).

    ``shape`` is the logical transform shape, in the order of ``dims``; for r2c/c2r the last of
    ``dims`` is the real (halved) axis. ``remember``: the caller's :func:`_direct_key` where ``x``
    is the user's tensor as given and the call's result is the plan's (no ``out=``, no conjugate);
    where ``dims`` are also the trailing dims, the call was exactly ``plan.execute(x)``, and the
    same arguments go straight to the plan next time (:func:`_call`).
    """
    k, ndim = len(dims), x.ndim
    tail = list(range(ndim - k, ndim))
    moved = dims != tail
    xm = x.movedim(dims, tail) if moved else x
    if torch.compiler.is_compiling():
        y = _execute_op(xm, kind, list(shape), inverse, norm)
    else:  # eager: Plan.execute's own autograd Function (which also supports double backward)
        y = _run_plan(xm, kind, tuple(shape), inverse, norm, None if moved else remember)
    return y.movedim(tail, dims) if moved else y


