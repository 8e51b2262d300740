"""numpy ↔ torch at the interfaces' boundary: zero-copy where numpy's layout allows it.

``torch.from_numpy`` shares memory with the array, so a C-contiguous input already in the dtype
the plan computes in is not copied. Other inputs are copied once into a C-contiguous array:

- negative strides (``x[::-1]``), byte-swapped or read-only arrays cannot be shared (torch
  tensors are always writable, so sharing read-only memory would let a later in-place op write
  into it);
- any other layout (Fortran order, strided slices) is made C-contiguous so that the result does
  not depend on the memory layout: the library FFT under a plan rounds differently for different
  strides (torch.fft on MKL: up to 3.8e-6 apart for a C- and an F-ordered 8×7×13 float32 fft2),
  and scipy's own tests (``test_fft_with_order``) require layout-independent results, as
  pocketfft gives.

Results come back with ``Tensor.numpy()``, which shares the result tensor's memory (resolving
torch's lazy conjugate bit first).
"""

from __future__ import annotations

import numpy as np
import torch

#: compute dtype for an output dtype: trnplan plans run in float32/complex64 or float64/complex128
_COMPLEX_COMPUTE = {np.dtype(np.complex64): np.dtype(np.complex64), np.dtype(np.complex128): np.dtype(np.complex128)}
_REAL_COMPUTE = {np.dtype(np.float16): np.dtype(np.float32), np.dtype(np.float32): np.dtype(np.float32),
                 np.dtype(np.float64): np.dtype(np.float64)}


def complex_compute(out_dtype: np.dtype):
    """The complex dtype a plan computes an ``out_dtype`` result in, or None (e.g. clongdouble)."""
    return _COMPLEX_COMPUTE.get(np.dtype(out_dtype))


def real_compute(out_dtype: np.dtype):
    """The real dtype a plan computes an ``out_dtype`` result in (float16 in float32), or None."""
    return _REAL_COMPUTE.get(np.dtype(out_dtype))


def to_torch(a: np.ndarray, dtype) -> torch.Tensor:
    """``a`` as a CPU tensor of numpy dtype ``dtype``, sharing memory when the layout allows."""
    dtype = np.dtype(dtype)
    if a.dtype != dtype:
        a = a.astype(dtype, order="C")  # a fresh, native, writable, C-contiguous array
    elif not (a.flags.c_contiguous and a.flags.writeable and a.dtype.isnative):
        a = np.array(a, dtype=dtype.newbyteorder("="), order="C", copy=True)
    return torch.from_numpy(a)


def to_numpy(t: torch.Tensor, dtype=None) -> np.ndarray:
    """A plan's result as an ndarray (cast to ``dtype`` if given and different)."""
    out = t.detach().resolve_conj().resolve_neg().cpu().numpy()
    if dtype is not None and out.dtype != np.dtype(dtype):
        out = out.astype(dtype)
    return out
