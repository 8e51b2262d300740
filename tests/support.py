"""What tests share: the engine's bars, seeded data, the float64 reference and the relative error.

One of each (issue 26 item 5: tests had 11 relative-error helpers and 9 float64 references). The
reference is the engine's own (:func:`trnplan.core.accuracy.reference`: numpy.fft in complex128,
scipy.fft for the DCT/DST kinds), so a test measures against what ``Plan.verify`` measures against.
Stand-ins for hardware live beside this module (neuron_device_standin.py, neuron_pg_standin.py).
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest
import torch

from trnplan.core import accuracy
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.core.problem import Problem
from trnplan.kernels.hostlib import installed

#: the engine's accuracy bar (relative L2 vs numpy.fft complex128), imported, never restated:
#: fp32 5e-7 (~8 u32), fp64 1e-13 (~900 u64); see trnplan/core/accuracy.py and docs/precision.md
BAR = {"fp32": DEFAULT_TOL["fp32"], "fp64": DEFAULT_TOL["fp64"]}
DTYPES = {"fp32": torch.complex64, "fp64": torch.complex128}


def to_numpy(a) -> np.ndarray:
    """A tensor (any device, conjugate bit resolved) or array-like as a float64/complex128 numpy array."""
    if isinstance(a, torch.Tensor):
        a = a.detach().resolve_conj().cpu().numpy()
    a = np.asarray(a)
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def rel_l2(y, ref) -> float:
    """Relative L2 error ``||y - ref|| / ||ref||`` in float64 (``||y||`` where ``ref`` is all zero).

    ``y`` and ``ref`` may be torch tensors (any device) or numpy arrays."""
    y, ref = to_numpy(y), to_numpy(ref)
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(y - ref) / (denom if denom > 0 else 1.0))


def random_complex(shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def reference(x, inverse: bool = False, norm: str | None = "backward", *, kind: str = "c2c",
              shape: tuple | None = None) -> np.ndarray:
    """The float64 reference of a transform over ``x``'s last ``len(shape)`` axes.

    Parameters
    ----------
    x : array-like or torch.Tensor
        The input, any leading (batch) axes; computed in complex128 (float64 for r2c).
    inverse : bool
        c2c only: the inverse transform (c2r is always inverse, r2c never).
    norm : {"backward", "ortho", "forward"} or None
        torch.fft's meaning (None: "backward").
    kind : str
        A :data:`trnplan.core.problem.KINDS` kind (c2c, r2c, c2r, the DCT/DST kinds).
    shape : tuple, optional
        The logical transform shape (c2r: the real output's); default ``x.shape[-1:]``, a 1-D transform.

    Returns
    -------
    numpy.ndarray
        :func:`trnplan.core.accuracy.reference` of the problem.
    """
    x = to_numpy(x)
    shape = tuple(shape) if shape is not None else (x.shape[-1],)
    problem = Problem(shape=shape, kind=kind, inverse=kind == "c2r" or (inverse and kind != "r2c"),
                      dtype="complex128", precision="fp64", norm=norm or "backward")
    return accuracy.reference(problem, x)


__all__ = ["BAR", "DTYPES", "random_complex", "reference", "rel_l2", "to_numpy"]


#: library leaf solver -> its hostlib key (native is torch.fft, always present)
LIBRARY_LEAVES = {"native": None, "mkl-fft": "mkl_fft", "scipy": "scipy", "pyfftw": "pyfftw"}


def need_library(solver: str) -> None:
    """Skip the test where ``solver``'s host library is not installed."""
    lib = LIBRARY_LEAVES[solver]
    if lib is not None and installed(lib) is None:
        pytest.skip(f"{lib} is not installed")


@contextlib.contextmanager
def torch_threads(k: int):
    """torch's intra-op thread count set to ``k`` inside the block, the caller's restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(k)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def concurrently(fn, n: int) -> dict:
    """``{i: fn(i)}`` for ``i`` in ``range(n)``, each call on its own thread, all started before any is joined."""
    results: dict = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, fn(i))) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results
