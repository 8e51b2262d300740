"""Plan a grid of problems on one fresh plan cache and print each one's tree, predicted time and error.

A change meant to leave the planner's decisions alone is checked by running this before and after
it and comparing the outputs (``diff`` or ``--compare``): the trees, their predicted times and
errors must be identical. Every problem is planned cold (a search), then again from the plan cache
with the in-process LRU emptied (the wisdom hit's replay and lowering), and both trees are printed.

Usage::

    python tools/same_trees.py > after.json            # this checkout (PYTHONPATH)
    python tools/same_trees.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

#: (shape, options): 1-D lengths (powers of two, smooth, prime, prime-factor-heavy) of every kind and
#: precision, batches, 2-D/3-D, auto precision, cores, a forced strategy, a tol, a truncated one
LENGTHS = (1, 2, 3, 5, 7, 8, 12, 16, 60, 64, 97, 100, 128, 243, 256, 360, 509, 512, 1000, 1024, 2048, 4096,
           4099, 6561, 8192, 16384)
PRECISIONS = ("fp32", "bf16x3", "bf16", "tf32")


def grid() -> list[tuple[tuple, dict]]:
    out = []
    for n in LENGTHS:
        for batch in (1, 64):
            out.append(((n,), {"batch": batch}))
        out.append(((n,), {"batch": 8, "kind": "r2c"}))
        out.append(((n,), {"batch": 8, "kind": "c2r"}))
        out.append(((n,), {"batch": 4, "dtype": "complex128"}))
        out.append(((n,), {"batch": 4, "inverse": True, "norm": "ortho"}))
    for n in (64, 256, 1024, 4096):
        for precision in PRECISIONS:
            out.append(((n,), {"batch": 16, "precision": precision}))
        out.append(((n,), {"batch": 16, "precision": "auto", "tol": 1e-3}))
        out.append(((n,), {"batch": 16, "cores": 2}))
        out.append(((n,), {"batch": 16, "strategy": "four-step"}))
    for shape in ((8, 8), (64, 64), (32, 48), (16, 16, 16), (100, 60)):
        out.append((shape, {"batch": 2}))
        out.append((shape, {"batch": 2, "kind": "r2c"}))
    out.append(((256,), {"batch": 4, "kind": "r2c", "modes": 16}))
    # a device without a native FFT (meta: planned as an accelerator, never run): the GEMM solvers' trees
    for n in LENGTHS:
        out.append(((n,), {"batch": 64, "device": "meta"}))
        out.append(((n,), {"batch": 8, "device": "meta", "kind": "r2c"}))
        out.append(((n,), {"batch": 8, "device": "meta", "precision": "bf16x3"}))
    for shape in ((64, 64), (16, 16, 16)):
        out.append((shape, {"batch": 2, "device": "meta"}))
    return out


def describe(plan) -> dict:
    tree = plan.tree
    return {"tree": str(tree), "time_us": tree.time_us, "error": tree.error,
            "nodes": [[n.solver, n.n, n.batch, n.time_us, n.error] for _, n in tree.walk()]}


def run() -> dict:
    # imported after the environment names the fresh cache directory
    import torch

    import trnplan

    result = {}
    for shape, options in grid():
        options = dict(options)
        if "dtype" in options:
            options["dtype"] = getattr(torch, options["dtype"])
        name = f"{shape} {sorted((k, str(v)) for k, v in options.items())}"
        try:
            cold = describe(trnplan.plan_many(shape, **options))
            trnplan.clear_plan_cache()
            hit = describe(trnplan.plan_many(shape, **options))
            result[name] = {"cold": cold, "wisdom": hit}
        except Exception as exc:  # noqa: BLE001 - a refusal is a result too: it must not change either
            result[name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = p.parse_args()
    if args.compare:
        before, after = (json.load(open(path)) for path in args.compare)  # noqa: SIM115
        differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        for k in differ:
            print(f"differs: {k}\n  before {before.get(k)}\n  after  {after.get(k)}")
        print(f"{len(before)} problems before, {len(after)} after, {len(differ)} differ")
        return 1 if differ else 0
    with tempfile.TemporaryDirectory() as cache:
        os.environ.update(TRNPLAN_CACHE_DIR=cache, TRNPLAN_RECHECK="0")
        print(json.dumps(run(), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
