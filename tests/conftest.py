"""The per-test fixture (a fresh process's state, a private on-disk cache) and shared fixtures.

The shared helpers (bars, seeded data, the float64 reference, the relative error) are in
tests/support.py; their names stay importable from here for tests written before it."""

from __future__ import annotations

import os

import pytest
from support import BAR, DTYPES, random_complex, reference, rel_l2  # noqa: F401 - re-exported

from trnplan.backends import accel
from trnplan.core import state

#: process-wide variables a Neuron plan sets (accel.NO_FALLBACK, the --auto-cast=none flag), put back
#: after each test (the compile-cache ones by state.reset, through accel.reset_compile_cache)
PROCESS_ENV = (*accel.NO_FALLBACK, "NEURON_CC_FLAGS")


@pytest.fixture(autouse=True)
def _fresh_plan_cache(tmp_path, monkeypatch):
    """Every test starts from a fresh process's state (:func:`trnplan.core.state.reset`: the
    in-process plan cache, probes, host-library memos, settings made with ``set_*``, the compile
    cache variables, ...) and its own empty on-disk cache, so no test sees what another left
    behind, in any order, and nothing is written to the user's ~/.cache."""
    monkeypatch.setenv("TRNPLAN_CACHE_DIR", str(tmp_path / "trnplan-cache"))
    monkeypatch.delenv("TRNPLAN_WISDOM_ONLY", raising=False)
    monkeypatch.delenv("TRNPLAN_TRUST_CACHE", raising=False)
    state.reset()
    env = {var: os.environ.get(var) for var in PROCESS_ENV}
    yield
    # a Neuron plan sets process-wide variables (the compile caches, no-fallback, --auto-cast=none)
    # at its first use; a later test, or a child process it starts, expects a fresh process's
    state.reset()
    for var, value in env.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Make ``--dist loadgroup`` (``make test``) honour ``pytest.mark.xdist_group`` on pytest 9.2.

    pytest-xdist 3.8 groups a test by appending ``@group`` to ``item._nodeid`` on each worker;
    pytest 9.2 reads the node id from ``item._id`` (a structured NodeId), so the suffix is lost and
    the grouped tests are spread over the workers like any other: each worker then runs a
    module-scoped fixture those tests share (an AOT compile, a stand-in child process), paying it
    twice. pytest-dev/pytest-xdist#1386 (open), whose fix (#1388) sets the structured id the same
    way. Nothing happens where xdist's own suffix took effect (older pytest) or without loadgroup."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist workers under --dist loadgroup
        return
    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = type(item._id).parse(f"{item.nodeid}@{'_'.join(names)}")


def exported_bundle_meta(tmp_path, shape=(64,)):
    """Precompile one plan, export it, and return (bundle path, its parsed bundle.json) for forging."""
    import json
    import zipfile

    from trnplan.cache import PlanCache
    from trnplan.cache.bundle import export_bundle
    from trnplan.tools.precompile import precompile

    src = PlanCache(tmp_path / "src")
    precompile([{"shape": list(shape)}], cache=src, progress=False)
    bundle = tmp_path / "b.zip"
    export_bundle(src, bundle)
    with zipfile.ZipFile(bundle) as zf:
        return bundle, json.loads(zf.read("bundle.json"))
