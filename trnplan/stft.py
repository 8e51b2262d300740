"""Short-time Fourier transform and its inverse over trnplan plans, with torch.stft's semantics.

:func:`stft` cuts the signal into overlapping frames, multiplies each by the window and runs
*one* batched plan over all frames of all signals: an r2c plan (``n_fft // 2 + 1`` bins) for
real input, a c2c plan for complex input or window or ``onesided=False``. :func:`istft` runs one
batched c2r (or c2c) plan over the frames, windows them again and overlap-adds them, dividing by
the overlap-added squared window — the least-squares inverse of Griffin and Lim [1]_.

Frames are put back by *index arithmetic*: a ``(frames, length)`` tensor of sample indices
``t * hop + k`` drives one ``index_add`` (overlap-add). They are cut the same way (one
``index_select``) except on the CPU and CUDA, where ``Tensor.unfold`` gives them as a strided view
of the signal, no copy (what torch.stft does): on the CPU here the gather took 100 µs of a 470 µs
STFT of 16 000 samples, the view 3 µs. That is eager execution only: while torch.compile or
torch.export traces (a graph that may be lowered for Trainium) frames are gathered by index, on
every device. ``unfold`` is not used elsewhere because it has no XLA
lowering (the seed project's STFT failed to compile for Trainium on it), and ``as_strided`` views
in general describe memory layout rather than data flow: XLA functionalisation turns them into
copies or rejects them. A gather and a scatter with an explicit index lower on every backend
torch has (eager, Inductor, export, XLA/Neuron), and their gradients are each other. The index
tensors are cached per (frames, hop, length, offset, device): building one took 70 µs a call.

References
----------
.. [1] D. W. Griffin and J. S. Lim, "Signal estimation from modified short-time Fourier
   transform," IEEE Trans. ASSP, vol. 32, no. 2, pp. 236-243, 1984.
"""

from __future__ import annotations

import functools
import warnings

import torch
import torch.nn.functional as F

# trnplan.fft's plan lookup: a dict hit on the raw arguments (~1 µs) in front of plan_many's LRU
# (~70-90 µs per hit for Problem validation and digest on this CPU), kept in step with the LRU
from trnplan.core import state
from trnplan.core.errors import InvalidArgument, InvalidArgumentType, UnsupportedDtypeError, UnsupportedPadMode
from trnplan.core.problem import COMPLEX_OF, REAL_OF
from trnplan.plan.api import cached_plan

__all__ = ["istft", "stft"]

_PAD_MODES = ("constant", "reflect", "replicate", "circular")
#: torch.istft's NOLA threshold: an overlap-added squared window below this is "zero"
_NOLA_EPS = 1e-11


def _check_int(name: str, value, lo: int = 1):
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise InvalidArgument(f"{name} must be an int ≥ {lo}, got {value!r}")


def _check_dtype(t: torch.Tensor, what: str) -> None:
    if t.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128):
        return
    if t.dtype in (torch.float16, torch.bfloat16, torch.complex32):
        raise UnsupportedDtypeError(f"{what} is {str(t.dtype).removeprefix('torch.')}: trnplan plans compute in float32 or "
                        f"float64; convert with .float() (or .to(torch.complex64) for complex32)")
    raise InvalidArgumentType(f"{what} must hold floating-point or complex values, got {str(t.dtype).removeprefix('torch.')}; "
                    f"convert with .to(torch.float32) or .to(torch.float64)")


#: devices whose eager tensors take ``Tensor.unfold`` views (framing without a gather)
_VIEW_DEVICES = ("cpu", "cuda")


def _frame_index(n_frames: int, hop: int, length: int, offset: int, device) -> torch.Tensor:
    """Flat sample indices of ``n_frames`` frames of ``length`` samples, ``hop`` apart, from ``offset``.

    Row ``t`` is ``offset + t * hop + [0, 1, …, length - 1]``; built from two ``arange`` and a
    broadcast add, so it lowers anywhere (see the module docstring for why not ``unfold``).
    Cached (read-only: callers never write to it), except while torch.compile traces, where a
    cached tensor would be a fake one.
    """
    if torch.compiler.is_compiling():
        return _build_frame_index(n_frames, hop, length, offset, device)
    return _cached_frame_index(n_frames, hop, length, offset, device)


@functools.lru_cache(maxsize=64)
def _cached_frame_index(n_frames: int, hop: int, length: int, offset: int, device) -> torch.Tensor:
    with torch.inference_mode(False):  # a normal tensor even when first asked for in inference mode
        return _build_frame_index(n_frames, hop, length, offset, device)


def _build_frame_index(n_frames: int, hop: int, length: int, offset: int, device) -> torch.Tensor:
    """int32, built on the host and moved: no int64 tensor reaches an accelerator (a NeuronCore has
    no INT64: data-types.rst, runtimes.md rule 1), and no device graph builds it (index_select and
    index_add take int32 indices)."""
    starts = torch.arange(n_frames, dtype=torch.int32) * hop + offset
    return (starts[:, None] + torch.arange(length, dtype=torch.int32)[None, :]).reshape(-1).to(device)


#: torch.stft's and torch.istft's warnings when no window is given (aten SpectralOps.cpp, torch 2.13;
#: torch warns once per process, Python's default filter once per calling line)
_NO_WINDOW = {
    "stft()": "A window was not provided. A rectangular window will be applied, which is known to cause spectral "
              "leakage. Other windows such as torch.hann_window or torch.hamming_window are recommended to reduce "
              "spectral leakage. To suppress this warning and use a rectangular window, explicitly set "
              "`window=torch.ones(n_fft, device=<device>)`.",
    "istft()": "A window was not provided. A rectangular window will be applied. Please provide the same window "
               "used by stft to make the inversion lossless. To suppress this warning and use a rectangular "
               "window, explicitly set `window=torch.ones(n_fft, device=<device>)`.",
}


def _window_for(window, win_length: int, device, what: str):
    """The user's window (validated) or ``None`` for the rectangular default (with torch's warning)."""
    if window is None:
        warnings.warn(_NO_WINDOW[what], UserWarning, stacklevel=4)
        return None
    if not isinstance(window, torch.Tensor):
        raise TypeError(f"window must be a 1-D torch.Tensor of win_length={win_length} samples "
                        f"(e.g. torch.hann_window({win_length})), got {type(window).__name__}")
    if window.dim() != 1 or window.shape[0] != win_length:
        raise InvalidArgument(f"{what}: window has shape {tuple(window.shape)} but must be 1-D with win_length="
                         f"{win_length} samples; pass win_length=window.numel() or a window of that length")
    if window.device != device:
        raise InvalidArgument(f"{what}: window is on {window.device} but the input is on {device}; "
                         f"move it with window.to({str(device)!r})")
    if window.is_floating_point() or window.is_complex():
        _check_dtype(window, f"{what}: window")
    return window


def stft(input: torch.Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
         window: torch.Tensor | None = None, center: bool = True, pad_mode: str = "reflect",
         normalized: bool = False, onesided: bool | None = None, return_complex: bool | None = None,
         align_to_window: bool | None = None) -> torch.Tensor:
    r"""Short-time Fourier transform, with :func:`torch.stft`'s arguments and results.

    Computes, for each frame ``m`` and frequency ``ω``,

    .. math::
        X[ω, m] = \sum_{k=0}^{n\_fft-1} w[k]\, x[m \cdot hop + k]\, e^{-2πi ωk / n\_fft},

    with all frames of all signals transformed by one batched trnplan plan (r2c for real input
    and window, c2c otherwise). Differentiable.

    Parameters
    ----------
    input : torch.Tensor
        Signal of shape ``(L,)`` or a batch ``(B, L)``; float32/float64 or complex64/complex128.
    n_fft : int
        Transform length of each frame.
    hop_length : int, optional
        Samples between the starts of neighbouring frames (default ``n_fft // 4``).
    win_length : int, optional
        Length of ``window`` (default ``n_fft``); a shorter window is zero-padded on both sides
        to ``n_fft`` (left ``(n_fft - win_length) // 2``), as torch.stft does.
    window : torch.Tensor, optional
        1-D window of ``win_length`` samples (default: rectangular, all ones).
    center : bool, default True
        Pad ``input`` by ``n_fft // 2`` on both sides so that frame ``m`` is centred at
        ``m * hop_length``.
    pad_mode : {"reflect", "constant", "replicate", "circular"}, default "reflect"
        How ``center`` pads (see :func:`torch.nn.functional.pad`).
    normalized : bool, default False
        Multiply by ``n_fft ** -0.5`` (the plan runs with ``norm="ortho"``).
    onesided : bool, optional
        Return only the ``n_fft // 2 + 1`` non-negative frequencies (default: True for real
        input and window, False otherwise; True with complex input or window is an error).
    return_complex : bool, optional
        Return a complex tensor (True) or, deprecated as in torch, its ``view_as_real`` (False).
        Required for real input, as torch requires it; defaults to True for complex input.
    align_to_window : bool, optional
        Only with ``center=False``: when True, frame ``m`` starts where its window starts
        (``m * hop_length``) rather than where its ``n_fft`` span starts, so frames are counted
        over ``win_length`` (torch ≥ 2.6's meaning).

    Returns
    -------
    torch.Tensor
        Complex ``(B?, N, T)`` with ``N = n_fft // 2 + 1`` (onesided) or ``n_fft`` and
        ``T = 1 + (L' - n_fft) // hop_length`` frames (``L'`` the padded length); a real
        ``(B?, N, T, 2)`` with ``return_complex=False``. Complex dtype is complex64 for float32
        data and window, complex128 when either is 64-bit.

    Raises
    ------
    TypeError
        ``input`` or ``window`` is not a tensor.
    trnplan.core.errors.UnsupportedDtypeError
        ``input`` is float16/bfloat16/complex32 (a ``TypeError`` and, as torch's, a ``RuntimeError``);
        an integer input raises :class:`~trnplan.core.errors.InvalidArgumentType` (the same two bases).
    trnplan.core.errors.InvalidArgument
        A ``ValueError`` and, as torch.stft's errors, a ``RuntimeError``: ``return_complex`` missing for real input; ``onesided=True`` with complex data; a
        non-positive ``n_fft``/``hop_length``; ``win_length`` outside ``1..n_fft``; a window of the
        wrong shape or device; ``n_fft`` longer than the (padded) signal; an unknown ``pad_mode``;
        ``align_to_window`` with ``center=True``. An unknown ``pad_mode`` raises
        :class:`~trnplan.core.errors.UnsupportedPadMode` (``ValueError`` and, as torch's,
        ``NotImplementedError``).

    Warns
    -----
    UserWarning
        No ``window`` given (torch.stft's warning: a rectangular window leaks spectrally).

    Notes
    -----
    Frames are cut by index arithmetic (one ``index_select`` with a ``(frames, win_length)``
    index), never ``Tensor.unfold``, so the graph lowers to XLA/Neuron. Only the
    ``win_length`` samples under the window are gathered; the zero padding to ``n_fft`` is
    added afterwards. Plans are fetched from the process-wide plan cache (through trnplan.fft's
    lookup), keyed by ``(n_fft, frames × batch, dtype, norm)``, so repeated calls with the same
    shape do not re-plan.

    Examples
    --------
    >>> import torch, trnplan
    >>> x = torch.randn(16000)
    >>> X = trnplan.stft(x, 512, hop_length=128, window=torch.hann_window(512), return_complex=True)
    >>> X.shape
    torch.Size([257, 126])
    >>> bool(torch.allclose(X, torch.stft(x, 512, 128, window=torch.hann_window(512), return_complex=True),
    ...                     atol=1e-4))
    True
    """
    if torch.jit.is_tracing():  # one trnplan::stft node in the trace; its kernel runs untraced (sizes as ints)
        return torch.ops.trnplan.stft(input, n_fft, hop_length, win_length, window, center, pad_mode, normalized,
                                      onesided, return_complex, align_to_window)
    hop, win, window = _stft_args(input, n_fft, hop_length, win_length, window, center, pad_mode, align_to_window)
    onesided, return_complex = _stft_sides(input, window, onesided, return_complex)
    batched = input.dim() == 2
    x = _centered(input if batched else input.unsqueeze(0), n_fft, center, pad_mode)
    n_frames = _frame_count(x.shape[-1], n_fft, win, hop, center, align_to_window)
    # torch.stft's promotion: a float32 signal with a float64 window gives complex128
    dtype = input.dtype if window is None else torch.promote_types(input.dtype, window.dtype)
    out_dtype = dtype if dtype.is_complex else COMPLEX_OF[dtype]
    n_bins = n_fft // 2 + 1 if onesided else n_fft
    if x.shape[0] == 0:  # no frames to transform: no plan (plans hold at least one transform)
        y = torch.zeros((0, n_frames, n_bins), dtype=out_dtype, device=x.device)
    else:
        frames = _windowed_frames(x, window, n_fft, win, hop, n_frames, align_to_window)
        if not onesided:
            frames = frames.to(out_dtype)
        y = _run_plan(frames, "r2c" if onesided else "c2c", n_fft, out_dtype, normalized, False)
    y = y.transpose(-1, -2)  # (B, frames, bins) -> (B, bins, frames), torch.stft's layout
    if not batched:
        y = y.squeeze(0)
    return y if return_complex else torch.view_as_real(y)


def _run_plan(x, kind: str, n_fft: int, dtype, normalized: bool, inverse: bool):
    """One plan over the last dim of ``x`` (B, frames, ·): every frame of every signal at once."""
    norm = "ortho" if normalized else "backward"
    if torch.compiler.is_compiling():  # Dynamo cannot trace planning: trnplan.fft's opaque operator
        return torch.ops.trnplan.execute(x, kind, [n_fft], inverse, norm)
    batch = x.shape[0] * x.shape[1]
    return cached_plan(kind, (n_fft,), batch, dtype, norm, inverse, x.device).execute(x)


def _stft_args(input, n_fft, hop_length, win_length, window, center, pad_mode, align_to_window):
    """stft()'s argument checks; (hop, win_length, the window checked, or None)."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"stft() takes a torch.Tensor of shape (L,) or (B, L), got {type(input).__name__}")
    if input.dim() not in (1, 2):
        raise InvalidArgument(f"stft() takes a 1-D signal (L,) or a 2-D batch (B, L); got shape {tuple(input.shape)}: "
                         f"reshape to (-1, L) and back")
    _check_dtype(input, "stft() input")
    _check_int("n_fft", n_fft)
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if hop_length is None and hop < 1:
        raise InvalidArgument(f"the default hop_length n_fft // 4 is 0 for n_fft={n_fft}; pass hop_length ≥ 1")
    _check_int("hop_length", hop)
    _check_int("win_length", win)
    if win > n_fft:
        raise InvalidArgument(f"win_length={win} exceeds n_fft={n_fft}: the window must fit in the frame "
                         f"(0 < win_length ≤ n_fft); raise n_fft or shorten the window")
    if pad_mode not in _PAD_MODES:
        raise UnsupportedPadMode(f"pad_mode must be one of {', '.join(map(repr, _PAD_MODES))}; got {pad_mode!r}")
    if center and align_to_window is not None:
        raise InvalidArgument("align_to_window only applies with center=False (centred frames are already aligned "
                         "to their windows); drop align_to_window or pass center=False")
    return hop, win, _window_for(window, win, input.device, "stft()")


def _stft_sides(input, window, onesided, return_complex) -> tuple[bool, bool]:
    """(onesided, return_complex) resolved as torch.stft resolves them."""
    complex_data = input.is_complex() or (window is not None and window.is_complex())
    if onesided is None:
        onesided = not complex_data
    elif onesided and complex_data:
        raise InvalidArgument("onesided=True needs real input and a real window (a complex signal's spectrum has no "
                         "conjugate symmetry); pass onesided=False or leave it None")
    if return_complex is None:
        if not complex_data:
            raise InvalidArgument("stft() requires return_complex for real input, as torch.stft does: pass "
                             "return_complex=True (or False for the deprecated (..., 2) real layout)")
        return_complex = True
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated (as in torch.stft): pass return_complex=True "
                      "and call torch.view_as_real on the result for the old (..., 2) layout", UserWarning,
                      stacklevel=3)
    return onesided, return_complex


def _centered(x, n_fft: int, center: bool, pad_mode: str):
    """``x`` (B, L) padded by n_fft // 2 on both sides when ``center``."""
    if not center:
        return x
    pad = n_fft // 2
    if pad_mode == "reflect" and pad >= x.shape[-1]:
        raise InvalidArgument(f"center=True with pad_mode='reflect' pads n_fft // 2 = {pad} samples on each side, "
                         f"which needs a signal longer than {pad} samples (got {x.shape[-1]}); use a smaller "
                         f"n_fft, pad_mode='constant', or center=False")
    # F.pad's non-constant modes want a (N, C, L) tensor: view the batch as channels
    return F.pad(x.unsqueeze(0), (pad, pad), mode=pad_mode).squeeze(0)


def _frame_count(length: int, n_fft: int, win: int, hop: int, center: bool, align_to_window) -> int:
    span = win if align_to_window else n_fft
    if span > length:
        what = f"win_length={win}" if align_to_window else f"n_fft={n_fft}"
        raise InvalidArgument(f"{what} is longer than the {'padded ' if center else ''}signal ({length} samples): no "
                         f"frame fits; use {what.split('=')[0]} ≤ {length} or a longer signal"
                         + ("" if center else ", or center=True (which pads n_fft // 2 on each side)"))
    return 1 + (length - span) // hop


def _windowed_frames(x, window, n_fft: int, win: int, hop: int, n_frames: int, align_to_window):
    """The (B, frames, n_fft) windowed frames of ``x`` (B, L), zero-padded from win_length to n_fft."""
    batch, left = x.shape[0], (n_fft - win) // 2
    # cut only the win_length samples under the window; frame t's window starts at
    # t * hop + left in the n_fft span (or at t * hop when aligned to the window)
    start = 0 if align_to_window else left
    if x.device.type in _VIEW_DEVICES and not torch.compiler.is_compiling():  # eager: a view, no copy
        frames = x[:, start:start + (n_frames - 1) * hop + win].unfold(-1, win, hop)
    else:
        frames = x.index_select(-1, _frame_index(n_frames, hop, win, start, x.device)).reshape(batch, n_frames, win)
    if window is not None:
        frames = frames * window  # promotes to the output's real dtype
    if win < n_fft:
        frames = F.pad(frames, (left, n_fft - win - left))
    return frames


def istft(input: torch.Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
          window: torch.Tensor | None = None, center: bool = True, normalized: bool = False,
          onesided: bool | None = None, length: int | None = None, return_complex: bool = False) -> torch.Tensor:
    r"""Inverse short-time Fourier transform, with :func:`torch.istft`'s arguments and results.

    Inverts each frame with one batched trnplan plan (c2r, or c2c for ``return_complex=True``),
    multiplies by the window, overlap-adds, and divides by the overlap-added squared window
    (the least-squares estimate of Griffin and Lim). Differentiable.

    Parameters
    ----------
    input : torch.Tensor
        Complex STFT of shape ``(N, T)`` or ``(B, N, T)``, as :func:`stft` returns with
        ``return_complex=True``; ``N`` is ``n_fft // 2 + 1`` (onesided) or ``n_fft``.
    n_fft : int
        Transform length of each frame.
    hop_length : int, optional
        Samples between frame starts (default ``n_fft // 4``); at most ``win_length``.
    win_length : int, optional
        Window length (default ``n_fft``), zero-padded to ``n_fft`` on both sides.
    window : torch.Tensor, optional
        The window the STFT used (default: rectangular).
    center : bool, default True
        Whether the STFT centred its frames; the ``n_fft // 2`` padding is trimmed.
    normalized : bool, default False
        Whether the STFT was normalized (the inverse plan then runs with ``norm="ortho"``).
    onesided : bool, optional
        Whether ``input`` holds only non-negative frequencies (default: ``N != n_fft``).
    length : int, optional
        Output length: the signal is trimmed to it, or zero-padded at the end (with a warning,
        as torch does) when the frames do not cover it. Default: ``(T - 1) * hop_length`` when
        centred, else ``n_fft + (T - 1) * hop_length``.
    return_complex : bool, default False
        Return a complex signal (requires ``onesided=False``); otherwise the signal is real and
        a complex window is an error.

    Returns
    -------
    torch.Tensor
        The signal, ``(B?, length)``: real (float32 for complex64 input) or complex.

    Raises
    ------
    TypeError
        ``input`` is not a tensor.
    trnplan.core.errors.InvalidArgumentType
        ``input`` is real (a ``TypeError`` and, as torch's, a ``RuntimeError``); complex32 raises
        :class:`~trnplan.core.errors.UnsupportedDtypeError` (the same two bases).
    trnplan.core.errors.InvalidArgument
        A ``ValueError`` and, as torch.istft's errors, a ``RuntimeError``: wrong rank or an empty input; ``N`` does not match ``n_fft`` and ``onesided``;
        ``hop_length`` outside ``1..win_length``; ``win_length`` outside ``1..n_fft``; a window of
        the wrong shape or device; ``return_complex=True`` with onesided input; a complex window
        with a real output; a window whose overlap-added square vanishes somewhere in the output
        (the NOLA condition fails, so the signal cannot be recovered there).

    Warns
    -----
    UserWarning
        No ``window`` given (torch.istft's warning: pass the window the STFT used).

    Notes
    -----
    The overlap-add is one ``index_add`` over a ``(frames, n_fft)`` index (never
    ``unfold_backward``), so it lowers to XLA/Neuron as a scatter-add. The NOLA check reads one
    scalar back to the host, as torch.istft's does.

    Examples
    --------
    >>> import torch, trnplan
    >>> x = torch.randn(2, 4000, dtype=torch.float64)
    >>> w = torch.hann_window(256, dtype=torch.float64)
    >>> X = trnplan.stft(x, 256, hop_length=64, window=w, return_complex=True)
    >>> y = trnplan.istft(X, 256, hop_length=64, window=w, length=4000)
    >>> bool(torch.allclose(x, y))
    True
    """
    if torch.jit.is_tracing():  # one trnplan::istft node in the trace (see stft)
        return torch.ops.trnplan.istft(input, n_fft, hop_length, win_length, window, center, normalized, onesided,
                                       length, return_complex)
    hop, win, onesided, window = _istft_args(input, n_fft, hop_length, win_length, window, onesided, length,
                                             return_complex)
    batched = input.dim() == 3
    z = (input if batched else input.unsqueeze(0)).transpose(-1, -2)  # (B, frames, bins)
    batch, n_frames = z.shape[0], z.shape[1]
    if not return_complex and not onesided:  # a real signal's spectrum is Hermitian: c2r reads the first half
        z = z[..., : n_fft // 2 + 1]
    w = _synthesis_window(window, win, n_fft, REAL_OF[input.dtype], input.device)
    frames = _run_plan(z, "c2c" if return_complex else "c2r", n_fft, input.dtype, normalized, True) * w

    # overlap-add by index arithmetic: sample t * hop + k of the output receives frame t's k-th value
    full = n_fft + hop * (n_frames - 1)
    index = _frame_index(n_frames, hop, n_fft, 0, input.device)
    y = frames.new_zeros((batch, full)).index_add(1, index, frames.reshape(batch, n_frames * n_fft))
    envelope = (w * w).new_zeros(full).index_add(0, index, (w * w).expand(n_frames, n_fft).reshape(-1))
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = -(n_fft // 2) if center else full
    y, envelope = y[:, start:end], envelope[start:end]
    if input.device.type in ("cpu", "cuda", "meta") or torch.compiler.is_compiling():
        _check_nola(envelope, hop)
    else:  # an accelerator: the envelope is the window's alone, so check it on the host (reading the device
        # is a sync, and torch-xla runs that read, aten::_local_scalar_dense, as a host fallback)
        wh = (w.detach().cpu()) ** 2
        host = wh.new_zeros(full).index_add(0, index.cpu(), wh.expand(n_frames, n_fft).reshape(-1))
        _check_nola(host[start:end], hop)
    y = y / envelope
    if end > full:
        warnings.warn("The length of signal is shorter than the length parameter. Result is being padded with "
                      "zeros in the tail. Please check your center and hop_length settings.", UserWarning,
                      stacklevel=2)
        y = F.pad(y, (0, end - full))
    return y if batched else y.squeeze(0)


def _istft_args(input, n_fft, hop_length, win_length, window, onesided, length, return_complex):
    """istft()'s argument checks; (hop, win_length, onesided resolved, the window checked or None)."""
    if not isinstance(input, torch.Tensor) or not input.is_complex():
        tensor = isinstance(input, torch.Tensor)
        got = f"a real {input.dtype} tensor" if tensor else type(input).__name__
        # a real tensor: torch raises RuntimeError ("istft requires a complex-valued input tensor")
        raise (InvalidArgumentType if tensor else TypeError)(
            f"istft() takes the complex output of stft(..., return_complex=True), got {got}; "
            f"for the old (..., 2) real layout pass torch.view_as_complex(x)")
    _check_dtype(input, "istft() input")
    if input.dim() not in (2, 3):
        raise InvalidArgument(f"istft() takes a complex (N, T) or (B, N, T) tensor, got shape {tuple(input.shape)}")
    if input.numel() == 0:
        raise InvalidArgument(f"istft() input has shape {tuple(input.shape)} and holds no frames; it cannot be empty")
    _check_int("n_fft", n_fft)
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    _check_int("win_length", win)
    if win > n_fft:
        raise InvalidArgument(f"win_length={win} exceeds n_fft={n_fft}: expected 0 < win_length ≤ n_fft")
    if isinstance(hop, bool) or not isinstance(hop, int) or not 0 < hop <= win:
        raise InvalidArgument(f"hop_length must be an int with 0 < hop_length ≤ win_length={win} (frames must overlap "
                         f"or touch for the signal to be recoverable), got {hop!r}")
    if length is not None:
        _check_int("length", length, lo=0)
    n_rows = input.shape[-2]
    if onesided is None:
        onesided = n_rows != n_fft
    expected_rows = n_fft // 2 + 1 if onesided else n_fft
    if n_rows != expected_rows:
        raise InvalidArgument(f"istft() input has {n_rows} frequency rows (dimension -2) but n_fft={n_fft} with "
                         f"onesided={onesided} needs {expected_rows}; pass the n_fft and onesided the STFT used")
    window = _window_for(window, win, input.device, "istft()")
    if return_complex and onesided:
        raise InvalidArgument("return_complex=True needs the full spectrum (onesided=False): a one-sided STFT can only "
                         "come from a real signal; pass return_complex=False")
    if not return_complex and window is not None and window.is_complex():
        raise InvalidArgument("a complex window cannot give a real signal: pass return_complex=True (with onesided=False)")
    return hop, win, onesided, window


def _synthesis_window(window, win: int, n_fft: int, real, device):
    """The window (ones if None) in the signal's real dtype, zero-padded from win_length to n_fft."""
    if window is None:
        w = torch.ones(win, dtype=real, device=device)
    else:
        w = window if window.is_floating_point() or window.is_complex() else window.to(real)
    if win < n_fft:
        left = (n_fft - win) // 2
        w = F.pad(w, (left, n_fft - win - left))
    return w


def _check_nola(envelope, hop: int) -> None:
    """The overlap-added squared window must stay above _NOLA_EPS where the output is (NOLA)."""
    if envelope.numel():
        low = envelope.abs().min()
        if torch.compiler.is_compiling():  # no data-dependent branch in a graph: a check the graph runs
            torch._assert_async(low >= _NOLA_EPS, "istft(): the NOLA condition fails (the window's overlap-added "
                                "square vanishes inside the output); use a smaller hop_length or another window")
            return
        if bool(low < _NOLA_EPS):
            raise InvalidArgument(
                f"istft(): the window's overlap-added square falls to {float(low):.3g} (< {_NOLA_EPS:g}) inside the "
                f"output, so the signal cannot be recovered there (the NOLA condition fails); use a smaller "
                f"hop_length (now {hop}), a window that is not zero at its ends (a Hann window is 0 at sample 0), "
                f"win_length=n_fft, or center=True (which trims the edge samples)")


# torch.jit.script compiles calls to trnplan.stft / trnplan.istft as calls to these operators
# (aten's stft.center and istft schemas; see trnplan.fft's "torch operators" for the mechanism):
# their kernels run the Python functions above, so planning, autograd and the checks are the same.
_SCHEMAS = {
    "stft": "stft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, "
            "bool center=True, str pad_mode=\"reflect\", bool normalized=False, bool? onesided=None, "
            "bool? return_complex=None, bool? align_to_window=None) -> Tensor",
    "istft": "istft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, "
             "bool center=True, bool normalized=False, bool? onesided=None, int? length=None, "
             "bool return_complex=False) -> Tensor",
}
_LIBRARY = torch.library.Library("trnplan", "FRAGMENT")  # module-level: dropping it unregisters the ops
for _name, _fn in (("stft", stft), ("istft", istft)):
    _LIBRARY.define(_SCHEMAS[_name])
    _LIBRARY.impl(_name, _fn, "CompositeImplicitAutograd")
    if hasattr(torch.jit, "_builtins"):
        torch.jit._builtins._register_builtin(_fn, f"trnplan::{_name}")
del _name, _fn


state.register("stft.frame_index", _cached_frame_index.cache_clear)
