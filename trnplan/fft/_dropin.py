"""The drop-in's dispatch: the full path of each torch.fft function, its shortcut, its torch operator.

Every public transform calls :func:`_call`. A call seen before with the same arguments (the
function, the input's ``(shape, dtype, device)``, ``n``/``s``, ``dim``, ``norm``; the key of
:func:`_direct_key`) goes straight to the plan the full path ran for it, which the plan cache
remembers under that key (``PLANS.add_alias``): this is the hot path, a dict lookup and the
plan's ready call, within ~2 µs of torch.fft (``bench/dropin.py``). Every other call takes the
full path, the family's implementation (:func:`_c2c`, :func:`_r2c`, :func:`_c2r`: argument
handling in :mod:`~trnplan.fft._args`, then :func:`~trnplan.fft._engine._transform`), through
``_IMPLS``, the same table the ``trnplan::fft_<name>`` operators (:func:`register_ops`) run.
"""

from __future__ import annotations

import torch

from trnplan.fft._args import (
    _MIRROR,
    _check_input,
    _check_points,
    _dims,
    _dims_nd,
    _finish,
    _int_arg,
    _int_seq,
    _norm,
    _promote,
    _real_input,
    _resize,
    _wrap_dim,
)
from trnplan.fft._engine import _transform
from trnplan.plan.memo import PLANS


# ---------------------------------------------------------------------------- the full path: the families
def _c2c(name, x, s, dim, norm, out, inverse, nd):
    _check_input(name, x)
    raw_norm, given = norm, x
    norm = _norm(name, norm)
    dims, shape = _dims(name, x, s, dim, nd)
    x = _promote(name, x, require_complex=True)
    if not dims:  # fftn over no dimensions (a 0-d tensor, or dim=()) is the promoted input itself
        return _finish(name, x.clone(), out)
    x = _resize(x, dims, shape)
    remember = _direct_key(name, given, s, dim, raw_norm) if out is None and x is given else None
    return _finish(name, _transform(x, "c2c", inverse, dims, shape, norm, remember), out)


#: the transforms whose repeated calls may go straight to their plan (:func:`_call`): those whose
#: result is the plan's own (hfft/ihfft conjugate around it)
_DIRECT = frozenset(("fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2",
                     "fftn", "ifftn", "rfftn", "irfftn"))
#: fft2's (and the other 2-D functions') default ``dim``: the object itself, so that it needs no check
_DIMS_2 = (-2, -1)


def _plain(v) -> bool:
    """``n``/``s``/``dim`` as a key may stand for itself: None, an int, or a tuple of ints, exactly.

    Exactly, because ``1.0``, ``True`` and ``np.float64(1)`` equal ``1`` as dict keys, and the full
    path refuses them (TypeError) where a key of ``1`` would have answered; a list is unhashable.
    """
    if v is None or v is _DIMS_2 or type(v) is int:
        return True
    return type(v) in (tuple, torch.Size) and all(type(e) is int for e in v)


def _direct_key(name: str, x, s, dim, norm):
    """The shortcut's key of a call, or None where its arguments take no shortcut: the transform,
    the input's signature ``(shape, dtype, device)`` (what :attr:`Plan.direct_calls` is keyed by),
    and the raw ``n``/``s``, ``dim`` and ``norm``. (The common cases are tested inline: each
    function call costs ~0.1 µs of the 2 µs the whole shortcut may take.)"""
    if (isinstance(x, torch.Tensor) and (s is None or type(s) is int or _plain(s))
            and (type(dim) is int or dim is _DIMS_2 or dim is None or _plain(dim))
            and (norm is None or type(norm) is str)):
        return ("direct", name, (x.shape, x.dtype, x.device), s, dim, norm)
    return None


def _r2c(name, x, s, dim, norm, out, nd, conj):
    """rfft/rfftn, and ihfft/ihfftn (``conj``: conj(rfft) with the norm mirrored)."""
    _check_input(name, x)
    raw_norm = norm
    norm = _norm(name, norm)
    dims, shape = _dims(name, x, s, dim, nd, nonempty=True)
    given = x
    x = _resize(_real_input(name, x), dims, shape)
    remember = _direct_key(name, given, s, dim, raw_norm) if out is None and x is given and not conj else None
    y = _transform(x, "r2c", False, dims, shape, _MIRROR[norm] if conj else norm, remember)
    if conj:  # torch returns ihfft as a lazy conjugate view and ihfftn materialised; so do we
        y = torch.conj_physical(y) if nd else y.conj()
    return _finish(name, y, out)


def _c2r(name, x, s, dim, norm, out, nd, conj):
    """irfft/irfftn, and hfft/hfftn (``conj``: irfft(conj(x)) with the norm mirrored)."""
    _check_input(name, x)
    raw_norm, given = norm, x
    norm = _norm(name, norm)
    if nd:
        dims, shape = _dims_nd(name, x, s, dim)
        if not dims:
            raise RuntimeError(f"{name} must transform at least one axis; pass dim=(-1,) or a non-empty s")
        last = shape[-1] if s is not None and _int_seq(name, "s", s)[-1] != -1 else 2 * (x.shape[dims[-1]] - 1)
    else:
        d = _wrap_dim(_int_arg(name, "dim", dim), x.ndim)
        dims, shape = [d], [x.shape[d]]
        last = 2 * (x.shape[d] - 1) if s is None else _int_arg(name, "n", s)
    shape[-1] = last
    _check_points(shape)
    x = _promote(name, x, require_complex=True)
    if conj:
        x = x.conj()
    x = _resize(x, dims, [*shape[:-1], last // 2 + 1])
    remember = _direct_key(name, given, s, dim, raw_norm) if out is None and x is given else None
    y = _transform(x, "c2r", True, dims, shape, _MIRROR[norm] if conj else norm, remember)
    return _finish(name, y, out)


def _shortcut(key, x):
    """The plan the full path ran on ``x`` as given for the same arguments (``key``), run again, or None."""
    if key is None or torch.compiler.is_compiling() or torch._C._is_tracing():
        return None
    plan = PLANS.by_alias(key)
    if plan is None:
        return None
    call = None if x.requires_grad else plan.direct_calls.get(key[2])
    return plan.execute(x) if call is None else call(x)



# ---------------------------------------------------------------------------- torch operators
# Each transform is also a torch operator, trnplan::fft_<name>, with torch.fft's schema (aten's
# fft_<name> and fft_<name>.out), so that TorchScript and the JIT tracer see one node per transform:
#
# - torch.jit.trace records the operator (the public function calls it while tracing) instead of
#   the plan's internal ops, and reads shapes as ints inside it (while tracing, x.shape[d] is a
#   0-d tensor, which no plan can be made for);
# - torch.jit.script compiles calls to trnplan.fft.<name> as calls to the operator: TorchScript
#   resolves a Python function through its builtin table before trying to compile it
#   (torch/jit/_builtins.py: _find_builtin, filled by _register_builtin; a private table, the same
#   one that maps torch.fft.fft to aten::fft_fft). A scripted or traced module saved with
#   torch.jit.save loads wherever trnplan is imported (that import registers the operators).
#
# The kernels are CompositeImplicitAutograd: they run this module's Python code (planning once
# per shape in Python, then the cached plan), so autograd, every device and meta tensors behave
# as in eager calls. torch.compile and torch.export trace the public functions themselves (which
# put one trnplan::execute node per transform in the graph, with its fake kernel and autograd).
_FAMILY = {"fft": (_c2c, {"inverse": False}), "ifft": (_c2c, {"inverse": True}),
           "rfft": (_r2c, {"conj": False}), "ihfft": (_r2c, {"conj": True}),
           "irfft": (_c2r, {"conj": False}), "hfft": (_c2r, {"conj": True})}
_SCHEMA_ARGS = {1: "SymInt? n=None, int dim=-1", "2": "SymInt[1]? s=None, int[1] dim=[-2, -1]",
                "n": "SymInt[1]? s=None, int[1]? dim=None"}


def _impl(name: str):
    """The eager implementation of transform ``name``: (input, n|s, dim, norm, out) -> Tensor."""
    base = name.removesuffix("2").removesuffix("n") if name[-1] in "2n" else name
    family, kw = _FAMILY[base]
    nd = base != name
    default_dim = _DIMS_2 if name.endswith("2") else (None if nd else -1)

    # the dispatcher leaves out trailing arguments that equal the schema's defaults
    def run(input, s=None, dim=default_dim, norm=None, out=None):
        return family(name, input, s, dim, norm, out, nd=nd, **kw)

    return run


_IMPLS = {name: _impl(name) for name in (*_FAMILY, *(b + "2" for b in _FAMILY), *(b + "n" for b in _FAMILY))}


def _call(name: str, input, s, dim, norm, out):
    if torch.compiler.is_compiling():  # the full path emits the trnplan::execute operator
        return _IMPLS[name](input, s, dim, norm, out)
    # torch.jit.is_tracing() less its is_scripting() test (this Python never runs under TorchScript,
    # which calls the operator): 0.1-0.2 µs of the shortcut's budget; under torch.compile the line
    # above returned first, so Dynamo never meets this call
    if torch._C._is_tracing():  # record one trnplan::fft_<name> node; its kernel runs untraced
        return _finish(name, getattr(torch.ops.trnplan, f"fft_{name}")(input, s, dim, norm), out)
    if out is None and name in _DIRECT:
        key = _direct_key(name, input, s, dim, norm)
        if key is not None:  # the full path ended in plan.execute(input) for these arguments before?
            call = None if input.requires_grad else PLANS.calls.get(key)
            if call is not None:  # (execute's own fast path, looked up once)
                return call(input)
            plan = PLANS.by_alias(key)
            if plan is not None:
                return plan.execute(input)
    return _IMPLS[name](input, s, dim, norm, out)


def register_ops(functions: dict) -> None:
    """Define trnplan::fft_<name> (and .out) for every transform; make the public functions
    (``functions``: name → the function ``trnplan.fft.<name>``) TorchScript builtins."""
    lib = torch.library.Library("trnplan", "FRAGMENT")  # kept alive in _LIBRARY: dropping it unregisters
    for name, run in _IMPLS.items():
        args = _SCHEMA_ARGS[1 if name in _FAMILY else name[-1]]
        lib.define(f"fft_{name}(Tensor self, {args}, str? norm=None) -> Tensor")
        lib.define(f"fft_{name}.out(Tensor self, {args}, str? norm=None, *, Tensor(a!) out) -> Tensor(a!)")
        lib.impl(f"fft_{name}", run, "CompositeImplicitAutograd")
        lib.impl(f"fft_{name}.out", run, "CompositeImplicitAutograd")
        if hasattr(torch.jit, "_builtins"):
            torch.jit._builtins._register_builtin(functions[name], f"trnplan::fft_{name}")
    _LIBRARY.append(lib)


_LIBRARY: list = []


