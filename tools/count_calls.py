"""Count what one ``plan_many`` call does inside trnplan: calls, cross-layer calls, repeated work.

The design goal (docs/architecture.md, "one request value"): a cold ``plan_many((4096,), batch=64)``
computes the problem's digest once and resolves the backend once; an in-process (LRU) hit makes at
most 10 trnplan calls and a wisdom hit at most 120; cross-layer calls on a cold plan are a third of
what they were. This script measures those numbers with :func:`sys.setprofile`, each case in a
fresh interpreter with a fresh plan cache, so that they can be compared before and after a change.

Usage::

    python tools/count_calls.py            # a table
    python tools/count_calls.py --json     # the numbers as JSON
    python tools/count_calls.py --check    # exit 1 if a goal (GOALS) is missed

A "trnplan call" is a Python function call whose code lives in the ``trnplan`` package; a
cross-layer call is one whose caller is in another layer of DESIGN.md §2 (core, kernels, backends,
planner, cache, plan, front).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

LAYERS = ("core", "kernels", "backends", "planner", "cache", "plan")
WATCHED = {"get_backend": "get_backend", "digest": "Problem.digest", "to_dict": "Problem.to_dict"}

CHILD = r"""
import collections, json, os, sys
import torch, trnplan
from trnplan.core.problem import Problem

ROOT = os.path.dirname(trnplan.__file__) + os.sep
case = sys.argv[1]

def layer(path):
    rel = path[len(ROOT):]
    top = rel.split(os.sep)[0]
    return top if top in {layers!r} else "front"

counts = collections.Counter()
def profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    if not code.co_filename.startswith(ROOT):
        return
    counts["calls"] += 1
    caller = frame.f_back
    if caller is not None and caller.f_code.co_filename.startswith(ROOT):
        if layer(caller.f_code.co_filename) != layer(code.co_filename):
            counts["cross_layer"] += 1
    name = code.co_name
    if name == "get_backend":
        counts["get_backend"] += 1
    elif name == "digest" and code.co_filename.endswith("problem.py"):
        counts["Problem.digest"] += 1
    elif name == "to_dict" and code.co_filename.endswith("problem.py"):
        counts["Problem.to_dict"] += 1

if case in ("lru", "wisdom", "fill"):
    trnplan.plan_many((4096,), batch=64)            # fills the cache (and the LRU)
if case == "fill":
    sys.exit(0)
if case == "wisdom":
    trnplan.clear_plan_cache()  # the in-process LRU only: the next call is a wisdom hit
sys.setprofile(profile)
trnplan.plan_many((4096,), batch=64)
sys.setprofile(None)
print(json.dumps(dict(counts)))
"""


#: the cases: a cold plan (a search); a wisdom hit in the process that stored the record, after its
#: in-process LRU was emptied; a wisdom hit in a fresh process (another process stored it: the
#: record is replayed through its solvers); an in-process (LRU) hit
CASES = ("cold", "wisdom", "wisdom_fresh", "lru")
#: the design's goals (issue 26): the cold plan's cross-layer calls at most a third of the 3,311
#: counted when the issue was filed, an LRU hit at most 10 calls, a wisdom hit at most 120
GOALS = {("cold", "cross_layer"): 3311 // 3, ("cold", "get_backend"): 1, ("cold", "Problem.digest"): 1,
         ("lru", "calls"): 10, ("wisdom", "calls"): 120}


def run_case(case: str) -> dict:
    """One case in a fresh interpreter with a fresh plan cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRNPLAN_CACHE_DIR=cache, TRNPLAN_RECHECK="0")
        code = CHILD.replace("{layers!r}", repr(set(LAYERS)))
        if case == "wisdom_fresh":  # another process plans and stores it
            subprocess.run([sys.executable, "-c", code, "fill"], env=env, capture_output=True, check=True)
        out = subprocess.run([sys.executable, "-c", code, case], env=env, capture_output=True, text=True,
                             check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def missed(result: dict) -> list[str]:
    """The goals of :data:`GOALS` that ``result`` misses, as text."""
    return [f"{case} {what}: {result[case].get(what, 0)} > {goal}" for (case, what), goal in GOALS.items()
            if case in result and result[case].get(what, 0) > goal]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--check", action="store_true", help="exit 1 if a goal of GOALS is missed (named on stderr)")
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    args = p.parse_args()
    result = {case: run_case(case) for case in args.cases.split(",")}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        _table(result)
    bad = missed(result) if args.check else []
    for line in bad:
        print(f"goal missed: {line}", file=sys.stderr)
    return 1 if bad else 0


def _table(result: dict) -> None:
    keys = ["calls", "cross_layer", "get_backend", "Problem.digest", "Problem.to_dict"]
    print(f"{'plan_many((4096,), batch=64)':<32}" + "".join(f"{k:>17}" for k in keys))
    for case, counts in result.items():
        print(f"{case:<32}" + "".join(f"{counts.get(k, 0):>17}" for k in keys))


if __name__ == "__main__":
    sys.exit(main())
