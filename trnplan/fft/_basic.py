"""torch.fft's functions: the 1-D and N-D transforms, the Hermitian ones, and the frequency helpers.

Each transform is one line, :func:`~trnplan.fft._dropin._call` with its name (the dispatch lives
there); the docstrings are filled in from :mod:`trnplan.fft._docs`'s templates at the end.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from trnplan.fft._docs import _IN_C, _IN_H, _IN_R, _N_C, _S_C, _doc
from trnplan.fft._dropin import _DIMS_2, _call


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
