"""Cold plan+compile vs warm load in a fresh process, for eager and AOT plans.

    python bench/cache.py [--sizes 256 4096] [--batch 16] [--markdown docs/benchmarks.md]

For each size and compile mode, one fresh Python process plans (and compiles) into an empty
cache, and a second fresh process loads the same plan with ``effort="wisdom_only"`` (no planning,
no compiling). Each child reports the time of its ``plan_many`` call and the median execute
time; the table gives the cold/warm ratio (goal: ≥ 100×, and warm AOT under 50 ms per plan).
Fresh processes are the honest measure: an in-process repeat would hit the in-process LRU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, statistics, sys, time
t_import = time.perf_counter()
import torch, trnplan
t0 = time.perf_counter()
plan = trnplan.plan_many({n}, batch={batch}, compile={mode!r}, effort={effort!r})
plan_s = time.perf_counter() - t0
x = torch.randn({batch}, {n}, dtype=torch.complex64)
for _ in range(3):
    plan(x)
ts = []
for _ in range(30):
    t1 = time.perf_counter(); plan(x); ts.append((time.perf_counter() - t1) * 1e6)
pv = plan.provenance
print(json.dumps({{"plan_s": plan_s, "import_s": t0 - t_import, "exec_us": statistics.median(ts),
                  "origin": pv.origin, "artifact": pv.artifact, "compile_s": pv.compile_s,
                  "tree": str(plan.tree), "bytes": pv.artifact_bytes}}))
"""


def run_child(cache_dir, n, batch, mode, effort):
    env = {**os.environ, "TRNPLAN_CACHE_DIR": cache_dir}
    code = CHILD.format(n=n, batch=batch, mode=mode, effort=effort)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 4096])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        for mode in ("eager", "aot"):
            with tempfile.TemporaryDirectory() as cache_dir:
                cold = run_child(cache_dir, n, args.batch, mode, "estimate")
                warm = run_child(cache_dir, n, args.batch, mode, "wisdom_only")
            row = {"n": n, "batch": args.batch, "mode": mode, "cold": cold, "warm": warm,
                   "ratio": cold["plan_s"] / warm["plan_s"]}
            rows.append(row)
            print(f"{args.batch}×{n} {mode}: cold {cold['plan_s'] * 1e3:.1f} ms ({cold['artifact']}), warm "
                  f"{warm['plan_s'] * 1e3:.1f} ms ({warm['origin']}, {warm['artifact']}), ratio {row['ratio']:.0f}×, "
                  f"execute {cold['exec_us']:.1f} / {warm['exec_us']:.1f} µs", flush=True)
    lines = [("| batch × n | compile | plan | cold: plan + compile | warm: load, fresh process | cold / warm "
             "| artifact | execute (warm) |"), "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c, w = r["cold"], r["warm"]
        lines.append(f"| {r['batch']}×{r['n']} | {r['mode']} | `{c['tree']}` | {c['plan_s'] * 1e3:.1f} ms | "
                     f"{w['plan_s'] * 1e3:.1f} ms | {r['ratio']:.0f}× | "
                     f"{c['bytes'] / 1e6:.2f} MB | {w['exec_us']:.1f} µs |" if c["bytes"] else
                     f"| {r['batch']}×{r['n']} | {r['mode']} | `{c['tree']}` | {c['plan_s'] * 1e3:.1f} ms | "
                     f"{w['plan_s'] * 1e3:.1f} ms | {r['ratio']:.0f}× | — | {w['exec_us']:.1f} µs |")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        sys.path.insert(0, os.path.dirname(__file__))
        import datetime
        import platform

        import torch
        from _docs import replace_section
        from bench_solvers import section_body

        import trnplan

        result = {"when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "machine": {"cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                              "torch": torch.__version__, "trnplan": trnplan.__version__, "cpu": platform.machine()}}
        replace_section(args.markdown, "cache", section_body(table, result))


if __name__ == "__main__":
    main()
