"""A warm start that is warm (issue 19, item 7): what a process imports to plan, and the fingerprint.

A fresh process that loads a cached plan without a host-library leaf imports none of scipy,
pyFFTW or mkl_fft (they were imported only to put their versions in the fingerprint: 448 ms of a
463 ms warm ``plan_many``); the fingerprint reads the versions from the distributions' metadata;
a missing library (``hostlib.installed`` monkeypatched) and a broken one (installed, import fails)
are each handled. Timings are bench/warm_start.py's, not asserted here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from support import BAR, random_complex, rel_l2

import trnplan
from trnplan.cache import CacheWarning
from trnplan.cache.fingerprint import fingerprint
from trnplan.kernels import hostlib
from trnplan.planner.planner import NOT_APPLICABLE

#: the host libraries' top-level modules, and the module each leaf solver needs
LIBRARY_MODULES = ("scipy", "pyfftw", "mkl_fft")
LEAF_MODULE = {"scipy": "scipy", "pyfftw": "pyfftw", "mkl-fft": "mkl_fft"}

CHILD = r"""
import json, sys
import numpy as np, torch
LIBS = {libs!r}
import trnplan
after_import = [m for m in LIBS if m in sys.modules]
plan = trnplan.plan_many({n}, batch={batch}, strategy={strategy!r})
after_plan = [m for m in LIBS if m in sys.modules]
x = torch.randn({batch}, {n}, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
y = plan.execute(x)
ref = np.fft.fft(x.numpy().astype(np.complex128), axis=-1)
print(json.dumps({{"after_import": after_import, "after_plan": after_plan,
                  "after_execute": [m for m in LIBS if m in sys.modules],
                  "solvers": sorted({{node.solver for _, node in plan.tree.walk()}}), "tree": str(plan.tree),
                  "origin": plan.provenance.origin,
                  "err": float(np.linalg.norm(y.numpy() - ref) / np.linalg.norm(ref))}}))
"""


def _child(cache_dir, n: int, batch: int, strategy: str | None) -> dict:
    """Plan (and run) in a fresh Python process on ``cache_dir``; what it imported, and when."""
    env = {**os.environ, "TRNPLAN_CACHE_DIR": str(cache_dir)}
    env.pop("TRNPLAN_WISDOM_ONLY", None)
    code = CHILD.format(libs=LIBRARY_MODULES, n=n, batch=batch, strategy=strategy)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_warm_start_without_library_leaf_imports_no_library(tmp_path):
    cold = _child(tmp_path / "cache", 256, 4, "native")
    warm = _child(tmp_path / "cache", 256, 4, "native")
    assert cold["origin"] == "planned now" and warm["origin"] == "wisdom hit"
    assert warm["tree"] == cold["tree"] and not set(warm["solvers"]) & set(LEAF_MODULE)
    for run in (cold, warm):
        assert run["after_import"] == [] and run["after_plan"] == [] and run["after_execute"] == []
        assert run["err"] <= BAR["fp32"]


@pytest.mark.slow
def test_library_imported_only_when_the_plan_has_its_leaf(tmp_path):
    pytest.importorskip("pyfftw")
    cold = _child(tmp_path / "cache", 256, 4, "pyfftw")
    warm = _child(tmp_path / "cache", 256, 4, "pyfftw")
    assert warm["origin"] == "wisdom hit" and warm["solvers"] == ["pyfftw"]
    for run in (cold, warm):
        assert run["after_import"] == []
        # pyFFTW itself imports scipy (its interfaces); mkl_fft has no business being loaded
        assert "pyfftw" in run["after_plan"] and "mkl_fft" not in run["after_execute"]
        assert run["err"] <= BAR["fp32"]


@pytest.mark.slow
def test_cold_estimate_imports_only_the_chosen_leaf(tmp_path):
    # every host library is priced here (installed: metadata), only the chosen one is imported
    run = _child(tmp_path / "cache", 4096, 16, None)
    assert run["origin"] == "planned now" and run["after_import"] == []
    chosen = {LEAF_MODULE[s] for s in run["solvers"] if s in LEAF_MODULE}
    allowed = chosen | ({"scipy"} if chosen else set())  # pyFFTW and mkl_fft import scipy themselves
    assert set(run["after_plan"]) <= allowed, (run["tree"], run["after_plan"])
    assert chosen <= set(run["after_plan"])
    assert run["err"] <= BAR["fp32"]


def _distribution_version(module: str, dist: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return None
    return importlib.metadata.version(dist)


def test_fingerprint_library_versions_are_the_installed_distributions():
    expected = []
    for name, (modname, dist) in hostlib.LIBRARIES.items():
        version = _distribution_version(modname.split(".")[0], dist)
        assert hostlib.installed(name) == version
        expected.append(f"{name} {version or 'absent'}")
        if version is not None:  # the format the fingerprint had when it imported them: unchanged here
            assert importlib.import_module(modname.split(".")[0]).__version__ == version
    assert fingerprint("cpu")["fft_libraries"] == ", ".join(expected)
    assert hostlib.available() == {name: hostlib.installed(name) for name in hostlib.LIBRARIES}


def test_simulated_absent_library_reads_absent_everywhere(monkeypatch):
    real = hostlib.installed
    monkeypatch.setattr(hostlib, "installed", lambda name: None if name == "mkl_fft" else real(name))
    assert hostlib.available()["mkl_fft"] is None and hostlib.library_module("mkl_fft") is None
    assert "mkl_fft absent" in fingerprint("cpu")["fft_libraries"]
    plan = trnplan.plan_many(64, batch=2)
    verdicts = {c.solver: c for c in plan.candidates}
    assert verdicts["mkl-fft"].verdict == NOT_APPLICABLE and "not installed" in verdicts["mkl-fft"].reason
    assert "mkl_fft" in plan.explain(full=True)  # listed as not installed


def test_wisdom_under_other_library_versions_is_a_fingerprint_difference(monkeypatch):
    with monkeypatch.context() as m:  # a plan stored when pyFFTW was another version (or absent)
        m.setattr(hostlib, "installed", lambda name: "0.0.1" if name == "pyfftw" else None)
        old = trnplan.plan_many(64, batch=4)
        stored = old.provenance.fingerprint["fft_libraries"]
    trnplan.clear_plan_cache()
    here = fingerprint("cpu")["fft_libraries"]
    assert stored != here
    with pytest.warns(CacheWarning, match="another fingerprint") as caught:
        replanned = trnplan.plan_many(64, batch=4)
    assert any(f"fft_libraries: {stored} (stored) vs {here} (here)" in str(w.message) for w in caught)
    assert replanned.provenance.origin == "planned now"
    x = torch.from_numpy(random_complex((4, 64), seed=1).astype(np.complex64))
    assert rel_l2(replanned.execute(x), np.fft.fft(x.numpy().astype(np.complex128))) <= BAR["fp32"]


def _break(monkeypatch, library: str) -> None:
    """Simulate ``library`` installed (its metadata is there) but failing to import."""
    real = hostlib._import_library

    def fake(name):
        if name == library:
            raise OSError(f"lib{library}.so: cannot open shared object file")
        return real(name)

    monkeypatch.setattr(hostlib, "_BROKEN", {})
    monkeypatch.setattr(hostlib, "_import_library", fake)


def test_broken_library_gives_a_clear_error_then_plans_without_it(monkeypatch):
    pytest.importorskip("pyfftw")
    _break(monkeypatch, "pyfftw")
    assert hostlib.installed("pyfftw") is not None  # the metadata says installed: planning prices it
    with pytest.warns(UserWarning, match="importing it failed"), pytest.raises(trnplan.PlanningError) as info:
        trnplan.plan_many(64, batch=2, strategy="pyfftw")
    msg = str(info.value)
    assert "importing it failed" in msg and "OSError" in msg and "pip install --force-reinstall pyfftw" in msg
    # from then on this process reads it as absent: planning leaves it out, with the reason
    assert hostlib.installed("pyfftw") is None and "OSError" in hostlib.broken_reason("pyfftw")
    assert "pyfftw absent" in fingerprint("cpu")["fft_libraries"]
    plan = trnplan.plan_many(64, batch=2)
    verdict = {c.solver: c for c in plan.candidates}["pyfftw"]
    assert verdict.verdict == NOT_APPLICABLE and "failed to import" in verdict.reason
    x = torch.from_numpy(random_complex((2, 64), seed=2).astype(np.complex64))
    assert rel_l2(plan.execute(x), np.fft.fft(x.numpy().astype(np.complex128))) <= BAR["fp32"]


def test_broken_library_on_a_wisdom_hit_forgets_the_record_and_refuses(monkeypatch):
    pytest.importorskip("pyfftw")
    trnplan.plan_many(64, batch=2, strategy="pyfftw")  # stored while pyFFTW imports
    trnplan.clear_plan_cache()
    _break(monkeypatch, "pyfftw")
    with warnings.catch_warnings(record=True) as caught, pytest.raises(trnplan.PlanningError) as info:
        warnings.simplefilter("always")
        trnplan.plan_many(64, batch=2, strategy="pyfftw")
    said = [(w.category, str(w.message)) for w in caught]
    assert any("importing it failed" in m for _, m in said), said
    assert any(c is CacheWarning and "forgetting it and re-planning" in m and "importing it failed" in m
               for c, m in said), said
    # the re-plan refuses the forced strategy, naming the broken import
    assert "failed to import" in str(info.value) and "OSError" in str(info.value)
