"""torch.fft's argument handling, as ATen's ``SpectralOps.cpp`` does it, with messages that say the fix.

``canonicalize_fft_shape_and_dim_args`` (:func:`_dims_nd`), ``resize_fft_input`` (:func:`_resize`),
``promote_tensor_fft`` (:func:`_promote`), the ``norm`` check and torch's ``out=`` (:func:`_finish`):
the same cases raise the same exception classes as torch.fft. Pure argument handling: no plan is
made here (that is :mod:`trnplan.fft._engine`).
"""

from __future__ import annotations

import operator
import warnings

import torch

from trnplan.core.errors import UnsupportedDtypeError
from trnplan.core.problem import COMPLEX_OF, REAL_OF

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


def _dims(name: str, x: torch.Tensor, s, dim, nd: bool, *, nonempty: bool = False):
    """The dims to transform and their lengths, for an N-D (``nd``) or a 1-D call; a 1-D call's
    length is checked here. ``nonempty``: an N-D real transform must transform at least one axis."""
    if nd:
        dims, shape = _dims_nd(name, x, s, dim)
        if nonempty and not dims:
            raise RuntimeError(f"{name} must transform at least one axis; pass dim=(-1,) or a non-empty s")
        return dims, shape
    d, n = _dims_1d(name, x, s, dim)
    _check_points([n])
    return [d], [n]


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


