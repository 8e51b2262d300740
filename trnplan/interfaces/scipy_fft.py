"""A scipy.fft backend: scipy.fft's transforms run as trnplan plans (the uarray protocol).

Use it for a block of code, or for the whole process::

    import scipy.fft
    from trnplan.interfaces import scipy_fft as trnplan_backend

    with scipy.fft.set_backend(trnplan_backend):
        y = scipy.fft.rfft2(image)            # a trnplan plan
        c = scipy.fft.dct(image)              # a trnplan r2r plan (DCT-II)
        h = scipy.fft.fht(a, dln, mu)         # not implemented here: scipy's own (over trnplan's rfft)

    scipy.fft.set_global_backend(trnplan_backend)

scipy.fft calls :func:`__ua_function__` with the public function and its arguments. This
module implements fft, ifft, rfft, irfft, hfft, ihfft and their 2-D and N-D forms (fft2, ifft2,
rfft2, irfft2, hfft2, ihfft2, fftn, ifftn, rfftn, irfftn, hfftn, ihfftn), and the real-to-real
transforms dct, idct, dst, idst, dctn, idctn, dstn, idstn (types 1–4, as trnplan r2r plans; an
``orthogonalize`` other than the norm's default is applied as scipy's √2 weights around the plan)
with scipy.fft's signatures, argument rules, errors and dtypes:

- float16 is computed (and returned) in single precision, integers and bools in double;
  float32/complex64 stay single, float64/complex128 double;
- ``s``/``axes``: a scalar is one axis; ``-1`` in ``s`` keeps the input's length; axes must be
  unique; ``fftn`` over no axes returns its input unchanged; ``irfftn`` of a size-1 last axis
  (default ``s``) returns length 1, as scipy's pocketfft does;
- results do not depend on the input's memory layout (C, Fortran, strided): non-C-contiguous
  input is copied to C order first (see :mod:`trnplan.interfaces._bridge`);
- ``workers`` is validated as scipy does and otherwise ignored: trnplan plans run on torch's
  intra-op thread pool (``torch.set_num_threads`` is process-wide); ``overwrite_x`` is a hint
  and is ignored (the input is never written).

It returns ``NotImplemented`` — so that scipy tries the next backend, its own pocketfft unless
``only=True`` — for every other function (fht, ifht, …), for long double / complex long
double data (trnplan plans compute in float32 or float64), for a ``plan=`` argument, and for
arrays of other array libraries (a torch tensor, a CuPy array): this backend takes numpy
arrays and array-likes and returns numpy arrays.
"""

from __future__ import annotations

import operator
import os
from numbers import Number

import numpy as np
import torch

from trnplan import fft as _tfft
from trnplan.core import state
from trnplan.core.problem import COMPLEX_OF, REAL_OF
from trnplan.fft._realtransforms import _r2r_key as _tfft_key
from trnplan.interfaces._bridge import to_numpy, to_torch
from trnplan.plan.memo import PLANS
from trnplan.planner.r2r import norm_factors

__all__ = ["__ua_domain__", "__ua_function__"]

def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


#: the uarray domain of scipy.fft's multimethods
__ua_domain__ = "numpy.scipy.fft"

_NORMS = (None, "backward", "ortho", "forward")
_SUPPORTED = {np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)}
#: numpy's side of trnplan.core.problem.COMPLEX_OF (a complex dtype maps to itself)
_COMPLEX_OF = {_numpy_dtype(d): _numpy_dtype(COMPLEX_OF.get(d, d)) for d in (*COMPLEX_OF, *REAL_OF)}


# ------------------------------------------------------------------------------ argument rules
def _foreign(x) -> bool:
    """An array of another array library (a torch tensor, a CuPy or JAX array): not numpy's own,
    but it speaks the array API or DLPack. scipy.fft handles those itself (SCIPY_ARRAY_API)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return False
    return hasattr(x, "__array_namespace__") or hasattr(x, "__dlpack__")


def _asfarray(x) -> np.ndarray:
    """scipy's ``_asfarray``: float16 → float32, non-float, non-complex → float64."""
    a = np.asarray(x)
    if a.dtype == np.float16:
        return a.astype(np.float32)
    if a.dtype.kind not in "fc":
        return a.astype(np.float64)
    return a.astype(a.dtype.newbyteorder("="), copy=False)  # native byte order, as scipy's own


def _prepare(x, workers, plan):
    """The input as a numpy array trnplan can transform, or None: hand the call back to scipy."""
    if plan is not None or _foreign(x):
        return None
    _check_workers(workers)
    a = _asfarray(x)
    return a if a.dtype in _SUPPORTED else None


def _check_workers(workers) -> None:
    """scipy's ``_workers`` checks (the count itself does not change torch's thread pool)."""
    if workers is None:
        return
    workers = operator.index(workers)
    if workers == 0:
        raise ValueError("workers must not be zero")
    if workers < -(os.cpu_count() or 1):
        raise ValueError(f"workers value out of range; got {workers}, must not be less than {-(os.cpu_count() or 1)}")


def _norm(norm) -> str:
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm!r}, should be "backward", "ortho" or "forward"')
    return "backward" if norm is None else norm


def _axis(axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise IndexError(f"axis {axis} is out of range for an array of dimension {ndim}")
    return axis % ndim


def _points(n) -> None:
    if n < 1:
        raise ValueError(f"invalid number of data points ({n}) specified")


def _iterable_of_int(x, name):
    if isinstance(x, Number):
        x = (x,)
    try:
        return [operator.index(v) for v in x]
    except TypeError as e:
        raise ValueError(f"{name} must be a scalar or iterable of integers") from e


def _shape_and_axes(a: np.ndarray, s, axes):
    """scipy's ``_init_nd_shape_and_axes``: lengths and non-negative, unique axes."""
    if axes is not None:
        axes = [v + a.ndim if v < 0 else v for v in _iterable_of_int(axes, "axes")]
        if any(v >= a.ndim or v < 0 for v in axes):
            raise ValueError("axes exceeds dimensionality of input")
        if len(set(axes)) != len(axes):
            raise ValueError("all axes must be unique")
    if s is not None:
        s = _iterable_of_int(s, "shape")
        if axes and len(axes) != len(s):
            raise ValueError("when given, axes and shape arguments have to be of the same length")
        if axes is None:
            if len(s) > a.ndim:
                raise ValueError("shape requires more axes than are present")
            axes = list(range(a.ndim - len(s), a.ndim))
        s = [a.shape[ax] if v == -1 else v for v, ax in zip(s, axes)]
    elif axes is None:
        s, axes = list(a.shape), list(range(a.ndim))
    else:
        s = [a.shape[ax] for ax in axes]
    if any(v < 1 for v in s):
        raise ValueError(f"invalid number of data points ({s}) specified")
    return list(s), list(axes)


# ------------------------------------------------------------------------------ transforms
def _c2c(name, x, n=None, axis=-1, norm=None, overwrite_x=False, workers=None, *, plan=None):
    a = _prepare(x, workers, plan)
    if a is None:
        return NotImplemented
    norm = _norm(norm)
    axis = _axis(axis, a.ndim)
    n = a.shape[axis] if n is None else operator.index(n)
    _points(n)
    f = _tfft.ifft if name == "ifft" else _tfft.fft
    return to_numpy(f(to_torch(a, _COMPLEX_OF[a.dtype]), n=n, dim=axis, norm=norm))


def _r2c(name, x, n=None, axis=-1, norm=None, overwrite_x=False, workers=None, *, plan=None):
    a = _prepare(x, workers, plan)
    if a is None:
        return NotImplemented
    norm = _norm(norm)
    if np.iscomplexobj(a):
        raise TypeError("x must be a real sequence")
    axis = _axis(axis, a.ndim)
    n = a.shape[axis] if n is None else operator.index(n)
    _points(n)
    f = _tfft.ihfft if name == "ihfft" else _tfft.rfft
    return to_numpy(f(to_torch(a, a.dtype), n=n, dim=axis, norm=norm))


def _c2r(name, x, n=None, axis=-1, norm=None, overwrite_x=False, workers=None, *, plan=None):
    a = _prepare(x, workers, plan)
    if a is None:
        return NotImplemented
    norm = _norm(norm)
    axis = _axis(axis, a.ndim)
    if n is None:
        n = (a.shape[axis] - 1) * 2
        if n < 1:
            raise ValueError(f"Invalid number of data points ({n}) specified")
    else:
        n = operator.index(n)
        _points(n)
    f = _tfft.hfft if name == "hfft" else _tfft.irfft
    return to_numpy(f(to_torch(a, _COMPLEX_OF[a.dtype]), n=n, dim=axis, norm=norm))


def _c2cn(name, x, s=None, axes=None, norm=None, overwrite_x=False, workers=None, *, plan=None):
    a = _prepare(x, workers, plan)
    if a is None:
        return NotImplemented
    s, axes = _shape_and_axes(a, s, axes)
    if not axes:
        return x  # scipy.fft.fftn over no axes returns its input, as given
    norm = _norm(norm)
    f = _tfft.ifftn if name.startswith("ifft") else _tfft.fftn
    return to_numpy(f(to_torch(a, _COMPLEX_OF[a.dtype]), s=s, dim=axes, norm=norm))


def _r2cn(name, x, s=None, axes=None, norm=None, overwrite_x=False, workers=None, *, plan=None):
    a = _prepare(x, workers, plan)
    if a is None:
        return NotImplemented
    if np.iscomplexobj(a):
        raise TypeError("x must be a real sequence")
    s, axes = _shape_and_axes(a, s, axes)
    norm = _norm(norm)
    if not axes:
        raise ValueError("at least 1 axis must be transformed")
    f = _tfft.ihfftn if name.startswith("ihfft") else _tfft.rfftn
    return to_numpy(f(to_torch(a, a.dtype), s=s, dim=axes, norm=norm))


def _c2rn(name, x, s=None, axes=None, norm=None, overwrite_x=False, workers=None, *, plan=None):
    a = _prepare(x, workers, plan)
    if a is None:
        return NotImplemented
    noshape = s is None
    s, axes = _shape_and_axes(a, s, axes)
    if not axes:
        raise ValueError("at least 1 axis must be transformed")
    if noshape:
        # scipy passes (m - 1) * 2 to pocketfft, which reads a last length of 0 (only when m = 1)
        # as 2 * m - 1: irfftn of a size-1 last axis returns length 1 (1-D irfft raises instead)
        s[-1] = (a.shape[axes[-1]] - 1) * 2 or 2 * a.shape[axes[-1]] - 1
    norm = _norm(norm)
    f = _tfft.hfftn if name.startswith("hfft") else _tfft.irfftn
    return to_numpy(f(to_torch(a, _COMPLEX_OF[a.dtype]), s=s, dim=axes, norm=norm))


def _fix_shape(a: np.ndarray, shape, axes) -> np.ndarray:
    """scipy's ``_fix_shape``: crop or zero-pad each of ``axes`` to its length."""
    index, out_shape = [slice(None)] * a.ndim, list(a.shape)
    for n, ax in zip(shape, axes):
        index[ax], out_shape[ax] = slice(0, min(n, a.shape[ax])), n
    if all(n <= a.shape[ax] for n, ax in zip(shape, axes)):
        return a[tuple(index)]
    z = np.zeros(out_shape, a.dtype)
    z[tuple(index)] = a[tuple(index)]
    return z


def _orthogonalize(kind: str, inverse: bool, shape, axes, ndim: int, on: bool):
    """(input weights, output weights) that turn scipy's default orthogonalization into ``on``.

    trnplan's plans orthogonalize exactly when norm="ortho" (scipy's default): the √2 weights of
    the first/last samples (per type, :func:`trnplan.planner.r2r.norm_factors`) are applied here,
    per axis, when the caller asks for the other choice.
    """
    w_in, w_out = np.ones([1] * ndim), np.ones([1] * ndim)
    for n, ax in zip(shape, axes):
        _, _, pre, post = norm_factors(kind, n, inverse, "ortho")
        view = [1] * ndim
        view[ax] = n
        w_in, w_out = w_in * pre.reshape(view), w_out * post.reshape(view)
    return (w_in, w_out) if on else (1.0 / w_in, 1.0 / w_out)


def _r2r_type(name: str, type) -> int:
    t = operator.index(type)
    if t not in (1, 2, 3, 4):
        raise ValueError(f"invalid {name.removeprefix('i')[:3].upper()} type")
    return t


def _r2rn(name, x, type=2, s=None, axes=None, norm=None, overwrite_x=False, workers=None, orthogonalize=None,
          remember=None):
    """dct/idct/dst/idst and their N-D forms (``s``/``axes`` already lists for the 1-D forms).

    ``remember``: the call's :func:`_r2r_key`, kept with the trnplan.fft call it came to if the
    array went to it as given (a zero-copy tensor, no resizing, no orthogonalize weights)."""
    a = _prepare(x, workers, None)
    if a is None:
        return NotImplemented
    given = a is x
    t = _r2r_type(name, type)
    shape, axes = _shape_and_axes(a, s, axes)
    if not axes:
        return x  # scipy.fft.dctn over no axes returns its input, as given
    norm = _norm(norm)
    kind, inverse = f"{name.removeprefix('i')[:3]}{t}", name.startswith("i")
    if kind == "dct1" and min(shape) < 2:
        raise RuntimeError("zero-length FFT requested")  # pocketfft's words: DCT-I of length 1 has L = 0
    a = _fix_shape(a, shape, axes)
    w_out = None
    if orthogonalize is not None and bool(orthogonalize) != (norm == "ortho"):
        w_in, w_out = _orthogonalize(kind, inverse, shape, axes, a.ndim, bool(orthogonalize))
        a = (a * w_in).astype(a.dtype, copy=False)
    fname = f"{name.removesuffix('n')}n"
    xt = to_torch(a, a.dtype)
    y = to_numpy(getattr(_tfft, fname)(xt, type=t, dim=tuple(axes), norm=norm))
    if (remember is not None and given and w_out is None and a.flags.c_contiguous and a.flags.writeable
            and a.dtype.isnative and all(n == x.shape[ax] for n, ax in zip(shape, axes))):
        if len(_SEEN) >= MAX_SEEN:
            _SEEN.clear()
        kwargs = {"type": t, "dim": tuple(axes), "norm": norm}
        _SEEN[remember] = (getattr(_tfft, fname), kwargs, _tfft_key(fname, xt, t, None, kwargs["dim"], norm))
    return y if w_out is None else (y * w_out).astype(y.dtype, copy=False)


#: the r2r calls seen before, by their arguments (:func:`_r2r_key`) -> the trnplan.fft function,
#: its arguments and its shortcut's key (trnplan.fft._realtransforms._r2r_key), that the full path
#: ran on the array as given: a repeated call runs the plan's ready call on the array at once
#: (:func:`_seen`). The full path (scipy's rules, checked in full on the first call, and the
#: tensor views) took ~26 µs of a 2×1024 float32 DCT-II that pocketfft computes in ~8 µs; a seen
#: call ~9 µs, against scipy.fft's own ~11 µs (measured here, busy machine)
_SEEN: dict = {}
#: calls kept at most (all are dropped when full: each is a few arguments, no plan)
MAX_SEEN = 512
state.register("interfaces.scipy_fft.seen", _SEEN.clear)


def _plain(v) -> bool:
    """An argument that may stand for itself in a key: None, a bool, an int, a str, or a tuple or
    list of ints, exactly (``1.0`` and ``np.float64(1)`` equal ``1`` as keys and the full path
    refuses them; ``True`` is accepted there as 1, so it may be a key)."""
    c = v.__class__
    return v is None or c is int or c is bool or c is str or (
        (c is tuple or c is list) and all(e.__class__ is int for e in v))


def _r2r_key(name, x, args):
    """The key of a call of ``name`` on ``x`` with the remaining arguments ``args`` (a tuple:
    type, n/s, axis/axes, norm, workers, orthogonalize; overwrite_x is a hint and left out), or
    None where it takes no shortcut: ``x`` a numpy array exactly, every argument plain."""
    if x.__class__ is not np.ndarray or not all(map(_plain, args)):
        return None
    return (name, x.shape, x.dtype, *(tuple(v) if v.__class__ is list else v for v in args))


def _seen(key, x):
    """A repeated call's result (see :data:`_SEEN`), or None: not seen, or ``x`` not C-contiguous and
    writable (as the first call's array was: trnplan then transforms the array's own memory).

    Where trnplan.fft's shortcut holds the plan's ready call for that call (``PLANS.calls``: only
    while the plan is cached) and the call is a host library's that takes arrays (``on_numpy``:
    pocketfft's DCT/DST), it runs on ``x`` itself: the plan's own transform, no tensor made."""
    hit = _SEEN.get(key)
    if hit is None or not (x.flags.c_contiguous and x.flags.writeable):
        return None
    fn, kwargs, tkey = hit
    call = PLANS.calls.get(tkey) if tkey is not None else None
    run = getattr(call, "on_numpy", None)
    if run is not None:
        return run(x)
    y = fn(torch.from_numpy(x), **kwargs) if call is None else call(torch.from_numpy(x))
    try:
        return y.numpy()
    except RuntimeError:  # a lazy conjugate or negative view: resolved as the full path does
        return to_numpy(y)


def _r2r_1d(name, x, type=2, n=None, axis=-1, norm=None, overwrite_x=False, workers=None, orthogonalize=None,
            remember=None):
    a = _prepare(x, workers, None)
    if a is None:
        return NotImplemented
    axis = _axis(axis, a.ndim)
    n = a.shape[axis] if n is None else operator.index(n)
    _points(n)
    return _r2rn(name, a, type, [n], [axis], norm, overwrite_x, workers, orthogonalize,
                 remember if a is x else None)


def _bind_r2r(name):
    if name.endswith("n"):
        def transform(x, type=2, s=None, axes=None, norm=None, overwrite_x=False, workers=None, *,
                      orthogonalize=None):
            key = _r2r_key(name, x, (type, s, axes, norm, workers, orthogonalize))
            y = None if key is None else _seen(key, x)
            if y is None:
                y = _r2rn(name, x, type, s, axes, norm, overwrite_x, workers, orthogonalize, key)
            return y
    else:
        def transform(x, type=2, n=None, axis=-1, norm=None, overwrite_x=False, workers=None,
                      orthogonalize=None):
            key = _r2r_key(name, x, (type, n, axis, norm, workers, orthogonalize))
            y = None if key is None else _seen(key, x)
            if y is None:
                y = _r2r_1d(name, x, type, n, axis, norm, overwrite_x, workers, orthogonalize, key)
            return y
    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = (f"scipy.fft.{name} over a trnplan r2r plan (numpy arrays in and out); returns NotImplemented "
                         f"for what this backend does not take (see the module docstring).")
    return transform


def _bind(impl, name, nd=False):
    default_axes = None if name.endswith("n") else (-2, -1)
    if not nd:
        def transform(x, n=None, axis=-1, norm=None, overwrite_x=False, workers=None, *, plan=None):
            return impl(name, x, n, axis, norm, overwrite_x, workers, plan=plan)
    else:
        def transform(x, s=None, axes=default_axes, norm=None, overwrite_x=False, workers=None, *, plan=None):
            return impl(name, x, s, axes, norm, overwrite_x, workers, plan=plan)
    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = (f"scipy.fft.{name} over a trnplan plan (numpy arrays in and out); returns NotImplemented "
                         f"for what this backend does not take (see the module docstring).")
    return transform


#: scipy.fft function name -> implementation with scipy.fft's signature
IMPLEMENTED = {
    **{name: _bind(_c2c, name) for name in ("fft", "ifft")},
    **{name: _bind(_r2c, name) for name in ("rfft", "ihfft")},
    **{name: _bind(_c2r, name) for name in ("irfft", "hfft")},
    **{name: _bind(_c2cn, name, nd=True) for name in ("fftn", "ifftn", "fft2", "ifft2")},
    **{name: _bind(_r2cn, name, nd=True) for name in ("rfftn", "ihfftn", "rfft2", "ihfft2")},
    **{name: _bind(_c2rn, name, nd=True) for name in ("irfftn", "hfftn", "irfft2", "hfft2")},
    **{name: _bind_r2r(name) for name in ("dct", "idct", "dst", "idst", "dctn", "idctn", "dstn", "idstn")},
}


def __ua_function__(method, args, kwargs):
    """The uarray entry point: run ``method`` (a scipy.fft function) here, or return NotImplemented.

    Parameters
    ----------
    method : callable
        The scipy.fft multimethod being called (its ``__name__`` selects the implementation).
    args, kwargs : tuple, dict
        The arguments as the caller passed them.

    Returns
    -------
    numpy.ndarray or NotImplemented
        The transform, or NotImplemented for a function, dtype, ``plan`` or array type this
        backend does not take (scipy then tries its next backend).
    """
    impl = IMPLEMENTED.get(getattr(method, "__name__", None))
    if impl is None:
        return NotImplemented
    return impl(*args, **kwargs)
