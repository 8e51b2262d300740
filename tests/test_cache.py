"""The on-disk plan cache: wisdom round trips, cross-process reuse, fingerprints, faults, trust,
concurrency and stats (trnplan.cache, trnplan.plan.provide, trnplan.backends.artifacts).

Every numeric check is against numpy.fft in complex128, within the engine's bar (conftest.BAR).
No timing assertions anywhere: load times are printed (``pytest -s``), never asserted.

AOT COMPILES ARE EXPENSIVE (10–40 s each on a 2-core CPU). This file does exactly one: the module
fixture ``aot_cache`` (process A of the cross-process AOT test; n=64, batch 4), whose cache
directory is then reused, copied, by every ``test_aot_*`` test; where a test needs a build (the
rebuild after tampering, a fresh package's load check), process A's real package stands in for it.
Every other test plans eagerly. The tests that need an AOT artifact are all named ``test_aot_*``
and marked slow (deselect them with ``-k "not aot"`` or ``-m "not slow"``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import pathlib
import pickle
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings

import diskcache
import numpy as np
import pytest
import torch
from support import BAR, random_complex, reference, rel_l2

import trnplan
from trnplan.cache import (
    CacheWarning,
    PlanCache,
    UntrustedCacheError,
    default_cache,
    fingerprint,
    fingerprint_digest,
    set_default_cache,
)
from trnplan.core.errors import TrnplanError, WisdomMiss

STATS_KEYS = {"wisdom_hits", "wisdom_misses", "artifact_hits", "compiles", "compile_seconds",
              "compile_seconds_saved", "wisdom_entries", "artifact_entries", "bytes", "path", "size_limit"}


# ---------------------------------------------------------------------- helpers
def c64(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x).to(torch.complex64)


def assert_correct(plan, n: int, batch: int, inverse: bool = False, seed: int = 0) -> None:
    x = random_complex((batch, n), seed=seed)
    err = rel_l2(plan.execute(c64(x)), reference(x, inverse))
    assert err <= BAR["fp32"], f"relative L2 {err:.2e} for {plan.problem.describe()}"


def only_records(cache: PlanCache) -> list[dict]:
    return [rec for _, rec in cache.records()]


@contextlib.contextmanager
def no_cache_warnings():
    """Any CacheWarning inside fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        yield


class PickleBomb:
    """Unpickling this creates ``marker``: proof that something was unpickled."""

    def __init__(self, marker: pathlib.Path):
        self.marker = marker

    def __reduce__(self):
        return pathlib.Path.touch, (pathlib.Path(self.marker),)


# subprocess helpers: the child writes its results as JSON to stdout's last line, and its outputs
# as .npy files, so that the reference check runs here against numpy.fft complex128
_PRELUDE = """
import json, os, sys, time
import numpy as np, torch, trnplan
from trnplan.core.errors import WisdomMiss

def rnd(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)

def run(plan, x):
    return plan.execute(torch.from_numpy(x).to(torch.complex64)).numpy()

def done(**result):
    print("RESULT " + json.dumps(result, default=str))

OUT = os.environ["TEST_OUT"]
"""


def child_env(cache_dir, out_dir, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRNPLAN_")}
    env.update(TRNPLAN_CACHE_DIR=str(cache_dir), TEST_OUT=str(out_dir), OMP_NUM_THREADS="1", **extra)
    return env


def run_child(code: str, cache_dir, out_dir, timeout: float = 180, **extra) -> dict:
    pathlib.Path(out_dir).mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", _PRELUDE + textwrap.dedent(code)],
                          env=child_env(cache_dir, out_dir, **extra), capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, f"child failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"child printed no result:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    result = json.loads(lines[-1][len("RESULT "):])
    result["_stderr"] = proc.stderr
    return result


# ====================================================================== 1. wisdom round trip
def test_wisdom_round_trip_in_process(tmp_path):
    cache = PlanCache(tmp_path / "c")
    first = trnplan.plan_many(64, batch=4, cache=cache)
    assert first.provenance.origin == "planned now"
    assert first.provenance.artifact is None and first.provenance.compile_mode == "eager"
    assert_correct(first, 64, 4)

    (key, record), = cache.records()
    assert first.provenance.wisdom_key == key
    problem = first.problem
    assert key.startswith(f"wisdom:{problem.digest()}:{fingerprint_digest(fingerprint('cpu'))}:")
    assert record["format"] == 1
    assert record["problem"] == problem.to_dict()
    assert record["fingerprint"] == fingerprint("cpu")
    assert record["tree"] == first.tree.to_dict()
    assert record["strategy"] is None and record["tol"] == 5e-7 and record["artifacts"] == {}  # the resolved bound
    json.dumps(record)  # plain JSON, nothing else
    assert "stored as " + key in first.explain(full=True)

    trnplan.clear_plan_cache()
    again = trnplan.plan_many(64, batch=4, cache=cache)
    assert again is not first
    assert again.provenance.origin == "wisdom hit"
    assert again.provenance.wisdom_key == key
    assert again.provenance.searches == 0
    assert str(again.tree) == str(first.tree)
    text = again.explain(full=True)
    assert "wisdom hit" in text and key in text and str(cache.path) in text
    assert_correct(again, 64, 4, seed=1)
    assert len(cache.records()) == 1  # a hit writes no new record

    # the in-process LRU still comes first: same object, no disk lookup counted
    hits = cache.stats()["wisdom_hits"]
    assert trnplan.plan_many(64, batch=4, cache=cache) is again
    assert cache.stats()["wisdom_hits"] == hits


def test_cache_none_bypasses_the_disk(tmp_path):
    default_dir = pathlib.Path(os.environ["TRNPLAN_CACHE_DIR"])
    plan = trnplan.plan_many(64, batch=4, cache=None)
    assert plan.provenance.origin == "planned now"
    assert plan.provenance.cache_path is None and plan.provenance.wisdom_key is None
    assert "(no plan cache)" in plan.explain(full=True)
    assert_correct(plan, 64, 4)
    assert not default_dir.exists()  # nothing written anywhere
    # a later cached plan of the same problem does not see anything from it
    cache = PlanCache(tmp_path / "c")
    assert trnplan.plan_many(64, batch=4, cache=cache).provenance.origin == "planned now"
    assert len(cache.records()) == 1


def test_default_cache_follows_env_and_set_default_cache(tmp_path):
    default_dir = pathlib.Path(os.environ["TRNPLAN_CACHE_DIR"])
    plan = trnplan.plan_many(32, batch=2)
    assert plan.provenance.cache_path == str(default_dir)
    assert default_cache().path == default_dir
    assert len(default_cache().records()) == 1
    other = PlanCache(tmp_path / "other")
    try:
        set_default_cache(other)
        assert default_cache() is other
        trnplan.clear_plan_cache()
        assert trnplan.plan_many(32, batch=2).provenance.cache_path == str(other.path)
        assert len(other.records()) == 1
        set_default_cache(None)
        trnplan.clear_plan_cache()
        assert trnplan.plan_many(32, batch=2).provenance.cache_path is None
        with pytest.raises(TypeError, match="PlanCache"):
            set_default_cache(str(tmp_path))
    finally:
        set_default_cache("env")
    assert default_cache().path == default_dir
    with pytest.raises(TypeError, match="cache must be a trnplan.cache.PlanCache or None"):
        trnplan.plan_many(32, batch=2, cache=str(tmp_path))


def test_strategy_and_tol_variants_are_separate_entries(tmp_path):
    cache = PlanCache(tmp_path / "c")
    plain = trnplan.plan_many(64, batch=4, cache=cache)
    forced = trnplan.plan_many(64, batch=4, cache=cache, strategy="stockham")
    loose = trnplan.plan_many(64, batch=4, cache=cache, tol=1e-4)
    keys = {plain.provenance.wisdom_key, forced.provenance.wisdom_key, loose.provenance.wisdom_key}
    assert len(keys) == 3
    records = dict(cache.records())
    assert set(records) == keys
    assert len({k.rsplit(":", 1)[0] for k in keys}) == 1  # same problem, same fingerprint
    assert records[forced.provenance.wisdom_key]["strategy"] == "stockham"
    assert records[forced.provenance.wisdom_key]["tree"]["solver"] == "stockham"
    assert records[loose.provenance.wisdom_key]["tol"] == 1e-4

    trnplan.clear_plan_cache()
    hit = trnplan.plan_many(64, batch=4, cache=cache, strategy="stockham")
    assert hit.provenance.origin == "wisdom hit" and str(hit.tree) == str(forced.tree)
    assert_correct(hit, 64, 4)
    assert trnplan.plan_many(64, batch=4, cache=cache, tol=1e-4).provenance.origin == "wisdom hit"
    # another direction is another problem
    inv = trnplan.plan_many(64, batch=4, cache=cache, inverse=True)
    assert inv.provenance.origin == "planned now"
    assert_correct(inv, 64, 4, inverse=True)
    assert len(cache.records()) == 4


def test_explain_candidates_after_wisdom_hit_match_planned_now(tmp_path):
    cache = PlanCache(tmp_path / "c")
    first = trnplan.plan_many(64, batch=4, cache=cache)
    trnplan.clear_plan_cache()
    again = trnplan.plan_many(64, batch=4, cache=cache)
    assert again.provenance.origin == "wisdom hit"

    def candidates(text):
        return text.split("candidates at the top level", 1)[1]

    assert f"cheapest predicted: {first.tree}" in candidates(first.explain(full=True))
    assert candidates(again.explain(full=True)) == candidates(first.explain(full=True))


# ====================================================================== 2. cross-process
@pytest.mark.slow
def test_cross_process_wisdom_and_wisdom_only(tmp_path):
    cache_dir, out = tmp_path / "shared-cache", tmp_path / "out"
    # process A plans (eagerly) and exits
    a = run_child("""
        plan = trnplan.plan_many(96, batch=3)
        np.save(os.path.join(OUT, "a.npy"), run(plan, rnd((3, 96), 0)))
        done(origin=plan.provenance.origin, key=plan.provenance.wisdom_key, tree=str(plan.tree))
    """, cache_dir, out)
    assert a["origin"] == "planned now"
    x = random_complex((3, 96), seed=0)
    assert rel_l2(np.load(out / "a.npy"), reference(x, False)) <= BAR["fp32"]

    # process B, TRNPLAN_WISDOM_ONLY=1: a wisdom hit, no planning, correct output
    b = run_child("""
        plan = trnplan.plan_many(96, batch=3)
        np.save(os.path.join(OUT, "b.npy"), run(plan, rnd((3, 96), 0)))
        done(origin=plan.provenance.origin, key=plan.provenance.wisdom_key, tree=str(plan.tree),
             searches=plan.provenance.searches, explain=plan.explain(full=True))
    """, cache_dir, out, TRNPLAN_WISDOM_ONLY="1")
    assert b["origin"] == "wisdom hit" and b["searches"] == 0
    assert b["key"] == a["key"] and b["tree"] == a["tree"]
    assert "wisdom hit" in b["explain"]
    assert "CacheWarning" not in b["_stderr"]
    assert rel_l2(np.load(out / "b.npy"), reference(x, False)) <= BAR["fp32"]

    # process C, wisdom_only for a problem nobody planned: WisdomMiss with a useful message
    c = run_child("""
        try:
            trnplan.plan_many(128, batch=5)
        except WisdomMiss as exc:
            done(raised=type(exc).__name__, message=str(exc))
        else:
            done(raised=None)
    """, cache_dir, out, TRNPLAN_WISDOM_ONLY="1")
    assert c["raised"] == "WisdomMiss"
    msg = c["message"]
    assert "(128,)" in msg and "batch 5" in msg
    assert str(cache_dir) in msg
    assert "no entry for this problem" in msg
    assert "precompile" in msg.lower() and "effort='estimate'" in msg

    stats = PlanCache(cache_dir).stats()
    assert stats["wisdom_entries"] == 1
    assert stats["wisdom_hits"] == 1 and stats["wisdom_misses"] == 2


def test_wisdom_only_in_process_forms(tmp_path, monkeypatch):
    cache = PlanCache(tmp_path / "c")
    with pytest.raises(WisdomMiss, match=r"no stored plan for c2c forward \(64,\) × batch 4") as info:
        trnplan.plan_many(64, batch=4, cache=cache, effort="wisdom_only")
    assert str(cache.path) in str(info.value)
    assert isinstance(info.value, LookupError) and isinstance(info.value, TrnplanError)
    with pytest.raises(WisdomMiss, match=r"no plan cache \(cache=None\)"):
        trnplan.plan_many(64, batch=4, cache=None, effort="wisdom_only")
    trnplan.plan_many(64, batch=4, cache=cache)
    trnplan.clear_plan_cache()
    monkeypatch.setenv("TRNPLAN_WISDOM_ONLY", "1")
    hit = trnplan.plan_many(64, batch=4, cache=cache)
    assert hit.provenance.origin == "wisdom hit"
    assert_correct(hit, 64, 4)
    with pytest.raises(WisdomMiss):
        trnplan.plan_many(64, batch=4, cache=cache, strategy="stockham")  # another variant
    monkeypatch.setenv("TRNPLAN_WISDOM_ONLY", "yes")
    trnplan.clear_plan_cache()
    with pytest.raises(ValueError, match="TRNPLAN_WISDOM_ONLY='yes' must be 0 or 1"):
        trnplan.plan_many(64, batch=4, cache=cache)


# ---------------------------------------------------------------------- AOT (expensive)
#: the tests of the module-scoped `aot_cache` fixture, on one pytest-xdist worker (`make test` runs
#: --dist loadgroup): split over two workers, each ran the fixture, paying its cost twice
ONE_WORKER = pytest.mark.xdist_group("aot_cache")


@pytest.fixture(scope="module")
def aot_cache(tmp_path_factory):
    """AOT COMPILE #1 (~20 s): process A plans n=64 batch 4 with compile="aot" and exits.

    Returns the cache directory (do not modify it: copy it) and A's result."""
    root = tmp_path_factory.mktemp("aot")
    cache_dir, out = root / "cache", root / "out"
    t0 = time.perf_counter()
    result = run_child("""
        plan = trnplan.plan_many(64, batch=4, compile="aot")
        pv = plan.provenance
        np.save(os.path.join(OUT, "a.npy"), run(plan, rnd((4, 64), 0)))
        done(origin=pv.origin, artifact=pv.artifact, mode=pv.compile_mode, compile_s=pv.compile_s,
             dynamic=pv.dynamic_batch, key=pv.artifact_key, bytes=pv.artifact_bytes,
             runner=type(plan._runner).__name__)
    """, cache_dir, out, timeout=300)
    print(f"\n[aot_cache] process A compiled in {result['compile_s']:.1f} s "
          f"(whole process {time.perf_counter() - t0:.1f} s)")
    return {"dir": cache_dir, "out": out, "a": result}


def _copy_cache(aot_cache, dest) -> pathlib.Path:
    shutil.copytree(aot_cache["dir"], dest)
    return pathlib.Path(dest)


@ONE_WORKER
@pytest.mark.slow
def test_aot_cross_process_artifact_hit(aot_cache, tmp_path):
    a = aot_cache["a"]
    assert a["origin"] == "planned now" and a["artifact"] == "compiled now" and a["mode"] == "aot"
    assert a["runner"] == "AOTRunner" and a["compile_s"] > 0 and a["bytes"] > 0
    # the plan module exports with a dynamic batch on torch 2.13: a static artifact here is a
    # regression (the varargs forward once made every export fall back to static)
    assert a["dynamic"] is True
    x = random_complex((4, 64), seed=0)
    assert rel_l2(np.load(aot_cache["out"] / "a.npy"), reference(x, False)) <= BAR["fp32"]

    cache_dir = _copy_cache(aot_cache, tmp_path / "cache")
    out = tmp_path / "out"
    # process B: wisdom_only, compile="aot" -> loads the artifact, never compiles
    b = run_child("""
        t0 = time.perf_counter()
        plan = trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only")
        load_s = time.perf_counter() - t0
        pv = plan.provenance
        np.save(os.path.join(OUT, "b.npy"), run(plan, rnd((4, 64), 0)))
        if pv.dynamic_batch:  # the artifact itself, on a batch other than the one it was traced at
            x7 = torch.from_numpy(rnd((7, 64), 3)).to(torch.complex64)
            yr, yi = plan._runner(x7.real.contiguous(), x7.imag.contiguous())  # returns a tuple
            np.save(os.path.join(OUT, "b7.npy"), torch.complex(yr, yi).numpy())
        stats = trnplan.cache.default_cache().stats()
        done(origin=pv.origin, artifact=pv.artifact, mode=pv.compile_mode, compile_s=pv.compile_s,
             dynamic=pv.dynamic_batch, key=pv.artifact_key, load_s=load_s, load_ms=pv.load_ms,
             runner=type(plan._runner).__name__, explain=plan.explain(full=True), stats=stats)
    """, cache_dir, out)
    print(f"\n[aot] process B: plan_many(wisdom_only, compile='aot') took {b['load_s'] * 1e3:.1f} ms "
          f"(artifact load {b['load_ms']:.1f} ms) vs {a['compile_s']:.1f} s to compile in A")
    assert b["origin"] == "wisdom hit" and b["artifact"] == "artifact hit" and b["mode"] == "aot"
    assert b["runner"] == "AOTRunner" and b["key"] == a["key"]
    assert "CacheWarning" not in b["_stderr"]
    assert b["compile_s"] == pytest.approx(a["compile_s"]) and b["compile_s"] > 0
    assert "no compile" in b["explain"] and "of compile saved" in b["explain"]
    assert b["stats"]["artifact_hits"] == 1 and b["stats"]["compiles"] == 1
    assert b["stats"]["compile_seconds_saved"] == pytest.approx(a["compile_s"])
    assert b["stats"]["artifact_entries"] == 1
    assert rel_l2(np.load(out / "b.npy"), reference(x, False)) <= BAR["fp32"]
    assert b["dynamic"] == a["dynamic"]
    if b["dynamic"]:
        x7 = random_complex((7, 64), seed=3)
        assert rel_l2(np.load(out / "b7.npy"), reference(x7, False)) <= BAR["fp32"]
    else:
        print("[aot] the artifact's batch is static: the batch-7 check was skipped")


@ONE_WORKER
@pytest.mark.slow
def test_aot_warm_start_leaves_nothing_in_the_temp_dir(aot_cache, tmp_path):
    """AOTInductor's loader extracted each package (1.5 MB here) into a temp folder of its own and
    kept it; a process that did not tear its plans down (killed, os._exit) left it behind (issue
    34). No compile: process A's artifact, loaded in a child whose TMPDIR is watched."""
    cache_dir = _copy_cache(aot_cache, tmp_path / "cache")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    b = run_child("""
        plan = trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only")
        np.save(os.path.join(OUT, "b.npy"), run(plan, rnd((4, 64), 0)))
        done(artifact=plan.provenance.artifact, runner=type(plan._runner).__name__)
        sys.stdout.flush()
        os._exit(0)  # no teardown: what a killed process leaves
    """, cache_dir, tmp_path / "out", TMPDIR=str(tmp))
    assert b["artifact"] == "artifact hit" and b["runner"] == "AOTRunner"
    assert [p for p in tmp.rglob("*") if not p.is_dir()] == []
    x = random_complex((4, 64), seed=0)
    assert rel_l2(np.load(tmp_path / "out" / "b.npy"), reference(x, False)) <= BAR["fp32"]


@ONE_WORKER
@pytest.mark.slow
def test_aot_untrusted_dir_refuses_artifact(aot_cache, tmp_path, monkeypatch):
    """No compile: loads process A's artifact from a world-writable copy."""
    cache_dir = _copy_cache(aot_cache, tmp_path / "cache")
    cache_dir.chmod(0o777)
    with pytest.raises(UntrustedCacheError, match="TRNPLAN_TRUST_CACHE") as info, \
            pytest.warns(CacheWarning, match="its plans are used .*its artifacts are refused"):
        trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only", cache=PlanCache(cache_dir))
    assert "drwxrwxrwx" in str(info.value) and "other users" in str(info.value)
    # wisdom is data, not code: an eager plan from the same directory is fine
    eager = trnplan.plan_many(64, batch=4, effort="wisdom_only", cache=PlanCache(cache_dir))
    assert eager.provenance.origin == "wisdom hit" and eager.provenance.artifact is None
    assert_correct(eager, 64, 4)
    monkeypatch.setenv("TRNPLAN_TRUST_CACHE", "1")
    plan = trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only", cache=PlanCache(cache_dir))
    assert plan.provenance.artifact == "artifact hit"
    assert type(plan._runner).__name__ == "AOTRunner"
    assert_correct(plan, 64, 4)


@ONE_WORKER
@pytest.mark.slow
def test_aot_tampered_artifact_is_rejected_and_rebuilt(aot_cache, tmp_path, monkeypatch):
    """No compile: the rebuild after a tampered artifact is stood in for by process A's real
    package (the compile itself is the aot_cache fixture's), so what is checked is trnplan's part:
    the damaged artifact is rejected, one build is asked for, and what it returns is stored, loads
    and runs."""
    from trnplan.backends import get_backend

    def tampered_copy(name):
        cache_dir = _copy_cache(aot_cache, tmp_path / name)
        vals = list(cache_dir.rglob("*.val"))  # diskcache keeps large values as files
        assert len(vals) == 1, vals
        data = bytearray(vals[0].read_bytes())
        data[len(data) // 2] ^= 0xFF
        vals[0].write_bytes(bytes(data))
        return cache_dir

    # wisdom_only cannot rebuild: a warning, then a WisdomMiss naming the damaged artifact
    cache = PlanCache(tampered_copy("c1"))
    with pytest.warns(CacheWarning, match="does not match the sha256"), \
            pytest.raises(WisdomMiss, match="artifact .* is missing or damaged"):
        trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only", cache=cache)

    # allowed to compile: rejected (warning), rebuilt once, stored, correct
    package = _stored_package(aot_cache, tmp_path)
    builds = []
    monkeypatch.setattr(get_backend("cpu"), "build_artifact",
                        lambda module, example, mode: builds.append(mode) or (package, {"dynamic_batch": True}))
    cache = PlanCache(tampered_copy("c2"))
    with pytest.warns(CacheWarning, match="does not match the sha256.*rejecting it and rebuilding"):
        plan = trnplan.plan_many(64, batch=4, compile="aot", cache=cache)
    assert builds == ["aot"]
    assert plan.provenance.origin == "wisdom hit" and plan.provenance.artifact == "compiled now"
    assert_correct(plan, 64, 4)
    entry = only_records(cache)[0]["artifacts"]["aot"]
    assert entry["sha256"] == hashlib.sha256(package).hexdigest()  # the rebuilt bytes, not the damaged ones
    assert cache.get_artifact(entry["key"], entry["sha256"]) == package
    assert cache.stats()["artifact_entries"] == 1
    trnplan.clear_plan_cache()
    with no_cache_warnings():
        again = trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only", cache=cache)
    assert again.provenance.artifact == "artifact hit" and builds == ["aot"]
    assert_correct(again, 64, 4, seed=2)


def _counting_load_check(monkeypatch):
    """Wrap artifacts.load_check and count its calls."""
    from trnplan.backends import artifacts

    calls = []
    real = artifacts.load_check

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(artifacts, "load_check", counted)
    return calls


def _crash_at_load(monkeypatch):
    """Make the load check's child process die of SIGSEGV in the package loader's constructor, as
    every CUDA package did on the H200: the real child, with a loader that kills its process."""
    from trnplan.backends import artifacts

    real = artifacts.load_check_command
    crash = ("import os, signal, torch\n"
             "torch._C._aoti.AOTIModelPackageLoader = lambda *args: os.kill(os.getpid(), signal.SIGSEGV)\n")

    def crashing(path, device, example):
        command = real(path, device, example)
        assert command[1] == "-c"
        return [command[0], "-c", crash + command[2], *command[3:]]

    monkeypatch.setattr(artifacts, "load_check_command", crashing)


@pytest.mark.slow
def test_aot_load_check_reports_a_package_that_does_not_load(tmp_path):
    """The real child on bytes that are no package: an error at load, named, and no crash here."""
    from trnplan.backends import artifacts

    example = artifacts.example_inputs(4, 64, torch.float32, torch.device("cpu"))
    why = artifacts.load_check(b"not a .pt2 package", torch.device("cpu"), example)
    assert why is not None and "exited with status 1 while loading the package" in why, why


def _stored_package(aot_cache, tmp_path) -> bytes:
    """Process A's AOT package bytes (the real package of n=64 batch 4), read from a copy of its cache."""
    cache = PlanCache(_copy_cache(aot_cache, tmp_path / "source"))
    entry = only_records(cache)[0]["artifacts"]["aot"]
    return cache.get_artifact(entry["key"], entry["sha256"])


@ONE_WORKER
@pytest.mark.slow
def test_aot_load_check_loads_a_real_package_in_a_child_once(aot_cache, tmp_path, monkeypatch):
    """No compile: process A's stored package is loaded and run by a child process first, then here."""
    cache_dir = _copy_cache(aot_cache, tmp_path / "cache")
    monkeypatch.setenv("TRNPLAN_AOT_LOAD_CHECK", "1")
    calls = _counting_load_check(monkeypatch)
    trnplan.clear_plan_cache()
    with no_cache_warnings():
        plan = trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only", cache=PlanCache(cache_dir))
    pv = plan.provenance
    assert len(calls) == 1 and pv.artifact == "artifact hit" and pv.load_check_s > 0
    assert type(plan._runner).__name__ == "AOTRunner"
    assert "loaded first in a child process" in plan.explain(full=True)
    assert_correct(plan, 64, 4)
    assert only_records(PlanCache(cache_dir))[0]["artifacts"]["aot"]["load_check"] == "ok"
    # the plan cache remembers that it loaded: no second child
    trnplan.clear_plan_cache()
    again = trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only", cache=PlanCache(cache_dir))
    assert len(calls) == 1 and again.provenance.artifact == "artifact hit" and again.provenance.load_check_s == 0
    assert_correct(again, 64, 4, seed=1)


@ONE_WORKER
@pytest.mark.slow
def test_aot_load_check_a_fresh_package_is_checked_before_it_is_stored(aot_cache, tmp_path, monkeypatch):
    """The build is stood in for by process A's real package: checked by a child, then stored with the mark."""
    from trnplan.backends import get_backend

    package = _stored_package(aot_cache, tmp_path)
    monkeypatch.setattr(get_backend("cpu"), "build_artifact",
                        lambda module, example, mode: (package, {"dynamic_batch": True}))
    monkeypatch.setenv("TRNPLAN_AOT_LOAD_CHECK", "1")
    calls = _counting_load_check(monkeypatch)
    cache = PlanCache(tmp_path / "fresh")
    trnplan.clear_plan_cache()
    plan = trnplan.plan_many(64, batch=4, compile="aot", cache=cache)
    assert len(calls) == 1 and plan.provenance.artifact == "compiled now"
    assert_correct(plan, 64, 4)
    assert only_records(cache)[0]["artifacts"]["aot"]["load_check"] == "ok"
    assert cache.stats()["artifact_entries"] == 1

    # the same with a child that crashes: nothing of the artifact is stored, the plan runs eagerly
    _crash_at_load(monkeypatch)
    cache = PlanCache(tmp_path / "crashing")
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match=r"did not load on this machine: the child process loading it was "
                                          r"killed by SIGSEGV while loading the package.*running .* eagerly"):
        plan = trnplan.plan_many(64, batch=4, compile="aot", cache=cache)
    pv = plan.provenance
    assert pv.compile_mode == "eager" and pv.artifact is None and plan._runner is None
    assert "killed by SIGSEGV" in plan.explain(full=True)
    assert_correct(plan, 64, 4)
    assert only_records(cache)[0]["artifacts"] == {} and cache.stats()["artifact_entries"] == 0


@ONE_WORKER
@pytest.mark.slow
def test_aot_load_check_a_crash_is_remembered_per_fingerprint(aot_cache, tmp_path, monkeypatch):
    """No compile. A stored artifact whose child crashes: eager, and later aot plans build nothing."""
    from trnplan.backends import get_backend
    from trnplan.plan import artifact

    cache_dir = _copy_cache(aot_cache, tmp_path / "cache")
    monkeypatch.setattr(artifact, "_FAILED_LOAD_CHECKS", {})
    monkeypatch.setenv("TRNPLAN_AOT_LOAD_CHECK", "1")
    _crash_at_load(monkeypatch)
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match="killed by SIGSEGV"):
        plan = trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only", cache=PlanCache(cache_dir))
    assert plan.provenance.compile_mode == "eager" and plan._runner is None
    assert_correct(plan, 64, 4)
    # the stored artifact is left as it is (it may be what another torch or driver loads)
    assert PlanCache(cache_dir).stats()["artifact_entries"] == 1

    # as on CUDA, where the backend asks for the check: a new problem is not even built
    monkeypatch.setenv("TRNPLAN_AOT_LOAD_CHECK", "auto")
    backend = get_backend("cpu")
    monkeypatch.setattr(backend, "load_check_artifacts", True)

    def no_build(*args):
        raise AssertionError("built an artifact that is known not to load")

    monkeypatch.setattr(backend, "build_artifact", no_build)
    monkeypatch.setattr(artifact, "_FAILED_LOAD_CHECKS", {})  # a new process: the plan cache remembers
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match=r"aot artifacts crash at load on this machine \(the child process "
                                          r"loading it was killed by SIGSEGV.*TRNPLAN_AOT_LOAD_CHECK=1 checks again"):
        other = trnplan.plan_many(32, batch=4, compile="aot", cache=PlanCache(cache_dir))
    assert other.provenance.compile_mode == "eager" and "crash at load" in other.explain(full=True)
    assert_correct(other, 32, 4)

    # TRNPLAN_AOT_LOAD_CHECK=0: the user takes the risk; the package loads here (it does on the CPU)
    monkeypatch.setenv("TRNPLAN_AOT_LOAD_CHECK", "0")
    trnplan.clear_plan_cache()
    with no_cache_warnings():
        risky = trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only", cache=PlanCache(cache_dir))
    assert risky.provenance.artifact == "artifact hit" and type(risky._runner).__name__ == "AOTRunner"
    assert_correct(risky, 64, 4)


def test_aot_load_check_setting_is_validated(monkeypatch, tmp_path):
    monkeypatch.setenv("TRNPLAN_AOT_LOAD_CHECK", "yes")
    trnplan.clear_plan_cache()
    with pytest.raises(ValueError, match="TRNPLAN_AOT_LOAD_CHECK='yes' must be one of auto, 0, 1"):
        trnplan.plan_many(64, batch=4, compile="aot", cache=PlanCache(tmp_path / "c"))


# ====================================================================== 3. fingerprint change
def test_fingerprint_change_is_reported(tmp_path):
    cache = PlanCache(tmp_path / "c")
    plan = trnplan.plan_many(64, batch=4, cache=cache)
    (key, record), = cache.records()
    here = record["fingerprint"]["torch"]
    assert here == torch.__version__
    record["fingerprint"]["torch"] = "2.0.0"
    _, pdigest, _, variant = key.split(":")
    stale_key = f"wisdom:{pdigest}:{fingerprint_digest(record['fingerprint'])}:{variant}"
    assert stale_key != key
    cache.clear()
    cache.add_wisdom(stale_key, record)
    assert [k for k, _ in cache.records()] == [stale_key]
    trnplan.clear_plan_cache()
    field = f"torch: 2.0.0 (stored) vs {here} (here)"

    # wisdom_only: the miss names the differing field
    with pytest.raises(WisdomMiss) as info:
        trnplan.plan_many(64, batch=4, cache=cache, effort="wisdom_only")
    assert field in str(info.value) and "another fingerprint" in str(info.value)

    # otherwise: a warning naming it, a re-plan, and a note in explain()
    with pytest.warns(CacheWarning, match="another fingerprint") as caught:
        replanned = trnplan.plan_many(64, batch=4, cache=cache)
    assert any(field in str(w.message) for w in caught)
    assert caught[0].filename == __file__  # the warning points at the caller
    assert replanned.provenance.origin == "planned now"
    assert field in replanned.provenance.fingerprint_note
    text = replanned.explain(full=True)
    assert "note" in text and field in text
    assert str(replanned.tree) == str(plan.tree)
    assert_correct(replanned, 64, 4)

    # the fresh record sits beside the stale one; the next lookup hits it silently
    assert sorted(k for k, _ in cache.records()) == sorted([stale_key, key])
    trnplan.clear_plan_cache()
    with no_cache_warnings():
        hit = trnplan.plan_many(64, batch=4, cache=cache)
    assert hit.provenance.origin == "wisdom hit" and hit.provenance.fingerprint_note is None


# ====================================================================== 4. faults
def test_garbled_json_wisdom_is_forgotten(tmp_path):
    cache = PlanCache(tmp_path / "c")
    key = trnplan.plan_many(64, batch=4, cache=cache).provenance.wisdom_key
    with diskcache.Cache(str(cache.path)) as raw:  # a plain str value: stored raw, not pickled
        raw.set(key, '{"format": 1, "problem": {"shape": [64')
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match="is not a valid record; forgetting it and re-planning"):
        plan = trnplan.plan_many(64, batch=4, cache=cache)
    assert plan.provenance.origin == "planned now"
    assert_correct(plan, 64, 4)
    (k, rec), = cache.records()  # re-stored, valid
    assert k == key and rec["tree"] == plan.tree.to_dict()


@pytest.mark.parametrize("value", ["[1, 2, 3]", '{"format": 99, "problem": {}, "fingerprint": {}, "tree": {}}',
                                   "", "null"])
def test_valid_json_that_is_not_a_record_is_forgotten(tmp_path, value):
    cache = PlanCache(tmp_path / "c")
    key = trnplan.plan_many(32, batch=2, cache=cache).provenance.wisdom_key
    with diskcache.Cache(str(cache.path)) as raw:
        raw.set(key, value)
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match="not a valid record"):
        plan = trnplan.plan_many(32, batch=2, cache=cache)
    assert plan.provenance.origin == "planned now"
    assert_correct(plan, 32, 2)


def test_wisdom_naming_an_unknown_solver_is_forgotten(tmp_path):
    cache = PlanCache(tmp_path / "c")
    first = trnplan.plan_many(64, batch=4, cache=cache)
    (key, record), = cache.records()
    record["tree"]["solver"] = "no-such-solver"
    cache.update_wisdom(key, record)
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match="does not describe a valid plan.*no-such-solver.*re-planning"):
        plan = trnplan.plan_many(64, batch=4, cache=cache)
    assert plan.provenance.origin == "planned now"
    assert str(plan.tree) == str(first.tree)
    assert_correct(plan, 64, 4)
    (k, rec), = cache.records()
    assert k == key and rec["tree"]["solver"] == first.tree.solver


def plan_recording_warnings(*args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = trnplan.plan_many(*args, **kwargs)
    return plan, caught


def _tamper_tree(cache, key, edit):
    record = dict(cache.records())[key]
    edit(record)
    cache.update_wisdom(key, record)
    trnplan.clear_plan_cache()


# Wisdom that parses and lowers but does not describe the problem under its key. provide() only
# checks that the tree lowers, so these are trusted; the documented rule is "bogus wisdom is
# forgotten and re-planned, never trusted". Expected: a CacheWarning, a re-plan, a correct result.
def test_wisdom_tree_for_another_problem_is_forgotten(tmp_path):
    cache = PlanCache(tmp_path / "c")
    small = trnplan.plan_many(64, batch=4, cache=cache)
    key = trnplan.plan_many(128, batch=4, cache=cache).provenance.wisdom_key
    small_tree = dict(cache.records())[small.provenance.wisdom_key]["tree"]
    _tamper_tree(cache, key, lambda r: r.update(tree=small_tree))
    plan, caught = plan_recording_warnings(128, batch=4, cache=cache)
    try:
        assert_correct(plan, 128, 4)
    except RuntimeError as exc:  # the crash the bug causes: a plain failure, not an error
        pytest.fail(f"execute() crashed: {exc}")
    assert any(issubclass(w.category, CacheWarning) for w in caught)
    assert plan.tree.n == 128


def test_wisdom_tree_with_flipped_direction_is_forgotten(tmp_path):
    cache = PlanCache(tmp_path / "c")
    key = trnplan.plan_many(64, batch=4, cache=cache).provenance.wisdom_key
    _tamper_tree(cache, key, lambda r: r["tree"].update(inverse=True))
    plan, caught = plan_recording_warnings(64, batch=4, cache=cache)
    assert_correct(plan, 64, 4)
    assert any(issubclass(w.category, CacheWarning) for w in caught)


def test_wisdom_tree_with_invalid_params_is_forgotten(tmp_path):
    cache = PlanCache(tmp_path / "c")
    key = trnplan.plan_many(64, batch=4, cache=cache, strategy="stockham").provenance.wisdom_key
    _tamper_tree(cache, key, lambda r: r["tree"]["params"].update(factors=[4, 4]))
    plan, caught = plan_recording_warnings(64, batch=4, cache=cache, strategy="stockham")
    assert_correct(plan, 64, 4)
    assert any(issubclass(w.category, CacheWarning) for w in caught)


@pytest.mark.parametrize("field, value", [("candidates", "junk"), ("candidates", [1]),
                                          ("candidates", [{"solver": "native"}]), ("artifacts", "junk"),
                                          ("artifacts", None)])
def test_wisdom_with_garbled_optional_fields_does_not_crash(tmp_path, field, value):
    cache = PlanCache(tmp_path / "c")
    key = trnplan.plan_many(64, batch=4, cache=cache).provenance.wisdom_key
    _tamper_tree(cache, key, lambda r: r.update({field: value}))
    plan, caught = plan_recording_warnings(64, batch=4, cache=cache)
    assert_correct(plan, 64, 4)
    assert any(issubclass(w.category, CacheWarning) for w in caught)


def test_pickled_entry_is_refused_not_unpickled(tmp_path):
    # the bomb is live: unpickling it does create its marker
    probe = tmp_path / "probe-marker"
    pickle.loads(pickle.dumps(PickleBomb(probe)))
    assert probe.exists()

    cache = PlanCache(tmp_path / "c")
    key = trnplan.plan_many(64, batch=4, cache=cache).provenance.wisdom_key
    marker = tmp_path / "unpickled-marker"
    with diskcache.Cache(str(cache.path)) as raw:  # default Disk: pickles the object
        raw.set(key, PickleBomb(marker))
    assert not marker.exists()
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match="a pickled entry: refusing to unpickle it.*forgetting it"):
        plan = trnplan.plan_many(64, batch=4, cache=cache)
    assert not marker.exists()
    assert plan.provenance.origin == "planned now"
    assert_correct(plan, 64, 4)
    (k, rec), = cache.records()  # the pickled entry was replaced by a valid record
    assert k == key and rec["tree"] == plan.tree.to_dict()
    assert not marker.exists()


def test_pickled_key_is_never_unpickled(tmp_path):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(64, batch=4, cache=cache)
    marker = tmp_path / "unpickled-key-marker"
    with diskcache.Cache(str(cache.path)) as raw:  # a non-str key is pickled by the default Disk
        raw.set(("wisdom", PickleBomb(marker)), "x")
    with pytest.warns(CacheWarning, match="a pickled \\(foreign\\) key is ignored"):
        listed = cache.records()
    assert [rec["problem"]["shape"] for _, rec in listed] == [[64]]  # the real entries are still listed
    assert not marker.exists()
    trnplan.clear_plan_cache()
    # lookups by key still work around it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        plan = trnplan.plan_many(64, batch=4, cache=cache)
        stats = cache.stats()
    assert plan.provenance.origin == "wisdom hit"
    assert_correct(plan, 64, 4)
    assert set(stats) == STATS_KEYS
    assert not marker.exists()


def test_pickled_artifact_and_stats_entries_are_refused(tmp_path):
    cache = PlanCache(tmp_path / "c")
    marker = tmp_path / "marker"
    with diskcache.Cache(str(cache.path)) as raw:
        raw.set("artifact:x:y:aot", PickleBomb(marker))
        raw.set("stats:wisdom_hits", PickleBomb(marker))
    with pytest.warns(CacheWarning, match="pickled"):
        assert cache.get_artifact("artifact:x:y:aot", "0" * 64) is None
    with pytest.warns(CacheWarning, match="pickled"):
        assert cache.stats()["wisdom_hits"] == 0
    cache.count("wisdom_hits")  # incr over a (now deleted) entry: fine
    assert not marker.exists()


def test_cache_dir_that_is_a_file(tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("I am a file")
    cache = PlanCache(path)
    with pytest.warns(CacheWarning, match=f"cannot open the plan cache at {path}.*planning without it"):
        plan = trnplan.plan_many(64, batch=4, cache=cache)
    assert plan.provenance.origin == "planned now"
    assert_correct(plan, 64, 4)
    assert path.read_text() == "I am a file"
    # one warning per cache, not one per call
    with no_cache_warnings():
        other = trnplan.plan_many(32, batch=2, cache=cache)
        assert cache.records() == [] and cache.stats()["wisdom_entries"] == 0
    assert_correct(other, 32, 2)
    assert not cache.usable


def test_garbage_database_file(tmp_path):
    path = tmp_path / "c"
    path.mkdir()
    (path / "cache.db").write_bytes(b"this is not sqlite " * 64)
    cache = PlanCache(path)
    with pytest.warns(CacheWarning, match="cannot open the plan cache.*file is not a database"):
        plan = trnplan.plan_many(64, batch=4, cache=cache)
    assert plan.provenance.origin == "planned now"
    assert_correct(plan, 64, 4)
    assert (path / "cache.db").read_bytes() == b"this is not sqlite " * 64  # left alone


def test_foreign_files_in_cache_dir_are_ignored(tmp_path):
    path = tmp_path / "c"
    path.mkdir()
    (path / "README.txt").write_text("notes")
    (path / "wisdom.json").write_text("{not json")
    cache = PlanCache(path)
    with no_cache_warnings():
        plan = trnplan.plan_many(64, batch=4, cache=cache)
        (path / "00").mkdir(exist_ok=True)
        (path / "00" / "stray.val").write_bytes(b"\x80\x04junk")
        trnplan.clear_plan_cache()
        again = trnplan.plan_many(64, batch=4, cache=cache)
        assert len(cache.records()) == 1
    assert again.provenance.origin == "wisdom hit"
    assert_correct(plan, 64, 4)
    assert_correct(again, 64, 4)
    assert (path / "README.txt").read_text() == "notes"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_get_artifact_checks_sha256(tmp_path):
    cache = PlanCache(tmp_path / "c")
    small, big = b"\x00artifact", os.urandom(100_000)  # big lands in a file of its own
    assert cache.add_artifact("artifact:s:f:aot", small) == small
    assert cache.add_artifact("artifact:b:f:aot", big) == big
    assert cache.add_artifact("artifact:s:f:aot", b"second writer") == small  # first writer wins
    with no_cache_warnings():
        assert cache.get_artifact("artifact:s:f:aot", sha(small)) == small
        assert cache.get_artifact("artifact:b:f:aot", sha(big)) == big
    with pytest.warns(CacheWarning, match="does not match the sha256"):
        assert cache.get_artifact("artifact:s:f:aot", sha(b"something else")) is None
    assert cache.get_artifact("artifact:s:f:aot", sha(small)) is None  # rejected means deleted
    # tamper with the bytes on disk
    val, = cache.path.rglob("*.val")
    data = bytearray(val.read_bytes())
    data[1234] ^= 1
    val.write_bytes(bytes(data))
    with pytest.warns(CacheWarning, match="does not match the sha256"):
        assert cache.get_artifact("artifact:b:f:aot", sha(big)) is None
    with pytest.raises(TypeError, match="only str/bytes"):
        cache._open().set("artifact:o:f:aot", {"not": "bytes"})


@pytest.mark.parametrize("exc", [sqlite3.OperationalError("database or disk is full"),
                                 OSError(errno.ENOSPC, "No space left on device")],
                         ids=["sqlite-full", "ENOSPC"])
def test_write_failure_warns_once_and_stops_writing(tmp_path, monkeypatch, exc):
    cache = PlanCache(tmp_path / "c")
    assert cache.usable
    calls = []

    def failing(self, *args, **kwargs):
        calls.append(args[0])
        raise exc

    monkeypatch.setattr(diskcache.Cache, "add", failing)
    monkeypatch.setattr(diskcache.Cache, "set", failing)
    with pytest.warns(CacheWarning, match=f"cannot write .*{exc.__class__.__name__}.*without writing") as caught:
        plan = trnplan.plan_many(64, batch=4, cache=cache)
    assert len(caught) == 1
    assert plan.provenance.origin == "planned now"
    assert_correct(plan, 64, 4)
    n_calls = len(calls)
    assert n_calls >= 1
    with no_cache_warnings():  # later writes are skipped without touching the disk
        other = trnplan.plan_many(128, batch=2, cache=cache)
        cache.update_wisdom("wisdom:x:y:z", {"a": 1})
        assert cache.add_artifact("artifact:x", b"abc") == b"abc"
        assert cache.records() == []
    assert len(calls) == n_calls
    assert_correct(other, 128, 2)


def test_update_wisdom_write_failure(tmp_path, monkeypatch):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(64, batch=4, cache=cache)
    (key, record), = cache.records()

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(diskcache.Cache, "set", full)
    with pytest.warns(CacheWarning, match="cannot write"):
        cache.update_wisdom(key, {**record, "artifacts": {"aot": {}}})
    assert dict(cache.records())[key] == record  # unchanged, still readable


def test_read_only_cache_still_serves_wisdom(tmp_path, monkeypatch):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(64, batch=4, cache=cache)
    trnplan.clear_plan_cache()

    def readonly(self, *args, **kwargs):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    for name in ("add", "set", "incr", "delete", "clear"):
        monkeypatch.setattr(diskcache.Cache, name, readonly)
    with no_cache_warnings():  # a hit needs no write (its stats counter fails silently)
        hit = trnplan.plan_many(64, batch=4, cache=cache)
    assert hit.provenance.origin == "wisdom hit"
    assert_correct(hit, 64, 4)
    with pytest.warns(CacheWarning, match="cannot write.*readonly database") as caught:
        miss = trnplan.plan_many(128, batch=2, cache=cache)
    assert len(caught) == 1
    assert_correct(miss, 128, 2)
    with no_cache_warnings():
        third = trnplan.plan_many(32, batch=8, cache=cache)
        assert len(cache.records()) == 1
    assert_correct(third, 32, 8)


# ====================================================================== 5. trust
def test_check_trusted(tmp_path, monkeypatch):
    path = tmp_path / "c"
    cache = PlanCache(path)
    cache.check_trusted()  # missing directory: nothing to distrust
    path.mkdir()
    path.chmod(0o755)
    cache.check_trusted()
    path.chmod(0o777)
    with pytest.raises(UntrustedCacheError) as info:
        cache.check_trusted()
    msg = str(info.value)
    assert "drwxrwxrwx" in msg and "other users" in msg and "TRNPLAN_TRUST_CACHE=1" in msg
    assert str(path) in msg and "chmod -R go-w" in msg
    assert isinstance(info.value, PermissionError) and isinstance(info.value, TrnplanError)
    path.chmod(0o775)
    with pytest.raises(UntrustedCacheError, match="its group.*drwxrwxr-x"):
        cache.check_trusted()
    monkeypatch.setenv("TRNPLAN_TRUST_CACHE", "1")
    cache.check_trusted()
    path.chmod(0o777)
    cache.check_trusted()
    monkeypatch.setenv("TRNPLAN_TRUST_CACHE", "0")
    with pytest.raises(UntrustedCacheError):
        cache.check_trusted()
    path.chmod(0o755)


# ====================================================================== 6. concurrency
_CONCURRENT = """
import pathlib
ready, go = pathlib.Path(OUT) / f"ready-{sys.argv[1]}", pathlib.Path(OUT) / "go"
ready.touch()
deadline = time.time() + 120
while not go.exists():  # start together
    if time.time() > deadline:
        sys.exit("never told to go")
    time.sleep(0.005)
origins = []
for n, batch, inverse in [(64, 4, False), (96, 3, True), (128, 2, False)]:
    plan = trnplan.plan_many(n, batch=batch, inverse=inverse)
    origins.append(plan.provenance.origin)
    np.save(os.path.join(OUT, f"{sys.argv[1]}-{n}.npy"), run(plan, rnd((batch, n), n)))
done(origins=origins)
"""


@pytest.mark.slow
def test_concurrent_processes_share_one_cache(tmp_path):
    cache_dir, out = tmp_path / "cache", tmp_path / "out"
    out.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", _PRELUDE + _CONCURRENT, str(i)],
                              env=child_env(cache_dir, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(4)]
    try:
        deadline = time.time() + 120
        while not all((out / f"ready-{i}").exists() for i in range(4)):
            assert time.time() < deadline and all(p.poll() is None for p in procs), "children did not start"
            time.sleep(0.01)
        (out / "go").touch()
        results = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    origins = []
    for p, (stdout, stderr) in zip(procs, results):
        assert p.returncode == 0, stderr[-3000:]
        assert "CacheWarning" not in stderr and "Traceback" not in stderr, stderr[-3000:]
        origins += json.loads(stdout.strip().splitlines()[-1][len("RESULT "):])["origins"]
    for i in range(4):
        for n, batch, inverse in [(64, 4, False), (96, 3, True), (128, 2, False)]:
            x = random_complex((batch, n), seed=n)
            assert rel_l2(np.load(out / f"{i}-{n}.npy"), reference(x, inverse)) <= BAR["fp32"], (i, n)
    cache = PlanCache(cache_dir)
    records = only_records(cache)
    assert len(records) == 3
    assert sorted((r["problem"]["shape"][0], r["problem"]["batch"], r["problem"]["inverse"]) for r in records) \
        == [(64, 4, False), (96, 3, True), (128, 2, False)]
    stats = cache.stats()
    assert stats["wisdom_entries"] == 3
    assert stats["wisdom_hits"] + stats["wisdom_misses"] == 12  # counters are process-safe
    assert stats["wisdom_hits"] == origins.count("wisdom hit")
    print(f"\n[concurrency] origins across 4 processes: {origins.count('planned now')} planned, "
          f"{origins.count('wisdom hit')} wisdom hits")


# ====================================================================== 7. stats
def test_stats_counts_hits_and_misses(tmp_path):
    cache = PlanCache(tmp_path / "c")
    empty = cache.stats()
    assert set(empty) == STATS_KEYS
    assert {k: empty[k] for k in STATS_KEYS - {"path", "size_limit", "bytes"}} == dict.fromkeys(
        STATS_KEYS - {"path", "size_limit", "bytes"}, 0)
    assert empty["path"] == str(cache.path) and empty["size_limit"] == 2 * 2**30

    trnplan.plan_many(64, batch=4, cache=cache)            # miss
    trnplan.plan_many(64, batch=4, cache=cache)            # in-process LRU: not counted
    trnplan.plan_many(32, batch=2, cache=cache)            # miss
    trnplan.plan_many(32, batch=2, cache=None)             # bypass: not counted
    trnplan.clear_plan_cache()
    trnplan.plan_many(64, batch=4, cache=cache)            # hit
    trnplan.plan_many(32, batch=2, cache=cache)            # hit
    trnplan.clear_plan_cache()
    trnplan.plan_many(64, batch=4, cache=cache)            # hit
    with pytest.raises(WisdomMiss):
        trnplan.plan_many(16, batch=1, cache=cache, effort="wisdom_only")  # miss
    stats = cache.stats()
    assert set(stats) == STATS_KEYS
    assert stats["wisdom_hits"] == 3 and stats["wisdom_misses"] == 3
    assert stats["wisdom_entries"] == 2 and stats["artifact_entries"] == 0
    assert stats["compiles"] == 0 and stats["artifact_hits"] == 0 and stats["compile_seconds_saved"] == 0
    assert stats["bytes"] > 0
    # counters survive a new PlanCache object on the same directory
    assert PlanCache(cache.path).stats()["wisdom_hits"] == 3
    assert cache.clear() > 0
    assert cache.stats()["wisdom_entries"] == 0 and cache.stats()["wisdom_hits"] == 0


# ====================================================================== the Neuron seam (stand-in)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_neuron_artifact_seam_with_stand_in(tmp_path, monkeypatch):
    """torch_neuronx is faked with torch.jit.trace: the NEFF path's store/load runs on the CPU.

    provide() is driven directly (tests/test_neuron.py drives the whole plan_many path). A
    GEMM tree is forced: 64×4 would otherwise take the host fallback the cost model prefers."""
    import types

    import attrs

    from trnplan.backends.base import clear_probe_cache
    from trnplan.core.problem import Problem
    from trnplan.core.spec import Spec
    from trnplan.plan.provide import provide
    from trnplan.plan.request import PlanRequest

    calls = []

    def trace(module, example, compiler_args=None, compiler_workdir=None):
        calls.append(compiler_args)
        return torch.jit.trace(module, example)

    monkeypatch.setitem(sys.modules, "torch_neuronx", types.SimpleNamespace(trace=trace))
    monkeypatch.delenv("TRNPLAN_NEURON_TARGET", raising=False)
    (tmp_path / "neuron0").touch()  # a Neuron device file: this is an instance, not a build host
    monkeypatch.setenv("TRNPLAN_NEURON_DEVICE_FILES", str(tmp_path / "neuron[0-9]*"))
    monkeypatch.setenv("TRNPLAN_NEURON_PROBE", "0")  # no NeuronCore here: the probe is assumed
    clear_probe_cache()
    cache = PlanCache(tmp_path / "c")
    problem = Problem.create(64, 4, device="neuron")
    spec = Spec(name="dft-gemm")
    request = PlanRequest(problem, spec, torch.device("cpu"), None, cache, "auto")
    built = provide(request)
    assert built.provenance.compile_mode == "neuron" and built.provenance.artifact == "compiled now"
    assert calls[0][:2] == ["--auto-cast", "none"] and len(calls) == 1
    assert built.provenance.fingerprint["device"] == "neuron"
    loaded = provide(attrs.evolve(request, effort="wisdom_only", wisdom_only=True))
    assert loaded.provenance.origin == "wisdom hit" and loaded.provenance.artifact == "artifact hit"
    assert len(calls) == 1  # not traced again
    assert type(loaded.runner).__name__ == "NeuronArtifact"
    x = random_complex((4, 64), seed=5)
    xt = c64(x)
    yr, yi = loaded.runner(xt.real.contiguous(), xt.imag.contiguous())
    assert rel_l2(torch.complex(yr, yi), reference(x, False)) <= BAR["fp32"]
    assert cache.stats()["artifact_entries"] == 1


@pytest.mark.parametrize("line,want", [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Thu Jul 10",
     "580.159.04"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023", "535.104.05"),
])
def test_cuda_fingerprint_reads_the_driver_release(tmp_path, line, want):
    """The CUDA fingerprint names the driver (issue 9): parsed from the kernel module's version file."""
    from trnplan.backends.cuda import cuda_driver_version

    proc = tmp_path / "version"
    proc.write_text(line + "\nGCC version:  gcc version 12.3.0\n")
    assert cuda_driver_version(str(proc)) == want


def test_cuda_driver_version_without_a_driver_is_unknown(tmp_path):
    from trnplan.backends.cuda import cuda_driver_version

    if torch.cuda.is_available():
        pytest.skip("a driver is present here")
    assert cuda_driver_version(str(tmp_path / "absent")) == "unknown"


def test_cuda_fingerprint_is_the_plans_gpu_not_the_current_one(monkeypatch):
    """On a machine with two GPU models, a plan for cuda:1 is keyed on cuda:1's name and capability
    ("cuda" alone: the current device, as in torch). torch.cuda is stood in for: no GPU here."""
    import types

    from trnplan.backends import cuda

    gpus = [types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0),
            types.SimpleNamespace(name="NVIDIA A10G", major=8, minor=6)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: gpus[index])
    monkeypatch.setattr(cuda, "cuda_driver_version", lambda: "580.159.04")
    first = fingerprint("cuda", torch.device("cuda", 1))
    assert (first["gpu"], first["capability"], first["driver"]) == ("NVIDIA A10G", "8.6", "580.159.04")
    for device in (torch.device("cuda"), torch.device("cuda", 0), None):
        fp = fingerprint("cuda", device)
        assert (fp["gpu"], fp["capability"]) == ("NVIDIA H100 80GB HBM3", "9.0")
    assert fingerprint_digest(fingerprint("cuda", torch.device("cuda", 1))) != fingerprint_digest(fp)
