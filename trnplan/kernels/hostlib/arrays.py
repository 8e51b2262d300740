"""The torch ↔ numpy glue every host-library leaf shares: zero-copy views, dtypes, torch.fft's norm.

The libraries run on host memory: a leaf takes a CPU torch tensor, hands the library a numpy view
of it (``Tensor.numpy()``, no copy), and returns the library's output array as a tensor
(``torch.from_numpy``, no copy).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch


def _scale(norm: str | None, inverse: bool, n: int) -> float:
    """torch.fft's factor for ``norm`` (None: unscaled) on a transform of ``n`` points."""
    if norm is None:
        return 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "backward") == inverse else 1.0


def _unscaled(norm: str | None, inverse: bool) -> str:
    """The norm name that means "no scaling" when ``norm`` is None (as NativeFFT does)."""
    return norm or ("forward" if inverse else "backward")


def _as_numpy(x: torch.Tensor) -> np.ndarray:
    """Zero-copy numpy view of a CPU tensor (conj/neg views and grad-tracking tensors resolved)."""
    try:
        return x.numpy()  # refuses grad-tracking, conj and neg views: resolved below (the rare path)
    except RuntimeError:
        return x.detach().resolve_conj().resolve_neg().numpy()


#: complex dtype of the output for each input dtype, and real dtype of a c2r output
_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128,
            np.dtype(np.complex64): np.complex64, np.dtype(np.complex128): np.complex128}
_REAL = {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}




def numpy_leaf(run: Callable[[np.ndarray], np.ndarray], kind: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """``run`` (a library's transform of a numpy array) as a function of CPU torch tensors, of
    torch.fft's output dtype."""
    want = _REAL if kind == "c2r" else _COMPLEX

    def call(x: torch.Tensor) -> torch.Tensor:
        try:
            a = x.numpy()
        except RuntimeError:  # grad-tracking, conj or neg views: resolved (the rare path)
            a = _as_numpy(x)
        r = run(a)
        if r.dtype != want[a.dtype]:  # a library that widened (none of the three does for these kinds)
            r = r.astype(want[a.dtype])
        return torch.from_numpy(r)

    return call
