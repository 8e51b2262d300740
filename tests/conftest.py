"""Shared helpers: seeded complex data and the float64 reference (numpy.fft in complex128)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from trnplan.backends import accel
from trnplan.core.accuracy import DEFAULT_TOL

#: the engine's accuracy bar (relative L2 vs numpy.fft complex128), imported, never restated:
#: fp32 5e-7 (~8 u32), fp64 1e-13 (~900 u64); see trnplan/core/accuracy.py and docs/precision.md
BAR = {"fp32": DEFAULT_TOL["fp32"], "fp64": DEFAULT_TOL["fp64"]}
DTYPES = {"fp32": torch.complex64, "fp64": torch.complex128}
#: process-wide variables a Neuron plan sets (accel.NO_FALLBACK, the --auto-cast=none flag), put back
#: after each test (the compile-cache ones by accel.reset_compile_cache)
PROCESS_ENV = (*accel.NO_FALLBACK, "NEURON_CC_FLAGS")


def rel_l2(y, ref) -> float:
    y = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    ref = np.asarray(ref)
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(y - ref) / (denom if denom > 0 else 1.0))


def random_complex(shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def reference(x: np.ndarray, inverse: bool, norm: str = "backward") -> np.ndarray:
    """numpy.fft over the last axis in complex128, with torch.fft's norm semantics."""
    x = np.asarray(x, dtype=np.complex128)
    return np.fft.ifft(x, norm=norm) if inverse else np.fft.fft(x, norm=norm)


@pytest.fixture(autouse=True)
def _fresh_plan_cache(tmp_path, monkeypatch):
    """Every test starts from an empty in-process plan cache and its own empty on-disk cache,
    so no test sees another's wisdom and nothing is written to the user's ~/.cache."""
    import trnplan

    monkeypatch.setenv("TRNPLAN_CACHE_DIR", str(tmp_path / "trnplan-cache"))
    monkeypatch.delenv("TRNPLAN_WISDOM_ONLY", raising=False)
    monkeypatch.delenv("TRNPLAN_TRUST_CACHE", raising=False)
    trnplan.clear_plan_cache()
    env = {var: os.environ.get(var) for var in PROCESS_ENV}
    yield
    trnplan.clear_plan_cache()
    # a Neuron plan sets process-wide variables (the compile caches, no-fallback, --auto-cast=none)
    # at its first use; a later test, or a child process it starts, expects a fresh process's
    accel.reset_compile_cache()
    for var, value in env.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


def exported_bundle_meta(tmp_path, shape=(64,)):
    """Precompile one plan, export it, and return (bundle path, its parsed bundle.json) for forging."""
    import json
    import zipfile

    from trnplan.cache import PlanCache
    from trnplan.cache.bundle import export_bundle
    from trnplan.precompile import precompile

    src = PlanCache(tmp_path / "src")
    precompile([{"shape": list(shape)}], cache=src, progress=False)
    bundle = tmp_path / "b.zip"
    export_bundle(src, bundle)
    with zipfile.ZipFile(bundle) as zf:
        return bundle, json.loads(zf.read("bundle.json"))
