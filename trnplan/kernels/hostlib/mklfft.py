"""mkl_fft (Intel MKL's DFTI through Intel's NumPy-style wrapper) as a leaf, on numpy arrays.

Its MKL is ``libmkl_gnu_thread``, on the GNU OpenMP runtime torch loaded: one thread pool with
torch's. Its thread count is set per call with MKL's own ``mkl_set_num_threads_local`` (to the
leaf's ``threads``, or torch's count): through the ``mkl`` service module where it is installed,
else through ctypes on the ``libmkl_rt`` mkl_fft loaded (:func:`_mkl_thread_setter`). Not through
torch's OpenMP count alone: MKL's own controls take precedence over OpenMP's, and
``omp_set_num_threads`` (what ``torch.set_num_threads`` calls) does not override the
``MKL_NUM_THREADS`` environment variable (Intel oneMKL developer guide, "Techniques to Set the
Number of Threads"). With ``MKL_NUM_THREADS=2`` a ``threads=1`` leaf that only set torch's count ran
two threads (``mkl_get_max_threads()`` read 2 after ``torch.set_num_threads(1)``; 16×4099 took
370 µs quiet, one thread's time is ~850, and 4.6–11 ms while another process held a core). Only
where neither is found (no ``libmkl_rt`` in this process's maps) torch's count is the fallback
(:func:`~trnplan.kernels.hostlib.threads.in_threads`). Works around mkl_fft 2.3.2's quirks (see
:func:`_mkl_call`).
"""

from __future__ import annotations

import ctypes
import functools
import importlib

import numpy as np
import torch

from trnplan.kernels.hostlib.arrays import _unscaled
from trnplan.kernels.hostlib.threads import in_threads


@functools.cache
def _mkl_thread_setter():
    """MKL's ``mkl_set_num_threads_local`` (sets the calling thread's MKL count, returns the previous
    one; 0 means MKL's global count): the ``mkl`` service module's where it is installed, else the
    ``libmkl_rt`` that mkl_fft loaded, through ctypes (:func:`_mkl_rt_setter`); None where neither is
    found. Called after mkl_fft is imported (its leaf is built from the imported module)."""
    try:
        return importlib.import_module("mkl").set_num_threads_local
    except (ImportError, AttributeError):
        return _mkl_rt_setter()


def _mkl_rt_setter():
    """``mkl_set_num_threads_local`` of the ``libmkl_rt`` mapped into this process (mkl_fft's
    ``_pydfti`` links it; Linux's ``/proc/self/maps`` says where), or None. Opening the mapped path
    again gives the same loaded library, so the count set is the one mkl_fft's calls read; the
    thread-local count takes precedence over the global one and over ``MKL_NUM_THREADS`` (oneMKL
    developer reference, ``mkl_set_num_threads_local``). A ctypes call each way: ~0.3 µs."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            path = next((line.split()[-1] for line in maps if "/libmkl_rt.so" in line), None)
        if path is None:
            return None
        # mkl_rt.h spells the C call MKL_Set_Num_Threads_Local (``mkl_set_num_threads_local`` is a macro of
        # it); the lower-case symbol libmkl_rt exports is the Fortran one, taking a pointer
        setter = ctypes.CDLL(path).MKL_Set_Num_Threads_Local
    except (OSError, AttributeError):  # no /proc (not Linux), or an MKL without the call
        return None
    setter.argtypes, setter.restype = [ctypes.c_int], ctypes.c_int
    return setter


def in_mkl_threads(fn, threads: int | None = None):
    """``fn`` (an mkl_fft call) run with MKL's thread count set for the call.

    Parameters
    ----------
    fn : callable
        A call into mkl_fft (imported before this is called).
    threads : int or None
        The count; None: torch's count at call time.

    Returns
    -------
    callable
        A wrapper that sets MKL's thread-local count (:func:`_mkl_thread_setter`), calls ``fn`` and
        restores the previous count; where no setter is found, for an explicit ``threads`` the
        count through torch's OpenMP count (:func:`in_threads`; right only where ``MKL_NUM_THREADS``
        is not set), and for None ``fn`` itself.
    """
    setter = _mkl_thread_setter()
    if setter is None:
        return in_threads(fn, threads)
    get = torch.get_num_threads

    def scoped(*args):  # positional only, no per-call module lookup: see in_threads' notes
        previous = setter(threads or get())
        try:
            return fn(*args)
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
            one = in_mkl_threads(fn, threads)
            return lambda a: one(_no_zero_strides(a), None, -1, nrm)

        def c2c(a):
            if a.shape[0] == 1:  # one transform: MKL's own N-D call (3.3× the
                # per-axis calls at 1024², 5× at 32×64×64 in `trnplan bench`)
                return fn_n(a[0], s=shape, axes=tuple(range(rank)), norm=nrm)[None]
            for axis in reversed(axes):
                a = fn(a, n=a.shape[axis], axis=axis, norm=nrm)
            return a

        run = in_mkl_threads(c2c, threads)
        return lambda a: run(_no_zero_strides(a))
    fn = (mfft.rfft if rank == 1 else mfft.rfftn) if kind == "r2c" else (mfft.irfft if rank == 1 else mfft.irfftn)
    kw = {"n": shape[-1], "axis": -1} if rank == 1 else {"s": shape, "axes": axes}
    f = in_mkl_threads(functools.partial(fn, norm=nrm, **kw), threads)
    return lambda a: f(_no_zero_strides(a))


def _no_zero_strides(a: np.ndarray) -> np.ndarray:
    """``a``, copied to contiguous memory if an axis has stride 0 (a broadcast view, as from
    ``Tensor.expand``): mkl_fft 2.3.2 returns wrong values for those (irfftn of a (8, 4, 10)
    view with strides (10, 0, 1) was off by 68 %, found by tests/test_fft_api.py)."""
    return np.ascontiguousarray(a) if 0 in a.strides and a.size > 1 else a


