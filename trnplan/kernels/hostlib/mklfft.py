"""mkl_fft (Intel MKL's DFTI through Intel's NumPy-style wrapper) as a leaf, on numpy arrays.

Its MKL is ``libmkl_gnu_thread``, on the GNU OpenMP runtime torch loaded: one thread pool with
torch's, whose thread count (``torch.set_num_threads``) it follows; set explicitly per call where
the ``mkl`` service module is present, or, for a leaf with an explicit thread count (``threads``),
through torch's count (:func:`~trnplan.kernels.hostlib.threads.in_threads`). Works around mkl_fft 2.3.2's quirks (see :func:`_mkl_call`).
"""

from __future__ import annotations

import functools
import importlib

import numpy as np
import torch

from trnplan.kernels.hostlib.arrays import _unscaled
from trnplan.kernels.hostlib.threads import in_threads


@functools.cache
def _mkl_thread_setter():
    """``mkl.set_num_threads_local`` of the ``mkl`` service module, or None where it is absent
    (mkl_fft itself takes no thread argument; MKL then follows the OpenMP thread count torch
    sets: ``mkl_get_max_threads()`` read 1 after ``torch.set_num_threads(1)``, 2 after ``(2)``)."""
    try:
        return importlib.import_module("mkl").set_num_threads_local
    except (ImportError, AttributeError):
        return None


def _in_torch_threads(fn, threads: int | None = None):
    """``fn`` run with MKL's thread count set for the call: to ``threads`` (None: torch's count at
    call time) by the ``mkl`` service module where it is present; else, for an explicit
    ``threads``, through torch's OpenMP count (:func:`in_threads`), and for None ``fn`` itself (no
    per-call wrapper: MKL already follows torch's count)."""
    setter = _mkl_thread_setter()
    if setter is None:
        return in_threads(fn, threads)

    def scoped(*args, **kwargs):
        previous = setter(threads or torch.get_num_threads())
        try:
            return fn(*args, **kwargs)
        finally:
            setter(previous)

    return scoped


def _mkl_call(mfft, shape, kind, inverse, norm, threads: int | None = None):
    """mkl_fft's transform (module ``mfft``) as a function of a numpy array of shape ``(batch, *in_shape)``,
    at ``threads`` threads (None: torch's count)."""
    rank, nrm = len(shape), _unscaled(norm, inverse)
    axes = tuple(range(-rank, 0))
    # mkl_fft 2.3.2 quirks: rfftn/irfftn/fftn without ``s`` take the norm's n from the *whole*
    # array shape (batch included), and irfft without ``n`` assumes an even length: always pass
    # the lengths. fftn over some axes of a batched array loops in Python over the other axes
    # (one MKL call per batch item: 65× torch.fft at 16384 × 64), so c2c of rank ≥ 2 runs as one
    # batched 1-D call per axis; a per-axis norm multiplies out to the whole transform's.
    if kind == "c2c":
        fn = mfft.ifft if inverse else mfft.fft
        fn_n = mfft.ifftn if inverse else mfft.fftn

        if rank == 1:  # the common leaf: one batched call, n implied by the input (c2c: in = out length)
            one = _in_torch_threads(fn, threads)
            return lambda a: one(_no_zero_strides(a), None, -1, nrm)

        def c2c(a):
            if a.shape[0] == 1:  # one transform: MKL's own N-D call (3.3× the
                # per-axis calls at 1024², 5× at 32×64×64 in `trnplan bench`)
                return fn_n(a[0], s=shape, axes=tuple(range(rank)), norm=nrm)[None]
            for axis in reversed(axes):
                a = fn(a, n=a.shape[axis], axis=axis, norm=nrm)
            return a

        run = _in_torch_threads(c2c, threads)
        return lambda a: run(_no_zero_strides(a))
    if kind == "r2c":
        f = _in_torch_threads(mfft.rfft if rank == 1 else mfft.rfftn, threads)
    else:
        f = _in_torch_threads(mfft.irfft if rank == 1 else mfft.irfftn, threads)
    if rank == 1:
        return lambda a: f(_no_zero_strides(a), n=shape[-1], axis=-1, norm=nrm)
    return lambda a: f(_no_zero_strides(a), s=shape, axes=axes, norm=nrm)


def _no_zero_strides(a: np.ndarray) -> np.ndarray:
    """``a``, copied to contiguous memory if an axis has stride 0 (a broadcast view, as from
    ``Tensor.expand``): mkl_fft 2.3.2 returns wrong values for those (irfftn of a (8, 4, 10)
    view with strides (10, 0, 1) was off by 68 %, found by tests/test_fft_api.py)."""
    return np.ascontiguousarray(a) if 0 in a.strides and a.size > 1 else a


