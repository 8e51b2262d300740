"""The hot path's shape (issue 26): the planner never calls into the plan cache, and the call
counts of one ``plan_many`` (tools/count_calls.py) meet the design's goals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import trnplan
from trnplan.cache import PlanCache

ROOT = Path(trnplan.__file__).parent
TOOL = ROOT.parent / "tools" / "count_calls.py"


def _layer_calls(run, caller: str, callee: str) -> list[str]:
    """Calls made while ``run()`` runs from a function in ``trnplan/<caller>/`` to one in
    ``trnplan/<callee>/``, as "caller -> callee" names."""
    seen = []
    callers, callees = str(ROOT / caller) + os.sep, str(ROOT / callee) + os.sep

    def profile(frame, event, arg):
        if event != "call" or not frame.f_code.co_filename.startswith(callees):
            return
        back = frame.f_back
        if back is not None and back.f_code.co_filename.startswith(callers):
            seen.append(f"{back.f_code.co_name} -> {frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return seen


def test_the_planner_never_calls_the_plan_cache(tmp_path):
    """Measured planning learns (a calibration record) and reads the leaf fit and the calibration;
    the cache layer does the reading and writing, the planner only computes (issue 26 item 3)."""
    cache = PlanCache(tmp_path / "c")

    def plans():
        trnplan.plan_many((64,), batch=4, effort="measure", cache=cache)
        trnplan.clear_plan_cache()
        trnplan.plan_many((64,), batch=4, effort="measure", cache=cache)  # a wisdom hit

    assert _layer_calls(plans, "planner", "cache") == []
    assert cache.keys("calibration:")  # it did learn: the samples were stored, by the cache layer
    assert cache.stats()["wisdom_hits"] == 1


@pytest.mark.slow
def test_call_counts_meet_the_goals():
    """tools/count_calls.py --check: the cold plan's cross-layer calls ≤ 1/3 of the issue's 3,311, one
    digest and one backend resolution, an LRU hit ≤ 10 calls, a wisdom hit ≤ 120 (119 at this commit:
    docs/architecture.md says where they go), with one backend resolution and one digest."""
    env = dict(os.environ, PYTHONPATH=str(ROOT.parent))
    out = subprocess.run([sys.executable, str(TOOL), "--check", "--json", "--cases", "cold,lru,wisdom"], env=env,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    wisdom = json.loads(out.stdout)["wisdom"]
    assert wisdom["calls"] <= 120 and wisdom["get_backend"] == 1 and wisdom["Problem.digest"] == 1


def test_a_record_this_process_stored_is_not_replayed_and_a_changed_one_is(tmp_path, monkeypatch):
    """The wisdom hit skips the replay of a record this process stored (or replayed) and finds
    unchanged; a fresh process's state (state.reset) replays it; a record changed on disk since is
    replayed, and one that does not describe a plan for the problem is forgotten with a warning."""
    from trnplan.cache import CacheWarning
    from trnplan.core import state
    from trnplan.plan import trust

    replays = []
    real = trust.parse_strategy
    monkeypatch.setattr(trust, "parse_strategy", lambda *a: replays.append(a[0]) or real(*a))
    cache = PlanCache(tmp_path / "c")
    first = trnplan.plan_many((64,), batch=4, cache=cache)
    key = first.provenance.wisdom_key
    trnplan.clear_plan_cache()
    again = trnplan.plan_many((64,), batch=4, cache=cache)
    assert again.provenance.origin == "wisdom hit" and replays == [] and again.tree == first.tree
    state.reset()  # a fresh process: the record is replayed through its solvers
    again = trnplan.plan_many((64,), batch=4, cache=cache)
    assert again.provenance.origin == "wisdom hit" and replays == [str(first.tree)]
    record = cache.get_wisdom(key)
    cache.update_wisdom(key, {**record, "tree": {**record["tree"], "n": 32}})  # another process's bogus tree
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match="does not describe a valid plan for this problem"):
        replanned = trnplan.plan_many((64,), batch=4, cache=cache)
    assert replanned.provenance.origin == "planned now" and replanned.tree == first.tree
