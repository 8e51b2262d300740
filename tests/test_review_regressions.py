"""Regression tests for issues found in review (each failed before its fix)."""

from __future__ import annotations

import json
import zipfile

import pytest
import torch
from conftest import exported_bundle_meta
from support import BAR, random_complex, reference, rel_l2

import trnplan
from trnplan.cache import PlanCache
from trnplan.cache.bundle import import_bundle
from trnplan.tools.cli import main
from trnplan.tools.precompile import precompile


def test_cpu_with_an_index_runs_on_cpu_tensors():
    plan = trnplan.plan_many(64, device="cpu:0", cache=None)
    assert plan.device == torch.device("cpu")
    x = random_complex((1, 64))
    assert rel_l2(plan(torch.from_numpy(x).to(torch.complex64).to("cpu:0")), reference(x, False)) <= BAR["fp32"]


def test_precompile_stores_even_when_the_plan_is_already_in_memory(tmp_path):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(4096, batch=8, cache=cache)  # now in the in-process LRU
    cache.clear()
    results = precompile([{"shape": [4096], "batch": 8}], cache=cache, progress=False)
    assert results[0].ok and len(PlanCache(tmp_path / "c").records()) == 1


def test_wisdom_only_is_answered_by_the_disk_cache_not_the_lru(tmp_path):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(256, cache=cache)
    cache.clear()
    with pytest.raises(trnplan.WisdomMiss):
        trnplan.plan_many(256, cache=cache, effort="wisdom_only")


def test_default_tol_and_explicit_default_tol_share_wisdom(tmp_path):
    cache = PlanCache(tmp_path / "c")
    precompile([{"shape": [4096], "batch": 64, "tol": 5e-7}], cache=cache, progress=False)
    trnplan.clear_plan_cache()
    plan = trnplan.plan_many(4096, batch=64, effort="wisdom_only", cache=cache)
    assert plan.provenance.origin == "wisdom hit"


def test_wisdom_miss_names_a_stored_variant_with_another_tol(tmp_path):
    cache = PlanCache(tmp_path / "c")
    precompile([{"shape": [4096], "batch": 64, "tol": 1e-3}], cache=cache, progress=False)
    trnplan.clear_plan_cache()
    with pytest.raises(trnplan.WisdomMiss, match=r"another strategy or tol: strategy None, tol 0\.001"):
        trnplan.plan_many(4096, batch=64, effort="wisdom_only", cache=cache)


def test_bundle_cannot_write_outside_the_artifact_store(tmp_path):
    import hashlib

    bundle, meta = exported_bundle_meta(tmp_path)
    payload = b"\x00\x01"
    entry = meta["entries"][0]
    entry["record"]["artifacts"] = {"aot": {"key": "stats:wisdom_misses", "sha256": hashlib.sha256(payload).hexdigest()}}
    entry["files"] = {"aot": "artifacts/0.bin"}
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr("bundle.json", json.dumps(meta))
        zf.writestr("artifacts/0.bin", payload)
    dst = PlanCache(tmp_path / "dst")
    report = import_bundle(dst, bundle, trust_artifacts=True)
    assert report.wisdom == 0 and "outside the artifact store" in report.rejected[0][1]
    trnplan.plan_many(128, cache=dst)  # counters intact: a miss still works
    assert dst.stats()["wisdom_misses"] == 1


def test_damaged_counter_does_not_break_planning(tmp_path):
    cache = PlanCache(tmp_path / "c")
    cache._set("stats:wisdom_misses", b"not a number")
    trnplan.plan_many(32, cache=cache)
    assert cache.stats()["wisdom_misses"] == 0


def test_wisdom_without_candidates_still_explains(tmp_path):
    cache = PlanCache(tmp_path / "c")
    plan = trnplan.plan_many(64, cache=cache)
    (key, record), = cache.records()
    record.pop("candidates")
    cache.update_wisdom(key, record)
    trnplan.clear_plan_cache()
    again = trnplan.plan_many(64, cache=cache)
    assert again.provenance.origin == "wisdom hit" and str(again.tree) == str(plan.tree)
    assert "(not recorded with this wisdom)" in again.explain(full=True)


def test_importing_a_file_that_is_not_a_zip_is_a_clear_error(tmp_path, capsys):
    junk = tmp_path / "junk.zip"
    junk.write_text("hello")
    assert main(["cache", "import", str(junk), "--cache-dir", str(tmp_path / "c")]) == 2
    assert "is not a trnplan cache bundle" in capsys.readouterr().err
