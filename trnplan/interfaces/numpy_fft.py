"""numpy.fft's functions over trnplan plans: the same names, signatures, dtype rules and errors.

Like pyFFTW's ``pyfftw.interfaces.numpy_fft``, this module is a drop-in for :mod:`numpy.fft`::

    from trnplan.interfaces import numpy_fft as fft   # instead of: from numpy import fft
    Y = fft.rfft2(image)

The transforms take array-likes and return numpy arrays, with numpy 2's semantics:

- dtypes: float32 (and float16) data computes in single precision and returns complex64
  (float32 for the real-output ``irfft``/``hfft`` family; float16 input gives float16 real
  output, as numpy does); float64, integer and bool data returns complex128/float64.
- ``n``/``s`` crop or zero-pad, ``-1`` in ``s`` means the input's length; ``s`` without ``axes``
  and ``None`` in ``s`` are accepted with numpy's DeprecationWarning; repeated ``axes`` transform
  that axis repeatedly, as numpy's axis-by-axis loop does.
- ``norm`` ∈ {None, "backward", "ortho", "forward"}; ``out=`` receives the result (numpy's
  same-kind casting, shape checked).

Where it differs from numpy.fft, on purpose:

- dtypes trnplan has no plans for (longdouble/clongdouble, object) are handed to numpy.fft
  itself, so they keep numpy's extended precision (or numpy's error) rather than silently
  losing bits in float64;
- ``out=`` is honoured by every transform (numpy 2.4 accepts but ignores it in ``ifft2``,
  ``irfft2`` and ``hfft``).

``fftfreq``, ``rfftfreq``, ``fftshift`` and ``ifftshift`` compute no transform and are
numpy's own functions, re-exported.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np
from numpy.exceptions import AxisError
from numpy.fft import fftfreq, fftshift, ifftshift, rfftfreq
from numpy.lib.array_utils import normalize_axis_index

from trnplan import fft as _tfft
from trnplan.interfaces._bridge import complex_compute, real_compute, to_numpy, to_torch

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]

_NORMS = (None, "backward", "ortho", "forward")


def _norm(norm) -> str:
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    return "backward" if norm is None else norm


def _points(n: int) -> None:
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")


def _finish(result: np.ndarray, out):
    """numpy's ``out=``: same shape, same-kind casting."""
    if out is None:
        return result
    if not isinstance(out, np.ndarray):  # numpy's own words (its ufunc machinery raises TypeError)
        raise TypeError(f"return arrays must be of ArrayType: out= takes a numpy array of shape {result.shape}, "
                        f"got {type(out).__name__}")
    if out.shape != result.shape:
        raise ValueError("output array has wrong shape.")
    np.copyto(out, result, casting="same_kind")
    return out


# ------------------------------------------------------------------------------ dtype rules
def _complex_in(a: np.ndarray):
    """(compute dtype, output dtype) of a complex-output transform of complex or real ``a``."""
    out_dtype = np.result_type(a.dtype, 1j)
    return complex_compute(out_dtype), out_dtype


def _real_out(a: np.ndarray, steps: int = 1):
    """(complex compute dtype, real output dtype) for irfft/hfft (numpy: result_type(a.real, 1.0)).

    irfftn over ``steps`` > 1 axes runs numpy's complex ifft first, so a float16 input reaches
    the final irfft as complex64 and comes back float32 (while a 1-axis irfft gives float16).
    """
    real = np.result_type(a.dtype, 1j).type(0).real.dtype if steps > 1 else a.real.dtype
    out_dtype = np.result_type(real, 1.0)
    return complex_compute(np.result_type(out_dtype, 1j)), out_dtype


def _real_in(name: str, a: np.ndarray):
    """(real compute dtype, complex output dtype) for rfft/ihfft; complex input is an error."""
    if np.iscomplexobj(a):
        other = {"rfft": "fft", "ihfft": "ifft"}.get(name.rstrip("n2"), "fft")
        raise TypeError(f"{name} takes real input, got {a.dtype}; use {other}{name[len(name.rstrip('n2')):]} for "
                        f"complex data, or pass a.real")
    out_dtype = np.result_type(a.dtype, 1j)
    return real_compute(np.result_type(a.dtype, 1.0)), out_dtype


# ------------------------------------------------------------------------------ 1-D
def _one_d(a, n, axis, norm):
    """Shared front half of the 1-D transforms: array, axis, norm, n (None = numpy's default)."""
    a = np.asarray(a)
    norm = _norm(norm)
    axis = normalize_axis_index(operator.index(axis), a.ndim)
    if n is not None:
        n = operator.index(n)
    return a, axis, norm, n


def _run_c2c(name, a, n, axis, norm, out, inverse):
    a, axis, norm_, n = _one_d(a, n, axis, norm)
    compute, out_dtype = _complex_in(a)
    if compute is None:  # longdouble / object: numpy's own precision (or numpy's error)
        return getattr(np.fft, name)(a, n, axis, norm, out)
    n = a.shape[axis] if n is None else n
    _points(n)
    f = _tfft.ifft if inverse else _tfft.fft
    return _finish(to_numpy(f(to_torch(a, compute), n=n, dim=axis, norm=norm_), out_dtype), out)


def _run_r2c(name, a, n, axis, norm, out):
    a, axis, norm_, n = _one_d(a, n, axis, norm)
    compute, out_dtype = _real_in(name, a)
    if compute is None:
        return getattr(np.fft, name)(a, n, axis, norm, out)
    n = a.shape[axis] if n is None else n
    _points(n)
    f = _tfft.ihfft if name == "ihfft" else _tfft.rfft
    return _finish(to_numpy(f(to_torch(a, compute), n=n, dim=axis, norm=norm_), out_dtype), out)


def _run_c2r(name, a, n, axis, norm, out):
    a, axis, norm_, n = _one_d(a, n, axis, norm)
    compute, out_dtype = _real_out(a)
    if compute is None:
        return getattr(np.fft, name)(a, n, axis, norm, out)
    n = (a.shape[axis] - 1) * 2 if n is None else n
    _points(n)
    f = _tfft.hfft if name == "hfft" else _tfft.irfft
    return _finish(to_numpy(f(to_torch(a, compute), n=n, dim=axis, norm=norm_), out_dtype), out)


def fft(a, n=None, axis=-1, norm=None, out=None):
    """Compute the one-dimensional discrete Fourier Transform (``numpy.fft.fft`` over a trnplan plan).

    Parameters
    ----------
    a : array_like
        Input array, real or complex.
    n : int, optional
        Length of the transformed axis of the output: the input is cropped or zero-padded to it
        (default: the input's length along ``axis``).
    axis : int, default -1
        Axis over which to compute the FFT.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization mode (default "backward": the forward transform is unscaled).
    out : ndarray, optional
        Where to put the result (same shape; same-kind casting).

    Returns
    -------
    ndarray
        complex64 for float16/float32/complex64 input, complex128 otherwise (clongdouble via
        numpy.fft for extended-precision input).

    Raises
    ------
    ValueError
        ``n < 1``, or an invalid ``norm``, or ``out`` of the wrong shape.
    numpy.exceptions.AxisError
        ``axis`` is out of range.

    See Also
    --------
    numpy.fft.fft, trnplan.fft.fft

    Examples
    --------
    >>> import numpy as np
    >>> from trnplan.interfaces import numpy_fft
    >>> np.allclose(numpy_fft.fft(np.arange(8.0)), np.fft.fft(np.arange(8.0)))
    True
    """
    return _run_c2c("fft", a, n, axis, norm, out, inverse=False)


def ifft(a, n=None, axis=-1, norm=None, out=None):
    """Compute the one-dimensional inverse discrete Fourier Transform (``numpy.fft.ifft``).

    Parameters, returns and errors as :func:`fft`; "backward" scales this inverse by ``1/n``.

    Examples
    --------
    >>> import numpy as np
    >>> from trnplan.interfaces import numpy_fft
    >>> x = np.exp(2j * np.pi * np.arange(8) / 8)
    >>> np.allclose(numpy_fft.ifft(numpy_fft.fft(x)), x)
    True
    """
    return _run_c2c("ifft", a, n, axis, norm, out, inverse=True)


def rfft(a, n=None, axis=-1, norm=None, out=None):
    """Compute the one-dimensional discrete Fourier Transform for real input (``numpy.fft.rfft``).

    Parameters
    ----------
    a : array_like
        Real input (complex input is a TypeError, as in numpy 2).
    n : int, optional
        Number of input points used (crop or zero-pad); the output has ``n // 2 + 1``.
    axis : int, default -1
        Axis over which to compute the FFT.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization mode.
    out : ndarray, optional
        Where to put the result.

    Returns
    -------
    ndarray
        The ``n // 2 + 1`` non-negative frequency terms; complex64 for float16/float32 input.

    Raises
    ------
    TypeError
        ``a`` is complex.
    ValueError
        ``n < 1``, an invalid ``norm``, or ``out`` of the wrong shape.

    Examples
    --------
    >>> import numpy as np
    >>> from trnplan.interfaces import numpy_fft
    >>> numpy_fft.rfft(np.ones(4, dtype=np.float32)).dtype
    dtype('complex64')
    """
    return _run_r2c("rfft", a, n, axis, norm, out)


def irfft(a, n=None, axis=-1, norm=None, out=None):
    """Compute the inverse of :func:`rfft` (``numpy.fft.irfft``).

    Parameters
    ----------
    a : array_like
        The half spectrum (real input is taken as complex).
    n : int, optional
        Length of the real output (default ``2 * (m - 1)`` for ``m`` input points); the input is
        cropped or zero-padded to ``n // 2 + 1`` points.
    axis : int, default -1
        Axis over which to compute the inverse FFT.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization mode.
    out : ndarray, optional
        Where to put the result.

    Returns
    -------
    ndarray
        Real output of length ``n``: float32 for complex64 input, float64 for complex128.

    Raises
    ------
    ValueError
        ``n < 1`` (also the default ``n`` for a single input point), an invalid ``norm``, or
        ``out`` of the wrong shape.

    Examples
    --------
    >>> import numpy as np
    >>> from trnplan.interfaces import numpy_fft
    >>> x = np.arange(7.0)
    >>> np.allclose(numpy_fft.irfft(numpy_fft.rfft(x), 7), x)
    True
    """
    return _run_c2r("irfft", a, n, axis, norm, out)


def hfft(a, n=None, axis=-1, norm=None, out=None):
    """FFT of a signal with Hermitian symmetry, i.e. a real spectrum (``numpy.fft.hfft``).

    ``hfft(a, n) == irfft(conj(a), n) * n`` for the default norm. Parameters, returns and
    errors as :func:`irfft`.

    Examples
    --------
    >>> import numpy as np
    >>> from trnplan.interfaces import numpy_fft
    >>> a = np.array([1, 2j, 3, -2j])
    >>> np.allclose(numpy_fft.hfft(a[:3], 4), np.fft.hfft(a[:3], 4))
    True
    """
    return _run_c2r("hfft", a, n, axis, norm, out)


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """Inverse FFT of a signal with Hermitian symmetry (``numpy.fft.ihfft``).

    ``ihfft(a, n) == conj(rfft(a, n)) / n`` for the default norm. Parameters, returns and
    errors as :func:`rfft`.

    Examples
    --------
    >>> import numpy as np
    >>> from trnplan.interfaces import numpy_fft
    >>> np.allclose(numpy_fft.ihfft(np.arange(6.0)), np.fft.ihfft(np.arange(6.0)))
    True
    """
    return _run_r2c("ihfft", a, n, axis, norm, out)


# ------------------------------------------------------------------------------ N-D
def _cook(a: np.ndarray, s, axes, invreal: bool):
    """numpy's ``_cook_nd_args``: the lengths and (normalised) axes of an N-D transform."""
    shapeless = s is None
    if s is None:
        s = [a.shape[normalize_axis_index(operator.index(ax), a.ndim)] for ax in axes] if axes is not None \
            else list(a.shape)
    else:
        s = list(s)
    if axes is None:
        if not shapeless:
            warnings.warn("`axes` should not be `None` if `s` is not `None` (Deprecated in NumPy 2.0). In a future "
                          "version of NumPy, this will raise an error and `s[i]` will correspond to the size along "
                          "the transformed axis specified by `axes[i]`. To retain current behaviour, pass a sequence "
                          "[0, ..., k-1] to `axes` for an array of dimension k.", DeprecationWarning, stacklevel=4)
        axes = list(range(-len(s), 0))
    axes = [normalize_axis_index(operator.index(ax), a.ndim) for ax in axes]
    if len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    if invreal and shapeless:
        s[-1] = (a.shape[axes[-1]] - 1) * 2
    if any(v is None for v in s):
        warnings.warn("Passing an array containing `None` values to `s` is deprecated in NumPy 2.0 and will raise "
                      "an error in a future version of NumPy. To use the default behaviour of the corresponding 1-D "
                      "transform, pass the value matching the default for its `n` parameter. To use the default "
                      "behaviour for every axis, the `s` argument can be omitted.", DeprecationWarning, stacklevel=4)
        # None: the 1-D transform's default n (irfft's 2 * (m - 1) on the last axis of an inverse real)
        s = [(2 * (a.shape[ax] - 1) if invreal and i == len(s) - 1 else a.shape[ax]) if v is None else v
             for i, (v, ax) in enumerate(zip(s, axes))]
    s = [a.shape[ax] if v == -1 else operator.index(v) for v, ax in zip(s, axes)]
    return s, axes


def _nd(name: str, a, s, axes, norm, out):
    """fftn/ifftn/rfftn/irfftn (and their 2-D forms) with numpy's semantics."""
    a = np.asarray(a)
    base = name.rstrip("n2")  # fft, ifft, rfft, irfft
    s, axes = _cook(a, s, axes, invreal=base == "irfft")
    norm_ = _norm(norm)
    if len(set(axes)) != len(axes):
        return _finish(_loop(base, a, s, axes, norm), out)
    if not axes:
        if base in ("fft", "ifft"):
            return a  # numpy.fft.fftn over no axes returns its input unchanged
        raise AxisError(f"{name} needs at least one axis to transform (the last one is the real axis); got axes=()")
    for n in reversed(s):
        _points(n)
    if base == "rfft":
        compute, out_dtype = _real_in(name, a)
    elif base == "irfft":
        compute, out_dtype = _real_out(a, steps=len(axes))
    else:
        compute, out_dtype = _complex_in(a)
    if compute is None:
        return getattr(np.fft, name)(a, s, axes, norm, out)
    f = {"fft": _tfft.fftn, "ifft": _tfft.ifftn, "rfft": _tfft.rfftn, "irfft": _tfft.irfftn}[base]
    return _finish(to_numpy(f(to_torch(a, compute), s=s, dim=axes, norm=norm_), out_dtype), out)


def _loop(base: str, a: np.ndarray, s, axes, norm):
    """Repeated axes: numpy's own axis-by-axis order, one 1-D trnplan transform per step."""
    if base in ("fft", "ifft"):
        one = fft if base == "fft" else ifft
        for ii in reversed(range(len(axes))):
            a = one(a, n=s[ii], axis=axes[ii], norm=norm)
        return a
    if base == "rfft":
        a = rfft(a, s[-1], axes[-1], norm)
        for ii in range(len(axes) - 2, -1, -1):
            a = fft(a, s[ii], axes[ii], norm)
        return a
    for ii in range(len(axes) - 1):
        a = ifft(a, s[ii], axes[ii], norm)
    return irfft(a, s[-1], axes[-1], norm)


_ND_DOC = """Compute the {what} (``numpy.fft.{name}`` over one trnplan plan).

Parameters
----------
a : array_like
    {input}
s : sequence of ints, optional
    {s_doc} ``-1`` keeps the input's length.
axes : sequence of ints, optional
    Axes to transform (default {axes_default}); a repeated axis is transformed repeatedly, as
    numpy does.
norm : {{"backward", "ortho", "forward"}}, optional
    Normalization mode (default "backward").
out : ndarray, optional
    Where to put the result (same shape; same-kind casting).

Returns
-------
ndarray
    {returns}

Raises
------
ValueError
    A length below 1, ``s`` and ``axes`` of different lengths, an invalid ``norm``, or ``out`` of
    the wrong shape.
numpy.exceptions.AxisError
    An axis out of range{axis_extra}.
{type_error}
See Also
--------
numpy.fft.{name}, trnplan.fft.{name}

Examples
--------
>>> import numpy as np
>>> from trnplan.interfaces import numpy_fft
>>> x = np.random.default_rng(0).standard_normal((4, 6, 8))
>>> np.allclose(numpy_fft.{name}({example}), np.fft.{name}({example}))
True
"""


def _nd_doc(name, what, input, s_doc, axes_default, returns, example, axis_extra="", type_error=""):
    return _ND_DOC.format(name=name, what=what, input=input, s_doc=s_doc, axes_default=axes_default,
                          returns=returns, example=example, axis_extra=axis_extra, type_error=type_error)


_C_IN = "Input array, real or complex."
_R_IN = "Real input array."
_H_IN = "Input array, the half spectrum along the last of ``axes`` (real input is taken as complex)."
_S_C = "Output length along each axis of ``axes`` (crop or zero-pad; default: the input's)."
_S_R = "Number of input points used along each axis (crop or zero-pad)."
_S_H = ("Output length along each axis of ``axes``; the last axis's default is ``2 * (m - 1)`` and its "
        "input is cropped or zero-padded to ``s[-1] // 2 + 1`` points.")
_RET_C = "complex64 for float16/float32/complex64 input, complex128 otherwise."
_RET_R = "complex, the last of ``axes`` holding ``s[-1] // 2 + 1`` terms; complex64 for float16/float32 input."
_RET_H = "real: float32 for complex64 input, float64 for complex128."
_TYPE_R = "TypeError\n    ``a`` is complex.\n"
_NO_AXES = " or no axes to transform"


def fftn(a, s=None, axes=None, norm=None, out=None):
    return _nd("fftn", a, s, axes, norm, out)


def ifftn(a, s=None, axes=None, norm=None, out=None):
    return _nd("ifftn", a, s, axes, norm, out)


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _nd("fft2", a, s, axes, norm, out)


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _nd("ifft2", a, s, axes, norm, out)


def rfftn(a, s=None, axes=None, norm=None, out=None):
    return _nd("rfftn", a, s, axes, norm, out)


def irfftn(a, s=None, axes=None, norm=None, out=None):
    return _nd("irfftn", a, s, axes, norm, out)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _nd("rfft2", a, s, axes, norm, out)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _nd("irfft2", a, s, axes, norm, out)


fftn.__doc__ = _nd_doc("fftn", "N-dimensional discrete Fourier Transform", _C_IN, _S_C, "all axes", _RET_C, "x")
ifftn.__doc__ = _nd_doc("ifftn", "N-dimensional inverse discrete Fourier Transform", _C_IN, _S_C, "all axes",
                        _RET_C, "x")
fft2.__doc__ = _nd_doc("fft2", "2-dimensional discrete Fourier Transform", _C_IN, _S_C, "the last two", _RET_C, "x")
ifft2.__doc__ = _nd_doc("ifft2", "2-dimensional inverse discrete Fourier Transform", _C_IN, _S_C, "the last two",
                        _RET_C, "x")
rfftn.__doc__ = _nd_doc("rfftn", "N-dimensional discrete Fourier Transform of real input", _R_IN, _S_R, "all axes",
                        _RET_R, "x", _NO_AXES, _TYPE_R)
rfft2.__doc__ = _nd_doc("rfft2", "2-dimensional discrete Fourier Transform of real input", _R_IN, _S_R,
                        "the last two", _RET_R, "x", _NO_AXES, _TYPE_R)
irfftn.__doc__ = _nd_doc("irfftn", "inverse of rfftn", _H_IN, _S_H, "all axes", _RET_H, "x + 1j * x", _NO_AXES)
irfft2.__doc__ = _nd_doc("irfft2", "inverse of rfft2", _H_IN, _S_H, "the last two", _RET_H, "x + 1j * x", _NO_AXES)
