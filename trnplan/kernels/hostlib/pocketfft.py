"""scipy.fft (pocketfft, Reinecke's C++ header library) as a leaf: its public API on numpy arrays.

pocketfft threads over the batch only (``workers=``: the leaf's explicit thread count, else
torch's thread count at call time): a single 1-D transform runs on one thread.
"""

from __future__ import annotations

import importlib

import torch

from trnplan.kernels.hostlib.arrays import _unscaled


def _scipy_call(sfft, shape, kind, inverse, norm, threads: int | None = None):
    """scipy.fft's transform (module ``sfft``) as a function of a numpy array of shape ``(batch, *in_shape)``,
    with ``workers=threads`` (None: torch's thread count at each call)."""
    rank, nrm = len(shape), _unscaled(norm, inverse)
    if threads is not None:  # fixed: no get_num_threads() per call
        def workers():
            return threads
    else:
        workers = torch.get_num_threads
    axes = tuple(range(-rank, 0))
    if kind == "c2c":
        fn = (sfft.ifft if inverse else sfft.fft) if rank == 1 else (sfft.ifftn if inverse else sfft.fftn)
        if rank == 1:
            return lambda a: fn(a, axis=-1, norm=nrm, workers=workers())
        return lambda a: fn(a, axes=axes, norm=nrm, workers=workers())
    if kind == "r2c":
        if rank == 1:
            return lambda a: sfft.rfft(a, axis=-1, norm=nrm, workers=workers())
        return lambda a: sfft.rfftn(a, axes=axes, norm=nrm, workers=workers())
    if rank == 1:
        return lambda a: sfft.irfft(a, n=shape[-1], axis=-1, norm=nrm, workers=workers())
    return lambda a: sfft.irfftn(a, s=shape, axes=axes, norm=nrm, workers=workers())




#: scipy's norm word -> pypocketfft's ``inorm`` for a forward transform (scipy.fft._pocketfft.helper's
#: ``_NORM_MAP``; an inverse takes ``2 − inorm``: helper._normalization)
_INORM = {"backward": 0, "ortho": 1, "forward": 2}


def scipy_own_fft(sfft):
    """scipy.fft's own implementation module, never its uarray dispatch (which trnplan's scipy
    backend may hold): ``scipy.fft._pocketfft`` up to scipy 1.17, ``scipy.fft._duccfft`` from 1.18
    (its compiled ``pyduccfft`` takes pypocketfft's arguments: ``(x, type, axes, inorm, out,
    workers, orthogonalize)``, scipy 1.18.1's ``_duccfft/realtransforms.py``). Found when the
    Python-versions lane's 3.12 venv came with scipy 1.18.1 and the r2r leaf failed on
    ``scipy.fft._pocketfft``."""
    for name in ("_pocketfft", "_duccfft"):
        try:
            return importlib.import_module(f"{sfft.__name__}.{name}")
        except ImportError:
            continue
    raise ImportError(f"{sfft.__name__} has neither _pocketfft (scipy <= 1.17) nor _duccfft (scipy >= 1.18): "
                      f"this scipy's own DCT/DST is not where trnplan looks; pip install 'scipy<=1.18'")


def _r2r_call(sfft, shape, fam: str, t: int, inverse: bool, norm: str):
    """pocketfft's DCT/DST of type ``t`` (``fam`` "dct" or "dst"; the inverse if ``inverse``), norm
    included, over the trailing ``len(shape)`` axes, as a function of a numpy array.

    The compiled ``pypocketfft.dct``/``dst`` is called with the arguments scipy's own wrapper
    (``scipy.fft._pocketfft.realtransforms._r2rn``, scipy 1.17) passes it: the inverse of type 2
    is type 3 and back, the inverse's ``inorm`` is ``2 − inorm``, ``orthogonalize`` None (the
    norm's default). The wrapper's argument handling (``_asfarray``, ``_init_nd_shape_and_axes``,
    ``_fix_shape``: nothing to do for a plan's validated input) is ~3 µs a call against ~8 µs for
    the whole 2×1024 float32 DCT-II (measured here), so it is skipped; where that module is not
    there (another scipy) the wrapper runs.
    """
    axes = tuple(range(-len(shape), 0))
    impl = scipy_own_fft(sfft)
    raw = getattr(getattr(impl, "pypocketfft", None) or getattr(impl, "pyduccfft", None), fam, None)
    if raw is None:
        fn = getattr(impl, f"{'i' if inverse else ''}{fam}n")
        return lambda a: fn(a, type=t, axes=axes, norm=norm, workers=torch.get_num_threads())
    inorm = 2 - _INORM[norm] if inverse else _INORM[norm]
    typ = {2: 3, 3: 2}.get(t, t) if inverse else t
    axes = list(axes)
    # workers: torch's thread count, as the scipy leaf (pocketfft threads over the batch)
    return lambda a: raw(a, typ, axes, inorm, None, torch.get_num_threads())
