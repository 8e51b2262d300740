"""cores=1 vs cores=2 on the batched rows, next to torch.fft with 1 and 2 threads.

    python bench/multicore.py [--markdown docs/benchmarks.md] [--cell-seconds 0.3]

For each row (complex64 c2c, batched) and each torch intra-op thread count T (1, then 2; one
phase each in this one process, so every ratio of a phase is measured side by side):

* ``torch.fft``: the library alone, T threads;
* ``cores=1``: ``plan_many(n, batch)`` (the planner's pick, run as ``plan.execute``);
* ``cores=2 split``: the same leaf forced under the multicore solver,
  ``strategy="(multicore (LEAF))"``: the batch cut into 2 shards run concurrently on a worker
  thread and the caller;
* ``cores=2 pick``: ``plan_many(n, batch, cores=2)``, whatever the cost model picks.

Speedup = cores=1 / cores=2 split; efficiency = speedup / 2. Every trnplan result is checked
against numpy.fft in complex128 once. ``--markdown`` rewrites the section between the
``<!-- bench:multicore -->`` markers of that file.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform

import numpy as np
import torch
from _docs import replace_section  # bench/ is on sys.path when a bench script runs

import trnplan
from trnplan.tools.benchsuite import _cpu_model, time_cells

ROWS = ((1024, 32), (1024, 128), (64, 16384), (256, 4096), (4096, 256))


def _leaf(plan) -> str:
    return str(plan.tree)


def _check(fn, x, ref) -> float:
    y = fn().numpy().astype(np.complex128)
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def run(cell_seconds: float) -> list:
    rng = np.random.default_rng(0)
    out = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for n, b in ROWS:
            x64 = rng.standard_normal((b, n)) + 1j * rng.standard_normal((b, n))
            x = torch.from_numpy(x64).to(torch.complex64)
            ref = np.fft.fft(x.numpy().astype(np.complex128))
            one = trnplan.plan_many(n, batch=b, cache=None)
            split = trnplan.plan_many(n, batch=b, cores=2, cache=None, strategy=f"(multicore {_leaf(one)})")
            pick = trnplan.plan_many(n, batch=b, cores=2, cache=None)
            fns = {"torch.fft": lambda x=x: torch.fft.fft(x), "cores=1": lambda one=one, x=x: one.execute(x),
                   "cores=2 split": lambda split=split, x=x: split.execute(x),
                   "cores=2 pick": lambda pick=pick, x=x: pick.execute(x)}
            errs = {k: _check(f, x, ref) for k, f in fns.items() if k != "torch.fft"}
            cells = time_cells(fns, cell_seconds, 5)
            med = {k: v["us"] for k, v in cells.items()}
            speedup = med["cores=1"] / med["cores=2 split"]
            out.append({"threads": threads, "n": n, "batch": b, "median_us": med, "errors": errs,
                        "trees": {"cores=1": str(one.tree), "cores=2 split": str(split.tree),
                                  "cores=2 pick": str(pick.tree)},
                        "speedup": speedup, "efficiency": speedup / 2})
            print(f"T={threads} {b}×{n}: " + ", ".join(f"{k} {v:.0f} µs" for k, v in med.items())
                  + f"; speedup {speedup:.2f}", flush=True)
    return out


def markdown(rows: list) -> str:
    lines = [("| torch threads | row | torch.fft | cores=1 (its tree) | cores=2 split | speedup | efficiency | "
             "cores=2 pick (its tree) |"), "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r["median_us"]
        lines.append(f"| {r['threads']} | {r['batch']}×{r['n']} | {m['torch.fft']:.0f} | {m['cores=1']:.0f} "
                     f"`{r['trees']['cores=1']}` | {m['cores=2 split']:.0f} | {r['speedup']:.2f} | "
                     f"{r['efficiency']:.2f} | {m['cores=2 pick']:.0f} `{r['trees']['cores=2 pick']}` |")
    worst = max(max(r["errors"].values()) for r in rows)
    lines.append(f"\nµs per call, median; complex64; largest relative L2 error of any trnplan cell vs numpy "
                 f"complex128: {worst:.1e}.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", default=None, help="rewrite the bench:multicore section of this file")
    ap.add_argument("--cell-seconds", type=float, default=0.3)
    args = ap.parse_args()
    rows = run(args.cell_seconds)
    head = (f"Measured {datetime.datetime.now():%Y-%m-%d %H:%M} on {_cpu_model()} ({os.cpu_count()} vCPU), "
            f"torch {torch.__version__}, Python {platform.python_version()}.\n\n")
    text = head + markdown(rows)
    print(text)
    if args.markdown:
        replace_section(args.markdown, "multicore", text)


if __name__ == "__main__":
    main()
