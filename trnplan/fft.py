"""trnplan.fft: torch.fft's functions over cached trnplan plans — change one import, keep the code.

Every transform here has torch.fft's signature and semantics (``n``/``s`` zero-pad or crop,
``dim`` any/negative/non-last, ``norm``, dtype promotion, ``out=``) and runs as one
:class:`~trnplan.plan.plan.Plan` from the process-wide plan cache: the transformed dimensions are
moved to the end, every other dimension becomes the plan's batch, the plan runs, and the
dimensions are moved back. A second call with the same shape, dtype, norm and device reuses the
same plan without planning again. Results are differentiable (the plan's backward pass runs the
adjoint transform as another cached plan).

Each transform is also a torch operator, ``trnplan::fft_<name>`` with torch.fft's schema, so that
``torch.jit.script`` compiles calls to these functions and ``torch.jit.trace`` records one node per
transform; ``torch.compile(fullgraph=True)`` and ``torch.export`` trace them into one opaque
``trnplan::execute`` node per plan (see "torch operators" below).

Argument handling follows ATen's ``SpectralOps.cpp`` (``canonicalize_fft_shape_and_dim_args``,
``resize_fft_input``, ``promote_tensor_fft``) so that errors come with the same exception
classes as torch.fft; the messages also say how to fix the call.

Where this module differs from torch.fft (on purpose):

- a batch with no transforms (a leading dimension of size 0) returns an empty result of the
  right shape and dtype; torch.fft on the CPU raises an MKL error there;
- float16, bfloat16 and complex32 inputs raise :class:`UnsupportedDtypeError` (a ``TypeError``
  and a ``RuntimeError``, like torch's own "Unsupported dtype Half" on the CPU), because trnplan
  plans compute in float32 or float64: convert with ``x.float()`` (``x.to(torch.complex64)``).

The Hermitian transforms follow from the real ones: ``hfftn(x, norm) = irfftn(conj(x),
mirror(norm))`` and ``ihfftn(x, norm) = conj(rfftn(x, mirror(norm)))``, where ``mirror`` swaps
"backward" and "forward" (the direction of the exponent flips, so does the side that is scaled).

References
----------
.. [1] PyTorch, ``torch.fft`` and ``aten/src/ATen/native/SpectralOps.cpp``.
.. [2] J. W. Cooley and J. W. Tukey, "An algorithm for the machine calculation of complex
       Fourier series", Math. Comp. 19 (1965), 297–301.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Sequence

import torch

from trnplan.core.errors import UnsupportedDtypeError
from trnplan.core.problem import COMPLEX_OF, R2R_KINDS, REAL_OF
from trnplan.plan.api import cached_plan
from trnplan.plan.memo import PLANS

__all__ = [
    "UnsupportedDtypeError",
    "dct",
    "dctn",
    "dst",
    "dstn",
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "hfft2",
    "hfftn",
    "idct",
    "idctn",
    "idst",
    "idstn",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "ihfft2",
    "ihfftn",
    "irfft",
    "irfft2",
    "irfftn",
    "irfftn_truncated",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
    "rfftn_truncated",
]


# ---------------------------------------------------------------------------- argument checks
_NORMS = ("backward", "ortho", "forward")
_MIRROR = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _check_input(name: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}; "
                        f"convert with torch.as_tensor(x)")


def _norm(name: str, norm) -> str:
    if norm is None:
        return "backward"
    if not isinstance(norm, str):
        raise TypeError(f"{name}(): argument 'norm' must be str, not {type(norm).__name__}; "
                        f"use None, 'backward', 'ortho' or 'forward'")
    if norm not in _NORMS:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"; {name}() takes norm=None (= "backward"), '
                           f'"backward", "ortho" or "forward"')
    return norm


def _int_arg(name: str, arg: str, value) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name}(): argument '{arg}' must be int, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}(): argument '{arg}' must be int, not {type(value).__name__}") from None


def _int_seq(name: str, arg: str, value) -> list:
    if isinstance(value, (tuple, list, torch.Size)):
        return [_int_arg(name, arg, v) for v in value]
    return [_int_arg(name, arg, value)]


def _wrap_dim(d: int, ndim: int) -> int:
    if ndim == 0:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions; "
                         f"an FFT needs at least one dimension (x.reshape(1) makes one)")
    if not -ndim <= d < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})")
    return d + ndim if d < 0 else d


def _check_points(shape) -> None:
    for n in shape:
        if n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified; every transform length must be "
                               f"≥ 1 (pass n/s explicitly for a dimension of size 0 or 1 that would give 0)")


def _unsupported(name: str, dtype) -> UnsupportedDtypeError:
    fix = "x.to(torch.complex64)" if dtype.is_complex else "x.float()"
    return UnsupportedDtypeError(
        f"{name}() got a {str(dtype).removeprefix('torch.')} tensor, but trnplan plans compute in float32 "
        f"(complex64) or float64 (complex128); convert the input first, e.g. {fix}"
    )


def _promote(name: str, x: torch.Tensor, require_complex: bool) -> torch.Tensor:
    """torch.fft's promotion: integer/bool → the default float dtype; complex if required."""
    dtype = x.dtype
    if dtype.is_complex:
        if dtype not in REAL_OF:
            raise _unsupported(name, dtype)
        return x
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    if dtype not in COMPLEX_OF:
        raise _unsupported(name, dtype)
    if require_complex:
        dtype = COMPLEX_OF[dtype]
    return x if dtype == x.dtype else x.to(dtype)


def _real_input(name: str, x: torch.Tensor) -> torch.Tensor:
    if x.is_complex():
        base = name.removesuffix("2").removesuffix("n")
        other = {"rfft": "fft", "ihfft": "ifft"}.get(base, "fft")
        raise RuntimeError(f"{name} expects a real input tensor, but got {str(x.dtype).removeprefix('torch.')}; "
                           f"for complex input use trnplan.fft.{other}{name[len(base):]}")
    return _promote(name, x, require_complex=False)


def _dims_1d(name: str, x: torch.Tensor, n, dim):
    """The wrapped dim and the transform length of a 1-D call."""
    d = _wrap_dim(_int_arg(name, "dim", dim), x.ndim)
    return d, (x.shape[d] if n is None else _int_arg(name, "n", n))


def _dims_nd(name: str, x: torch.Tensor, s, dim):
    """ATen's canonicalize_fft_shape_and_dim_args: the dims to transform and their lengths."""
    ndim = x.ndim
    dims = None
    if dim is not None:
        dims = [_wrap_dim(d, ndim) for d in _int_seq(name, "dim", dim)]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"FFT dims must be unique; {name}() got dim={tuple(dim)}")
    if s is not None:
        s = _int_seq(name, "s", s)
        if dims is not None and len(dims) != len(s):
            raise RuntimeError(f"When given, dim and shape arguments must have the same length; {name}() got "
                               f"s={tuple(s)} and dim={tuple(dims)}")
        if len(s) > ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {ndim} dimensions.")
        if dims is None:
            dims = list(range(ndim - len(s), ndim))
        shape = [x.shape[d] if n == -1 else n for d, n in zip(dims, s)]
    elif dims is None:
        dims, shape = list(range(ndim)), list(x.shape)
    else:
        shape = [x.shape[d] for d in dims]
    _check_points(shape)
    return dims, shape


def _resize(x: torch.Tensor, dims, sizes) -> torch.Tensor:
    """Zero-pad or crop each of ``dims`` to its size (from the end), as torch.fft does for n/s."""
    pad = None
    for d, n in zip(dims, sizes):
        have = x.shape[d]
        if n < have:
            x = x.narrow(d, 0, n)
        elif n > have:
            if pad is None:
                pad = [0] * (2 * x.ndim)
            pad[2 * (x.ndim - 1 - d) + 1] = n - have
    if pad is not None:
        last = max(i for i, p in enumerate(pad) if p) + 1
        x = torch.nn.functional.pad(x, pad[:last])
    return x


def _finish(name: str, y: torch.Tensor, out):
    """torch's ``out=``: check the dtype kind, resize (warning when out held data), copy."""
    if out is None:
        return y
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if torch.is_grad_enabled() and y.requires_grad:
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           f"but one of the arguments requires grad; call without out= (y = {name}(x))")
    if y.is_complex() and not out.is_complex():
        raise RuntimeError(f"{name} expects a complex output tensor, but got {str(out.dtype).removeprefix('torch.')}")
    if not y.is_complex() and not out.is_floating_point():
        raise RuntimeError(f"{name} expects a floating point output tensor, but got "
                           f"{str(out.dtype).removeprefix('torch.')}")
    if out.shape != y.shape:
        if out.numel() != 0:
            warnings.warn(f"{name}(): an output with one or more elements was resized since it had shape "
                          f"{list(out.shape)}, which does not match the required output shape {list(y.shape)}; "
                          f"pass an empty tensor or one of the right shape to avoid this", UserWarning, stacklevel=3)
        out.resize_(y.shape)
    return out.copy_(y)


# ---------------------------------------------------------------------------- the engine call
def _split_kind(kind: str):
    """``"r2c@16x8"`` (a truncated transform, as the operators carry it) → ``("r2c", (16, 8), None)``;
    an axis keeping the lowest modes only is marked ``L``: ``"r2c@16Lx8"`` → ``("r2c", (16, 8), (0,))``."""
    base, _, word = kind.partition("@")
    if not word:
        return base, None, None
    parts = word.split("x")
    low = tuple(i for i, part in enumerate(parts) if part.endswith("L"))
    return base, tuple(int(part.removesuffix("L")) for part in parts), low or None


def _kind_word(kind: str, modes, low) -> str:
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
        PLANS.add_alias(remember, plan)
    return y


# Under torch.compile the plan runs as an opaque custom operator: Dynamo cannot trace planning
# (attrs classes, hashing, the on-disk cache) and Inductor generates no code for complex tensors,
# so the graph holds one trnplan::execute node per transform, with a fake (shape-only) version for
# tracing and a trnplan::execute_backward node for autograd, which runs the plan's adjoint plan.
@torch.library.custom_op("trnplan::execute", mutates_args=())
def _execute_op(x: torch.Tensor, kind: str, shape: list[int], inverse: bool, norm: str) -> torch.Tensor:
    y = _run_plan(x, kind, tuple(shape), inverse, norm)
    if x.device.type not in ("cpu", "cuda"):  # an accelerator plan makes new tensors (and data_ptr()
        return y                              # of an xla tensor crashed torch-xla 2.9's dynamo bridge)
    if y.data_ptr() == x.data_ptr() and y.numel():
        return y.clone()  # a custom op may not alias
    # the fake kernel promises a contiguous result; a truncated plan's 1-D cut is a view of the whole spectrum
    return y.contiguous()


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


def _c2c(name, x, s, dim, norm, out, inverse, nd):
    _check_input(name, x)
    raw_norm, given = norm, x
    norm = _norm(name, norm)
    if nd:
        dims, shape = _dims_nd(name, x, s, dim)
    else:
        d, n = _dims_1d(name, x, s, dim)
        dims, shape = [d], [n]
        _check_points(shape)
    x = _promote(name, x, require_complex=True)
    if not dims:  # fftn over no dimensions (a 0-d tensor, or dim=()) is the promoted input itself
        return _finish(name, x.clone(), out)
    x = _resize(x, dims, shape)
    remember = _direct_key(name, given, s, dim, raw_norm) if out is None and x is given else None
    return _finish(name, _transform(x, "c2c", inverse, dims, shape, norm, remember), out)


# ---------------------------------------------------------------------------- the shortcut
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
    if nd:
        dims, shape = _dims_nd(name, x, s, dim)
        if not dims:
            raise RuntimeError(f"{name} must transform at least one axis; pass dim=(-1,) or a non-empty s")
    else:
        d, n = _dims_1d(name, x, s, dim)
        dims, shape = [d], [n]
        _check_points(shape)
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


def _r2r(name, x, type, s, dim, norm, out, inverse, nd):
    """dct/dst/idct/idst and their N-D forms: one r2r plan over ``dim`` (scipy.fft's definitions).

    Complex input is transformed as its real and imaginary parts (scipy.fft does the same).
    """
    _check_input(name, x)
    norm = _norm(name, norm)
    if isinstance(type, bool) or type not in (1, 2, 3, 4):
        raise ValueError(f"{name}(): type must be 1, 2, 3 or 4 (the DCT/DST type), got {type!r}")
    kind = f"{name.removeprefix('i')[:3]}{type}"
    if nd:
        dims, shape = _dims_nd(name, x, s, dim)
    else:
        d, n = _dims_1d(name, x, s, dim)
        dims, shape = [d], [n]
        _check_points(shape)
    if kind == "dct1" and min(shape, default=2) < 2:
        raise RuntimeError(f"{name}(): the DCT-I is not defined for a length below 2 (its logical length is "
                           f"2(n−1)); got lengths {tuple(shape)}")
    x = _promote(name, x, require_complex=False)
    if not dims:
        return _finish(name, x.clone(), out)
    x = _resize(x, dims, shape)
    if x.is_complex():
        re = _transform(x.real.contiguous(), kind, inverse, dims, shape, norm)
        im = _transform(x.imag.contiguous(), kind, inverse, dims, shape, norm)
        return _finish(name, torch.complex(re, im), out)
    return _finish(name, _transform(x, kind, inverse, dims, shape, norm), out)


def _r2r_doc(name: str, nd: bool) -> str:
    fam = name.removeprefix("i")[:3].upper()
    inverse = name.startswith("i")
    what = f"the inverse {fam}" if inverse else f"the {fam}"
    where = ("over ``dim`` (default: all dimensions, or the last ``len(s)``)" if nd
             else "along ``dim``")
    length = ("s : sequence of int, optional\n    Length per transformed dimension: the input is zero-padded or "
              "cropped to it (-1 keeps a size).\ndim : int or sequence of int, optional\n    The dimensions to "
              "transform." if nd else
              "n : int, optional\n    Length of the transform: the input is zero-padded or cropped to it.\n"
              "dim : int, default -1\n    The dimension to transform.")
    return f"""Compute {what} of type I–IV {where}, as scipy.fft.{name} does, through a cached trnplan plan.

The plan's kind is ``"{fam.lower()}<type>"`` (FFTW's {'REDFT' if fam == 'DCT' else 'RODFT'} kinds); the
planner chooses pocketfft (CPU), one GEMM with the transform's matrix, or a transform through a
child DFT (on an accelerator, a GEMM tree). Differentiable: the backward pass runs the adjoint,
the partner type's plan with diagonal weights. Complex input is transformed as its real and
imaginary parts.

Parameters
----------
input : torch.Tensor
    Real (or complex) input; integer or bool input is promoted to the default float dtype.
type : {{1, 2, 3, 4}}, default 2
    The {fam} type (scipy.fft's definitions; type 1 needs lengths ≥ 2{' for the DCT' if fam == 'DCT' else ''}).
{length}
norm : {{"backward", "ortho", "forward"}}, optional
    scipy.fft's norms: "backward" (None) leaves the forward transform unscaled and scales the
    inverse by 1/L (L = 2(n−1) for DCT-I, 2(n+1) for DST-I, else 2n); "forward" the reverse;
    "ortho" makes it orthonormal (scipy's ``orthogonalize=True``).
out : torch.Tensor, optional
    Where to write the result; not with autograd.

Returns
-------
torch.Tensor
    The transform, the input's dtype (promoted), ``dim`` resized to ``{'s' if nd else 'n'}``.

Raises
------
ValueError
    ``type`` is not 1–4.
RuntimeError
    A bad ``norm``, ``{'s' if nd else 'n'}`` or ``dim``; a DCT-I length below 2.

Examples
--------
>>> import torch
>>> from trnplan import fft as tfft
>>> x = torch.randn(4, 64, dtype=torch.float64)
>>> y = tfft.{'i' if inverse else ''}{fam.lower()}{'n' if nd else ''}(x, type=2, norm="ortho")
"""


def dct(input: torch.Tensor, type: int = 2, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("dct", input, type, n, dim, norm, out, inverse=False, nd=False)


def idct(input: torch.Tensor, type: int = 2, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("idct", input, type, n, dim, norm, out, inverse=True, nd=False)


def dst(input: torch.Tensor, type: int = 2, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("dst", input, type, n, dim, norm, out, inverse=False, nd=False)


def idst(input: torch.Tensor, type: int = 2, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("idst", input, type, n, dim, norm, out, inverse=True, nd=False)


def dctn(input: torch.Tensor, type: int = 2, s: Sequence[int] | None = None,
         dim: int | Sequence[int] | None = None, norm: str | None = None, *,
         out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("dctn", input, type, s, dim, norm, out, inverse=False, nd=True)


def idctn(input: torch.Tensor, type: int = 2, s: Sequence[int] | None = None,
          dim: int | Sequence[int] | None = None, norm: str | None = None, *,
          out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("idctn", input, type, s, dim, norm, out, inverse=True, nd=True)


def dstn(input: torch.Tensor, type: int = 2, s: Sequence[int] | None = None,
         dim: int | Sequence[int] | None = None, norm: str | None = None, *,
         out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("dstn", input, type, s, dim, norm, out, inverse=False, nd=True)


def idstn(input: torch.Tensor, type: int = 2, s: Sequence[int] | None = None,
          dim: int | Sequence[int] | None = None, norm: str | None = None, *,
          out: torch.Tensor | None = None) -> torch.Tensor:
    return _r2r("idstn", input, type, s, dim, norm, out, inverse=True, nd=True)


for _f in (dct, idct, dst, idst, dctn, idctn, dstn, idstn):
    _f.__doc__ = _r2r_doc(_f.__name__, _f.__name__.endswith("n"))
del _f


def _truncated_dims(name, x, modes, s, dim, inverse):
    """(dims, real shape, modes) of a truncated call: ``dim`` defaults to the last ``len(modes)``."""
    modes = _int_seq(name, "modes", modes)
    if dim is None:
        dim = list(range(-len(modes), 0))
    dims = [_wrap_dim(d, x.ndim) for d in _int_seq(name, "dim", dim)]
    if len(dims) != len(modes) or len(set(dims)) != len(dims):
        raise RuntimeError(f"{name}(): modes and dim must name the same number of distinct dimensions; got "
                           f"modes={tuple(modes)} and dim={tuple(dims)}")
    if s is None:
        if inverse:
            raise RuntimeError(f"{name}(): s (the real output's lengths) is required: a truncated spectrum does "
                               f"not say how long the signal was")
        s = [x.shape[d] for d in dims]
    shape = _int_seq(name, "s", s)
    if len(shape) != len(dims):
        raise RuntimeError(f"{name}(): s and modes must have the same length; got s={tuple(shape)}")
    _check_points(shape)
    return dims, shape, modes


def _truncated_key(name: str, x, modes, s, dim, norm, low):
    """The shortcut's key of a truncated call (as :func:`_direct_key`'s, with ``modes`` and ``low``),
    or None where its arguments take no shortcut."""
    if (isinstance(x, torch.Tensor) and all(_plain(v) for v in (modes, s, dim)) and (norm is None or type(norm) is str)
            and (low is None or low is True or low is False or _plain(low))):
        return ("direct", name, (x.shape, x.dtype, x.device), modes, s, dim, norm, low)
    return None


def _shortcut(key, x):
    """The plan the full path ran on ``x`` as given for the same arguments (``key``), run again, or None."""
    if key is None or torch.compiler.is_compiling() or torch._C._is_tracing():
        return None
    plan = PLANS.by_alias(key)
    if plan is None:
        return None
    call = None if x.requires_grad else plan.direct_calls.get(key[2])
    return plan.execute(x) if call is None else call(x)


def _low_axes(name, low, dims, ndim) -> tuple:
    """The axes (indices into ``dims``) of ``low=``: True for every non-last one, or a sequence of dims."""
    if low is None or low is False:
        return ()
    if low is True:
        return tuple(range(len(dims) - 1))
    wanted = [_wrap_dim(d, ndim) for d in _int_seq(name, "low", low)]
    if any(d not in dims[:-1] for d in wanted):
        raise RuntimeError(f"{name}(): low={tuple(low)} must name dimensions of dim={tuple(dims)} other than the last "
                           f"(the last always keeps its lowest modes[-1] bins)")
    return tuple(sorted({dims.index(d) for d in wanted}))


def rfftn_truncated(input: torch.Tensor, modes: int | Sequence[int], s: Sequence[int] | None = None,
                    dim: int | Sequence[int] | None = None, norm: str | None = None, *,
                    low: bool | Sequence[int] | None = None) -> torch.Tensor:
    """Compute an N-D real FFT that keeps only the low frequencies (a pruned rfftn; the FNO's forward step).

    Returns what ``rfftn(input, s, dim, norm)`` would, cut to the kept frequencies: the lowest
    ``modes[-1]`` bins of the last of ``dim`` and the lowest and highest ``modes[i]`` frequencies
    of every other (the Fourier neural operator's layout: ``2·modes[i]`` rows, low then high), or
    only the lowest ``modes[i]`` (``m`` rows) on the dimensions named by ``low``. One
    cached truncated plan (``kind="r2c"``, ``modes=``): kept-column GEMMs per axis, or the whole
    transform then cut, the planner choosing by cost.

    Parameters
    ----------
    input : torch.Tensor
        Real input.
    modes : int or sequence of int
        Frequencies kept per transformed dimension (see above).
    s : sequence of int, optional
        Signal lengths (zero-pad or crop), default the input's sizes along ``dim``.
    dim : int or sequence of int, optional
        The dimensions, default the last ``len(modes)``.
    norm : {"backward", "ortho", "forward"}, optional
        torch.fft's norm of the whole transform.
    low : bool or sequence of int, optional
        Dimensions of ``dim`` (not its last) that keep only their lowest ``modes[i]`` frequencies
        0 … m−1; True: every one but the last. Default: none (the FNO pattern everywhere).

    Returns
    -------
    torch.Tensor
        Complex, ``dim`` resized to ``(2·modes[0], …, modes[-1])`` (``modes[i]`` on the ``low`` ones).

    Raises
    ------
    RuntimeError
        ``modes`` and ``dim`` of different lengths, or a bad ``s``/``norm``.
    ValueError
        More modes than an axis has (``2·modes[i] > s[i]``, ``modes[-1] > s[-1]//2 + 1``).

    Examples
    --------
    >>> import torch
    >>> from trnplan import fft as tfft
    >>> x = torch.randn(8, 64, 64)
    >>> tfft.rfftn_truncated(x, modes=(12, 12)).shape
    torch.Size([8, 24, 12])
    """
    key = _truncated_key("rfftn_truncated", input, modes, s, dim, norm, low)
    y = _shortcut(key, input)  # a repeated call: straight to its plan (as rfftn's, fft.py's _call)
    if y is not None:
        return y
    _check_input("rfftn_truncated", input)
    norm = _norm("rfftn_truncated", norm)
    dims, shape, modes = _truncated_dims("rfftn_truncated", input, modes, s, dim, inverse=False)
    axes = _low_axes("rfftn_truncated", low, dims, input.ndim)
    x = _resize(_real_input("rfftn_truncated", input), dims, shape)
    return _transform(x, _kind_word("r2c", modes, axes), False, dims, shape, norm, key if x is input else None)


def irfftn_truncated(input: torch.Tensor, s: Sequence[int], modes: int | Sequence[int] | None = None,
                     dim: int | Sequence[int] | None = None, norm: str | None = None, *,
                     low: bool | Sequence[int] | None = None) -> torch.Tensor:
    """Compute the inverse of :func:`rfftn_truncated`: irfftn of a spectrum of which only the low frequencies are given.

    ``input`` holds the kept frequencies in :func:`rfftn_truncated`'s layout; every other bin is
    taken as zero (the FNO's zero-fill), without being materialised where the planner picks the
    pruned GEMM passes.

    Parameters
    ----------
    input : torch.Tensor
        Complex, ``dim`` of sizes ``(2·modes[0], …, modes[-1])``.
    s : sequence of int
        The real output's lengths along ``dim`` (required).
    modes : int or sequence of int, optional
        Default: read from ``input``'s sizes (halved on all but the last and the ``low`` ones).
    dim : int or sequence of int, optional
        Default the last ``len(s)``.
    norm : {"backward", "ortho", "forward"}, optional
        torch.fft's norm of the whole inverse transform.
    low : bool or sequence of int, optional
        As :func:`rfftn_truncated`'s: the dimensions whose input holds only the lowest ``modes[i]``
        frequencies.

    Returns
    -------
    torch.Tensor
        Real, ``dim`` resized to ``s``.

    Raises
    ------
    RuntimeError
        Missing ``s``, or ``modes``/``dim``/``s`` of different lengths.
    ValueError
        ``input``'s sizes do not match ``modes``.

    Examples
    --------
    >>> import torch
    >>> from trnplan import fft as tfft
    >>> X = tfft.rfftn_truncated(torch.randn(8, 64, 64), modes=(12, 12))
    >>> tfft.irfftn_truncated(X, s=(64, 64)).shape
    torch.Size([8, 64, 64])
    """
    key = _truncated_key("irfftn_truncated", input, modes, s, dim, norm, low)
    y = _shortcut(key, input)
    if y is not None:
        return y
    _check_input("irfftn_truncated", input)
    norm = _norm("irfftn_truncated", norm)
    if s is None:
        raise RuntimeError("irfftn_truncated(): s (the real output's lengths) is required")
    k = len(_int_seq("irfftn_truncated", "s", s))
    if dim is None:
        dim = list(range(-k, 0))
    wrapped = [_wrap_dim(d, input.ndim) for d in _int_seq("irfftn_truncated", "dim", dim)]
    axes = _low_axes("irfftn_truncated", low, wrapped, input.ndim)
    if modes is None:
        sizes = [input.shape[d] for d in wrapped]
        modes = [n if i in axes else n // 2 for i, n in enumerate(sizes[:-1])] + sizes[-1:]
    dims, shape, modes = _truncated_dims("irfftn_truncated", input, modes, s, dim, inverse=True)
    want = _kept(shape, modes, axes)
    if [input.shape[d] for d in dims] != list(want):
        raise ValueError(f"irfftn_truncated(): input has sizes {[input.shape[d] for d in dims]} along dim {dims}, "
                         f"but modes={tuple(modes)} keeps {list(want)} (2·m on all but the last and the low ones, "
                         f"m on those)")
    x = _promote("irfftn_truncated", input, require_complex=True)
    return _transform(x, _kind_word("c2r", modes, axes), True, dims, shape, norm, key if x is input else None)


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
        plan = PLANS.by_alias(key) if key is not None else None
        if plan is not None:  # the full path ended in plan.execute(input) for these arguments before
            call = None if input.requires_grad else plan.direct_calls.get(key[2])
            return plan.execute(input) if call is None else call(input)  # (execute's own fast path, inlined)
    return _IMPLS[name](input, s, dim, norm, out)


def _register_ops() -> None:
    """Define trnplan::fft_<name> (and .out) for every transform; make them TorchScript builtins."""
    lib = torch.library.Library("trnplan", "FRAGMENT")  # kept alive in _LIBRARY: dropping it unregisters
    for name, run in _IMPLS.items():
        args = _SCHEMA_ARGS[1 if name in _FAMILY else name[-1]]
        lib.define(f"fft_{name}(Tensor self, {args}, str? norm=None) -> Tensor")
        lib.define(f"fft_{name}.out(Tensor self, {args}, str? norm=None, *, Tensor(a!) out) -> Tensor(a!)")
        lib.impl(f"fft_{name}", run, "CompositeImplicitAutograd")
        lib.impl(f"fft_{name}.out", run, "CompositeImplicitAutograd")
        if hasattr(torch.jit, "_builtins"):
            torch.jit._builtins._register_builtin(globals()[name], f"trnplan::fft_{name}")
    _LIBRARY.append(lib)


_LIBRARY: list = []


# ---------------------------------------------------------------------------- docstrings
_PARAMS_1D = """\
    input : torch.Tensor
        {input}
    n : int, optional
        {n}
    dim : int, default -1
        The dimension to transform (negative counts from the end).
    norm : {{"backward", "ortho", "forward"}}, optional
        Scaling, as in torch.fft: ``None`` or "backward" leaves the forward transform unscaled
        and scales the inverse by 1/n; "forward" does the opposite; "ortho" scales both by
        1/√n. ``n`` is the logical (output, for the inverse real transforms) length.{norm_note}
    out : torch.Tensor, optional
        Where to write the result (resized to fit, as torch does); not with autograd."""

_PARAMS_ND = """\
    input : torch.Tensor
        {input}
    s : sequence of int, optional
        {s}
    dim : sequence of int, optional
        The dimensions to transform, in any order, unique, negative allowed; default {dim}.
    norm : {{"backward", "ortho", "forward"}}, optional
        Scaling, as in torch.fft: ``None`` or "backward" leaves the forward transform unscaled
        and scales the inverse by 1/n; "forward" does the opposite; "ortho" scales both by
        1/√n, where n is the product of the logical lengths.{norm_note}
    out : torch.Tensor, optional
        Where to write the result (resized to fit, as torch does); not with autograd."""

_RAISES = """\
    Raises
    ------
    IndexError
        ``dim`` is out of range for ``input``.
    RuntimeError
        A length in ``n``/``s`` (or the input's size along a transformed dimension) is < 1, an
        unknown ``norm``, repeated dims, ``s`` and ``dim`` of different lengths{extra_raise}
        (the same cases and classes as torch.fft).
    UnsupportedDtypeError
        ``input`` is float16, bfloat16 or complex32 (convert with ``x.float()``).
    trnplan.core.errors.TrnplanError
        Planning failed (the message says why)."""

_DOC = """{summary}

{body}

Parameters
----------
{params}

Returns
-------
torch.Tensor
    {returns}

{raises}

Notes
-----
Drop-in for ``torch.fft.{name}``: same signature, semantics and output dtype. The transform
runs as one cached trnplan plan ({plan}); the other dimensions form the plan's batch. A batch
with no transforms (a leading dimension of size 0) returns an empty tensor.{notes}
Gradients flow through it (autograd runs the adjoint plan).

See Also
--------
torch.fft.{name}{see_also}

Examples
--------
>>> import torch
>>> from trnplan import fft as tfft
{examples}
"""

_IN_C = "Input; real, integer or bool input is promoted to complex (float32 → complex64, float64 → complex128)."
_IN_R = "Real input (integer or bool is promoted to the default float dtype); complex input is an error."
_IN_H = "The one-sided Hermitian half-spectrum; real input is promoted to complex."


def _doc(name, summary, body, *, nd, input, length, returns, plan, norm_note="", notes="", see_also="",
         examples, dim="all dimensions (or the last ``len(s)`` when ``s`` is given)", extra_raise=""):
    if nd:
        params = _PARAMS_ND.format(input=input, s=length, dim=dim, norm_note=norm_note)
    else:
        params = _PARAMS_1D.format(input=input, n=length, norm_note=norm_note)
    raises = _RAISES.format(extra_raise=extra_raise)

    def deindent(text):
        return "\n".join(line.removeprefix("    ") for line in text.splitlines())

    return _DOC.format(summary=summary, body=body, params=deindent(params), returns=returns,
                       raises=deindent(raises), name=name, plan=plan, notes=notes,
                       see_also=see_also, examples=examples)


_N_C = "Length of the transform: the input is zero-padded or cropped to ``n`` along ``dim`` (default: its size)."
_S_C = ("Length per transformed dimension: the input is zero-padded or cropped to it; -1 keeps that "
        "dimension's size (default: the input's sizes).")


# ---------------------------------------------------------------------------- 1-D transforms
def fft(input: torch.Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("fft", input, n, dim, norm, out)


def ifft(input: torch.Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("ifft", input, n, dim, norm, out)


def rfft(input: torch.Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("rfft", input, n, dim, norm, out)


def irfft(input: torch.Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("irfft", input, n, dim, norm, out)


def hfft(input: torch.Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("hfft", input, n, dim, norm, out)


def ihfft(input: torch.Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("ihfft", input, n, dim, norm, out)


# ---------------------------------------------------------------------------- N-D transforms
def fft2(input: torch.Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = _DIMS_2,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("fft2", input, s, dim, norm, out)


def ifft2(input: torch.Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = _DIMS_2,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("ifft2", input, s, dim, norm, out)


def fftn(input: torch.Tensor, s: Sequence[int] | None = None, dim: int | Sequence[int] | None = None,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("fftn", input, s, dim, norm, out)


def ifftn(input: torch.Tensor, s: Sequence[int] | None = None, dim: int | Sequence[int] | None = None,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("ifftn", input, s, dim, norm, out)


def rfft2(input: torch.Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = _DIMS_2,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("rfft2", input, s, dim, norm, out)


def irfft2(input: torch.Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = _DIMS_2,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("irfft2", input, s, dim, norm, out)


def rfftn(input: torch.Tensor, s: Sequence[int] | None = None, dim: int | Sequence[int] | None = None,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("rfftn", input, s, dim, norm, out)


def irfftn(input: torch.Tensor, s: Sequence[int] | None = None, dim: int | Sequence[int] | None = None,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("irfftn", input, s, dim, norm, out)


def hfft2(input: torch.Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = _DIMS_2,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("hfft2", input, s, dim, norm, out)


def ihfft2(input: torch.Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = _DIMS_2,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("ihfft2", input, s, dim, norm, out)


def hfftn(input: torch.Tensor, s: Sequence[int] | None = None, dim: int | Sequence[int] | None = None,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("hfftn", input, s, dim, norm, out)


def ihfftn(input: torch.Tensor, s: Sequence[int] | None = None, dim: int | Sequence[int] | None = None,
        norm: str | None = None, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _call("ihfftn", input, s, dim, norm, out)


# ---------------------------------------------------------------------------- helpers (torch's own)
def fftfreq(n: int, d: float = 1.0, *, out: torch.Tensor | None = None, dtype: torch.dtype | None = None,
        layout: torch.layout = torch.strided, device: str | torch.device | None = None,
        requires_grad: bool = False) -> torch.Tensor:
    """The sample frequencies of an ``n``-point FFT: ``[0, 1, …, ⌈n/2⌉−1, −⌊n/2⌋, …, −1] / (d·n)``.

    Delegates to ``torch.fft.fftfreq`` (no transform is involved, so no plan is made).

    Parameters
    ----------
    n : int
        The FFT length.
    d : float, default 1.0
        The sample spacing (the inverse of the sampling rate).
    out : torch.Tensor, optional
        Where to write the result.
    dtype : torch.dtype, optional
        Default: ``torch.get_default_dtype()``.
    layout : torch.layout, default torch.strided
    device : torch.device, optional
    requires_grad : bool, default False

    Returns
    -------
    torch.Tensor
        ``n`` frequencies, in cycles per unit of ``d``.

    Raises
    ------
    RuntimeError
        As ``torch.fft.fftfreq`` does (e.g. a negative ``n``).

    See Also
    --------
    torch.fft.fftfreq, rfftfreq, fftshift

    Examples
    --------
    >>> from trnplan import fft as tfft
    >>> tfft.fftfreq(5)
    tensor([ 0.0000,  0.2000,  0.4000, -0.4000, -0.2000])
    """
    return torch.fft.fftfreq(n, d, out=out, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, out: torch.Tensor | None = None, dtype: torch.dtype | None = None,
        layout: torch.layout = torch.strided, device: str | torch.device | None = None,
        requires_grad: bool = False) -> torch.Tensor:
    """The sample frequencies of :func:`rfft`'s output: ``[0, 1, …, ⌊n/2⌋] / (d·n)``.

    Delegates to ``torch.fft.rfftfreq`` (no transform is involved, so no plan is made).

    Parameters
    ----------
    n : int
        The real FFT length (the output has ``n // 2 + 1`` entries).
    d : float, default 1.0
        The sample spacing.
    out : torch.Tensor, optional
    dtype : torch.dtype, optional
    layout : torch.layout, default torch.strided
    device : torch.device, optional
    requires_grad : bool, default False

    Returns
    -------
    torch.Tensor
        ``n // 2 + 1`` non-negative frequencies.

    Raises
    ------
    RuntimeError
        As ``torch.fft.rfftfreq`` does.

    See Also
    --------
    torch.fft.rfftfreq, fftfreq

    Examples
    --------
    >>> from trnplan import fft as tfft
    >>> tfft.rfftfreq(5)
    tensor([0.0000, 0.2000, 0.4000])
    """
    return torch.fft.rfftfreq(n, d, out=out, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def fftshift(input: torch.Tensor, dim: int | Sequence[int] | None = None) -> torch.Tensor:
    """Move the zero-frequency term to the centre (a roll by ``n // 2`` along each dim).

    Delegates to ``torch.fft.fftshift`` (a roll, not a transform).

    Parameters
    ----------
    input : torch.Tensor
        A spectrum in FFT order.
    dim : int or sequence of int, optional
        The dimensions to shift (default: all).

    Returns
    -------
    torch.Tensor
        The shifted tensor.

    Raises
    ------
    IndexError
        ``dim`` is out of range.

    See Also
    --------
    torch.fft.fftshift, ifftshift

    Examples
    --------
    >>> from trnplan import fft as tfft
    >>> tfft.fftshift(tfft.fftfreq(5))
    tensor([-0.4000, -0.2000,  0.0000,  0.2000,  0.4000])
    """
    return torch.fft.fftshift(input, dim)


def ifftshift(input: torch.Tensor, dim: int | Sequence[int] | None = None) -> torch.Tensor:
    """The inverse of :func:`fftshift` (a roll by ``-(n // 2)``; they differ for odd n).

    Delegates to ``torch.fft.ifftshift``.

    Parameters
    ----------
    input : torch.Tensor
        A centred spectrum.
    dim : int or sequence of int, optional
        The dimensions to shift (default: all).

    Returns
    -------
    torch.Tensor
        The tensor in FFT order.

    Raises
    ------
    IndexError
        ``dim`` is out of range.

    See Also
    --------
    torch.fft.ifftshift, fftshift

    Examples
    --------
    >>> from trnplan import fft as tfft
    >>> tfft.ifftshift(tfft.fftshift(tfft.fftfreq(5)))
    tensor([ 0.0000,  0.2000,  0.4000, -0.4000, -0.2000])
    """
    return torch.fft.ifftshift(input, dim)


# ---------------------------------------------------------------------------- documentation
_EX_FFT = """>>> x = torch.randn(8, 100)
>>> y = tfft.{name}(x)                         # complex64, like torch.fft.{name}
>>> bool(torch.allclose(y, torch.fft.{name}(x), atol=1e-4))
True"""

fft.__doc__ = _doc(
    "fft", "Compute the one-dimensional discrete Fourier transform of ``input``.",
    "``X[k] = Σ_j x[j]·exp(−2πi·jk/n)`` along ``dim``.",
    nd=False, input=_IN_C, length=_N_C, returns="Complex, ``input``'s shape with ``dim`` of size n.",
    plan="c2c forward", examples=_EX_FFT.format(name="fft"), see_also=", ifft, rfft")
ifft.__doc__ = _doc(
    "ifft", "Compute the one-dimensional inverse discrete Fourier transform of ``input``.",
    "``x[j] = (1/n)·Σ_k X[k]·exp(+2πi·jk/n)`` along ``dim`` (with the default norm).",
    nd=False, input=_IN_C, length=_N_C, returns="Complex, ``input``'s shape with ``dim`` of size n.",
    plan="c2c inverse", examples=_EX_FFT.format(name="ifft"), see_also=", fft, irfft")
rfft.__doc__ = _doc(
    "rfft", "Compute the one-dimensional Fourier transform of real ``input``, one-sided.",
    "Returns the ``n // 2 + 1`` non-negative frequencies; the rest follow by Hermitian symmetry.",
    nd=False, input=_IN_R, length=_N_C.replace("along ``dim``", "along ``dim`` before the transform"),
    returns="Complex, ``input``'s shape with ``dim`` of size ``n // 2 + 1``.", plan="r2c",
    examples=_EX_FFT.format(name="rfft"), see_also=", irfft, fft",
    extra_raise=", or complex input")
irfft.__doc__ = _doc(
    "irfft", "Compute the inverse of :func:`rfft`: a one-sided spectrum to a real signal.",
    "The imaginary parts of the zero-frequency term (and of the Nyquist term for even n) are "
    "ignored, as in torch.fft.irfft.",
    nd=False, input=_IN_H.replace("Hermitian half-spectrum", "half-spectrum (as rfft returns)"),
    length="Length of the real *output* (default ``2 * (m - 1)`` for input size m along ``dim``); the "
           "input is zero-padded or cropped to ``n // 2 + 1``. Pass it for odd lengths.",
    returns="Real, ``input``'s shape with ``dim`` of size n.", plan="c2r",
    examples=""">>> x = torch.randn(8, 101)
>>> bool(torch.allclose(tfft.irfft(tfft.rfft(x), n=101), x, atol=1e-5))
True""", see_also=", rfft, ifft")
hfft.__doc__ = _doc(
    "hfft", "Compute the Fourier transform of a Hermitian-symmetric signal given by its one-sided half.",
    "The output is real: ``hfft(x, n) = irfft(conj(x), n)`` with the norm mirrored (forward "
    "direction, so ``norm='backward'`` leaves it unscaled).",
    nd=False, input=_IN_H, length="Length of the real output (default ``2 * (m - 1)``); the input is "
    "zero-padded or cropped to ``n // 2 + 1``.",
    returns="Real, ``input``'s shape with ``dim`` of size n.", plan="c2r on the conjugate",
    examples=""">>> x = torch.randn(8, 6, dtype=torch.complex64)
>>> bool(torch.allclose(tfft.hfft(x, n=10), torch.fft.hfft(x, n=10), atol=1e-4))
True""", see_also=", ihfft, irfft")
ihfft.__doc__ = _doc(
    "ihfft", "Compute the inverse of :func:`hfft`: a real signal to the one-sided half of its inverse DFT.",
    "``ihfft(x) = conj(rfft(x))`` with the norm mirrored; returned as a lazy conjugate view, as torch does.",
    nd=False, input=_IN_R, length=_N_C, returns="Complex, ``input``'s shape with ``dim`` of size ``n // 2 + 1``.",
    plan="r2c, conjugated", examples=""">>> x = torch.randn(8, 10)
>>> bool(torch.allclose(tfft.ihfft(x), torch.fft.ihfft(x), atol=1e-5))
True""", see_also=", hfft, rfft", extra_raise=", or complex input")

_EX_2D = """>>> x = torch.randn(4, 32, 48)
>>> y = tfft.{name}(x)
>>> bool(torch.allclose(y, torch.fft.{name}(x), atol=1e-3))
True"""
_EX_ND_INV = """>>> X = torch.randn(4, 32, 48, dtype=torch.complex64)
>>> bool(torch.allclose(tfft.{name}(X), torch.fft.{name}(X), atol=1e-5))
True"""
_D2 = "``(-2, -1)``"
_HALF_LAST = ("The last of ``dim`` is the real (halved) dimension: its output holds ``s[-1] // 2 + 1`` "
              "values.")
_C2R_S = ("Logical (real output) length per dimension; the last defaults to ``2 * (m - 1)`` for input "
          "size m along the last of ``dim`` and is needed for odd lengths; the input is zero-padded or "
          "cropped to ``s[:-1] + [s[-1] // 2 + 1]``. -1 keeps the default.")

for _f, _summary, _body, _kw in (
    (fft2, "Compute the two-dimensional discrete Fourier transform of ``input``.",
     "The 1-D transform applied along both of ``dim``.",
     {"input": _IN_C, "length": _S_C, "returns": "Complex, ``input``'s shape with ``dim`` resized to ``s``.",
          "plan": "c2c forward, rank 2", "dim": _D2, "examples": _EX_2D.format(name="fft2"), "see_also": ", fftn, ifft2"}),
    (ifft2, "Compute the two-dimensional inverse discrete Fourier transform of ``input``.",
     "The 1-D inverse transform applied along both of ``dim``.",
     {"input": _IN_C, "length": _S_C, "returns": "Complex, ``input``'s shape with ``dim`` resized to ``s``.",
          "plan": "c2c inverse, rank 2", "dim": _D2, "examples": _EX_ND_INV.format(name="ifft2"), "see_also": ", ifftn, fft2"}),
    (fftn, "Compute the N-dimensional discrete Fourier transform of ``input``.",
     "The 1-D transform applied along every dimension of ``dim``.",
     {"input": _IN_C, "length": _S_C, "returns": "Complex, ``input``'s shape with ``dim`` resized to ``s``.",
          "plan": "c2c forward, rank len(dim)", "examples": _EX_2D.format(name="fftn"), "see_also": ", fft2, ifftn"}),
    (ifftn, "Compute the N-dimensional inverse discrete Fourier transform of ``input``.",
     "The 1-D inverse transform applied along every dimension of ``dim``.",
     {"input": _IN_C, "length": _S_C, "returns": "Complex, ``input``'s shape with ``dim`` resized to ``s``.",
          "plan": "c2c inverse, rank len(dim)", "examples": _EX_ND_INV.format(name="ifftn"), "see_also": ", fftn, ifft2"}),
    (rfft2, "Compute the two-dimensional Fourier transform of real ``input``, one-sided in the last dim.",
     _HALF_LAST,
     {"input": _IN_R, "length": _S_C, "returns": "Complex; ``dim`` resized to ``s`` with the last halved.",
          "plan": "r2c, rank 2", "dim": _D2, "examples": _EX_2D.format(name="rfft2"), "see_also": ", rfftn, irfft2",
          "extra_raise": ", or complex input"}),
    (irfft2, "Compute the inverse of :func:`rfft2`.",
     "The imaginary parts the real output cannot carry are ignored, as in torch.fft.irfft2.",
     {"input": _IN_H, "length": _C2R_S, "returns": "Real; ``dim`` resized to ``s``.", "plan": "c2r, rank 2", "dim": _D2,
          "examples": _EX_ND_INV.format(name="irfft2"), "see_also": ", rfft2, irfftn"}),
    (rfftn, "Compute the N-dimensional Fourier transform of real ``input``, one-sided in the last dim.",
     _HALF_LAST,
     {"input": _IN_R, "length": _S_C, "returns": "Complex; ``dim`` resized to ``s`` with the last halved.",
          "plan": "r2c, rank len(dim)", "examples": _EX_2D.format(name="rfftn"), "see_also": ", rfft2, irfftn",
          "extra_raise": ", complex input, or no dimension to transform"}),
    (irfftn, "Compute the inverse of :func:`rfftn`.",
     "The imaginary parts the real output cannot carry are ignored, as in torch.fft.irfftn.",
     {"input": _IN_H, "length": _C2R_S, "returns": "Real; ``dim`` resized to ``s``.", "plan": "c2r, rank len(dim)",
          "examples": _EX_ND_INV.format(name="irfftn"), "see_also": ", rfftn, irfft2",
          "extra_raise": ", or no dimension to transform"}),
    (hfft2, "Compute the two-dimensional Fourier transform of a Hermitian-symmetric signal's half.",
     "``hfft2(x, s) = irfft2(conj(x), s)`` with the norm mirrored; real output.",
     {"input": _IN_H, "length": _C2R_S, "returns": "Real; ``dim`` resized to ``s``.", "plan": "c2r on the conjugate, rank 2",
          "dim": _D2, "examples": _EX_ND_INV.format(name="hfft2"), "see_also": ", ihfft2, hfftn"}),
    (ihfft2, "Compute the inverse of :func:`hfft2` on real input.",
     "``ihfft2(x) = conj(rfft2(x))`` with the norm mirrored.",
     {"input": _IN_R, "length": _S_C, "returns": "Complex; ``dim`` resized to ``s`` with the last halved.",
          "plan": "r2c, conjugated, rank 2", "dim": _D2, "examples": _EX_2D.format(name="ihfft2"),
          "see_also": ", hfft2, ihfftn", "extra_raise": ", or complex input"}),
    (hfftn, "Compute the N-dimensional Fourier transform of a Hermitian-symmetric signal's half.",
     "``hfftn(x, s) = irfftn(conj(x), s)`` with the norm mirrored; real output.",
     {"input": _IN_H, "length": _C2R_S, "returns": "Real; ``dim`` resized to ``s``.",
          "plan": "c2r on the conjugate, rank len(dim)", "examples": _EX_ND_INV.format(name="hfftn"),
          "see_also": ", ihfftn, hfft2", "extra_raise": ", or no dimension to transform"}),
    (ihfftn, "Compute the inverse of :func:`hfftn` on real input.",
     "``ihfftn(x) = conj(rfftn(x))`` with the norm mirrored.",
     {"input": _IN_R, "length": _S_C, "returns": "Complex; ``dim`` resized to ``s`` with the last halved.",
          "plan": "r2c, conjugated, rank len(dim)", "examples": _EX_2D.format(name="ihfftn"),
          "see_also": ", hfftn, ihfft2", "extra_raise": ", complex input, or no dimension to transform"}),
):
    _f.__doc__ = _doc(_f.__name__, _summary, _body, nd=True, **_kw)
del _f, _summary, _body, _kw

_register_ops()
