"""scipy.fft (pocketfft, Reinecke's C++ header library) as a leaf: its public API on numpy arrays.

pocketfft threads over the batch only (``workers=``: the leaf's explicit thread count, else
torch's thread count at call time): a single 1-D transform runs on one thread.
"""

from __future__ import annotations

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


