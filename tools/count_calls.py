"""Count what one ``plan_many`` call does inside trnplan: calls, cross-layer calls, repeated work.

The design goal (docs/architecture.md, "one request value"): a cold ``plan_many((4096,), batch=64)``
computes the problem's digest once and resolves the backend once; an in-process (LRU) hit makes at
most 10 trnplan calls and a wisdom hit at most 120; cross-layer calls on a cold plan are a third of
what they were. This script measures those numbers with :func:`sys.setprofile`, each case in a
fresh interpreter with a fresh plan cache, so that they can be compared before and after a change.

Usage::

    python tools/count_calls.py            # a table
    python tools/count_calls.py --json     # the numbers as JSON

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

if case in ("lru", "wisdom"):
    trnplan.plan_many((4096,), batch=64)            # fills the cache (and the LRU)
if case == "wisdom":
    trnplan.clear_plan_cache()  # the in-process LRU only: the next call is a wisdom hit
sys.setprofile(profile)
trnplan.plan_many((4096,), batch=64)
sys.setprofile(None)
print(json.dumps(dict(counts)))
"""


def run_case(case: str) -> dict:
    """One case in a fresh interpreter with a fresh plan cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRNPLAN_CACHE_DIR=cache, TRNPLAN_RECHECK="0")
        code = CHILD.replace("{layers!r}", repr(set(LAYERS)))
        out = subprocess.run([sys.executable, "-c", code, case], env=env, capture_output=True, text=True,
                             check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    result = {case: run_case(case) for case in ("cold", "wisdom", "lru")}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    keys = ["calls", "cross_layer", "get_backend", "Problem.digest", "Problem.to_dict"]
    print(f"{'plan_many((4096,), batch=64)':<32}" + "".join(f"{k:>17}" for k in keys))
    for case, counts in result.items():
        print(f"{case:<32}" + "".join(f"{counts.get(k, 0):>17}" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
