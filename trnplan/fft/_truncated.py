"""Truncated (pruned) real transforms: rfftn / irfftn that keep or take only the low frequencies.

:func:`rfftn_truncated` and :func:`irfftn_truncated` (the Fourier neural operator's steps) run
one truncated plan (``kind="r2c"``/``"c2r"`` with ``modes=``, the truncated solver); a repeated
call takes the drop-in's shortcut (:func:`~trnplan.fft._dropin._shortcut`), as rfftn's does.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from trnplan.fft._args import _check_input, _check_points, _int_seq, _norm, _promote, _real_input, _resize, _wrap_dim
from trnplan.fft._dropin import _plain, _shortcut
from trnplan.fft._engine import _kept, _transform, kind_word


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
    y = _shortcut(key, input)  # a repeated call: straight to its plan (as rfftn's, _dropin._call)
    if y is not None:
        return y
    _check_input("rfftn_truncated", input)
    norm = _norm("rfftn_truncated", norm)
    dims, shape, modes = _truncated_dims("rfftn_truncated", input, modes, s, dim, inverse=False)
    axes = _low_axes("rfftn_truncated", low, dims, input.ndim)
    x = _resize(_real_input("rfftn_truncated", input), dims, shape)
    return _transform(x, kind_word("r2c", modes, axes), False, dims, shape, norm, key if x is input else None)


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
    return _transform(x, kind_word("c2r", modes, axes), True, dims, shape, norm, key if x is input else None)


