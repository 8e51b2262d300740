"""The per-test fixture (a fresh process's state, a private on-disk cache) and shared fixtures.

The shared helpers (bars, seeded data, the float64 reference, the relative error) are in
tests/support.py; their names stay importable from here for tests written before it."""

from __future__ import annotations

import os

#: torch's CPU thread pool is OpenMP (libgomp), whose idle threads spin for a while (GOMP_SPINCOUNT
#: turns) after each parallel region by default, holding their core. `make test` runs 2 pytest workers, each with torch's 2 threads, on
#: this project's 2-core machines: a spinning thread takes a core from the other worker. Measured
#: (loaded machine, pytest -n 0): tests/test_truncated.py 58.7 s with spinning, 15.7 s passive (its
#: two gradchecks 25.4 -> 2.7 s and 16.5 -> 1.2 s; six files, 1,250 tests: 266 -> 89 s, docs/user-guide.md
#: "Threads: one pool at a time"; as `make test` runs them, -n 2 --dist loadgroup --cov, test_stft, _real_nd,
#: _properties, _precision, _truncated and _autograd: 351 -> 147 s); the thread count (what plans and tests see) is
#: unchanged. Set before torch is imported (below, through support and trnplan): libgomp reads it
#: once, when it loads; child processes the tests start inherit it. A value the caller set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
#: `make test` runs 2 pytest workers on a 2-core machine: the run queue (trnplan.kernels.hostlib.occupancy)
#: shows the other worker runnable most of the time, so every measured plan would be "machine busy"
#: and every adaptive leaf's decision would follow the other worker. The tests of those rules give
#: fake run queues (tests/test_adaptive_threads.py, tests/test_measure.py) or read the real one
#: directly; everything else judges by times, as before the run queue was read.
os.environ.setdefault("TRNPLAN_RUN_QUEUE", "0")

import shutil
import tempfile
from pathlib import Path

import pytest
from support import BAR, DTYPES, random_complex, reference, rel_l2  # noqa: F401 - re-exported

from trnplan.backends import accel
from trnplan.core import state
from trnplan.kernels import hostlib

#: pyFFTW imported now, bound to its own FFTW, before any test's mkl_fft call makes MKL's FFTW3
#: wrappers global symbols (hostlib.fftw.import_pyfftw): a test's own ``import pyfftw`` after that
#: would bind to MKL, and trnplan would then refuse it (tests/test_fftw_is_fftw.py tests both)
hostlib.library_module("pyfftw")

#: process-wide variables a Neuron plan sets (accel.NO_FALLBACK, the --auto-cast=none flag), put back
#: after each test (the compile-cache ones by state.reset, through accel.reset_compile_cache)
PROCESS_ENV = (*accel.NO_FALLBACK, "NEURON_CC_FLAGS")


#: a RAM filesystem for the per-test default plan caches, used where it exists with this much room
RAM_DIR, RAM_FREE_BYTES = "/dev/shm", 2 << 30


@pytest.fixture(scope="session")
def _ram_cache_root():
    """A private folder on :data:`RAM_DIR` for the per-test default caches, removed at the end
    (None where there is none, or too little room: then they go under each test's tmp_path).

    Why: the default cache is opened by nearly every test (the precision probe's record, each plan's
    wisdom), and each is new, so each test creates a diskcache database. On this project's
    ext4 virtual disk that is ~70 ms of wall time per test spent waiting on SQLite's syncs (4.6 ms of
    CPU), against 3.3 ms on tmpfs; over ~4,900 tests ~40% of test_real_nd.py's time. The cache's
    behaviour under test is the same on either file system; the tests of disk-specific behaviour
    (read-only mounts, permissions, damaged files) make their caches under tmp_path themselves."""
    try:
        usable = os.path.isdir(RAM_DIR) and os.access(RAM_DIR, os.W_OK | os.X_OK) and \
            shutil.disk_usage(RAM_DIR).free >= RAM_FREE_BYTES
        root = tempfile.mkdtemp(prefix="trnplan-tests-", dir=RAM_DIR) if usable else None
    except OSError:
        root = None
    yield None if root is None else Path(root)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_plan_cache(request, monkeypatch, _ram_cache_root):
    """Every test starts from a fresh process's state (:func:`trnplan.core.state.reset`: the
    in-process plan cache, probes, host-library memos, settings made with ``set_*``, the compile
    cache variables, ...) and its own empty on-disk cache (on a RAM file system where there is
    one: :func:`_ram_cache_root`), so no test sees what another left behind, in any order, and
    nothing is written to the user's ~/.cache."""
    # tmp_path only where it is needed: pytest makes each one on disk (a directory and a symlink
    # update, ~2 ms each on the loaded machine), and most tests never ask for it
    own = None if _ram_cache_root is None else Path(tempfile.mkdtemp(dir=_ram_cache_root))
    monkeypatch.setenv("TRNPLAN_CACHE_DIR", str((own or request.getfixturevalue("tmp_path")) / "trnplan-cache"))
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
    if own is not None:  # RAM is not kept for a later look, as tmp_path is
        shutil.rmtree(own, ignore_errors=True)


def _duration_class(item) -> int:
    """0 for a test marked ``slow`` (seconds each: AOT builds, subprocesses, compiles), 1 otherwise.

    Why: xdist hands the workers tests in collection order, so a 20-40 s test collected late (the
    examples, the scipy peer suites, the spawned ranks) ran while the other worker had nothing
    left: the run's tail. Started first, the long tests overlap the ~5,000 short ones and the run
    ends on short tests on both workers (longest-first list scheduling). ``sort`` is stable, so
    file order holds within each class, and every worker computes the same order (xdist requires
    identical collections). Multi-test ``xdist_group`` units still go first (xdist's scope reorder)."""
    return 0 if item.get_closest_marker("slow") is not None else 1


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Make ``--dist loadgroup`` (``make test``) honour ``pytest.mark.xdist_group`` on pytest 9.2.

    pytest-xdist 3.8 groups a test by appending ``@group`` to ``item._nodeid`` on each worker;
    pytest 9.2 reads the node id from ``item._id`` (a structured NodeId), so the suffix is lost and
    the grouped tests are spread over the workers like any other: each worker then runs a
    module-scoped fixture those tests share (an AOT compile, a stand-in child process), paying it
    twice. pytest-dev/pytest-xdist#1386 (open), whose fix (#1388) sets the structured id the same
    way. Nothing happens where xdist's own suffix took effect (older pytest) or without loadgroup.
    On any xdist worker the tests marked slow are moved to the front first (:func:`_duration_class`)."""
    if hasattr(config, "workerinput"):  # an xdist worker (make test): the long tests first
        items.sort(key=_duration_class)
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
