"""Time every solver and the planner's choice against torch.fft, numpy.fft and scipy.fft.

    python bench/bench_solvers.py [--quick] [--out bench/out] [--markdown docs/benchmarks.md]

One process, one table: every column of a row is measured side by side in the same run, so
ratios hold even when absolute times drift on a noisy machine. Each time is the median of
repeats, all columns of a row timed in round-robin blocks (at least 5 rounds, ~1.5 s). The grid is the seed
project's: 1-D fft 256…65536 at batch 1, batched 32×1024 and 128×1024, Bluestein sizes 127,
997 and 4097, plus the large primes 16411 and 65537 (where the library's own prime path is slow). For each row it reports each forced solver's measured time and predicted time,
the estimate-mode choice, and the ratio of the choice to the fastest trnplan solver (the
planner's regret). Writes JSON and, with --markdown, the tables in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import time

import numpy as np
import scipy.fft
import torch
from _docs import replace_section  # bench/ is on sys.path when a bench script runs

import trnplan

GRID = [(1, 256), (1, 1024), (1, 4096), (1, 16384), (1, 65536), (32, 1024), (128, 1024),
        (1, 127), (1, 997), (1, 4097), (1, 16411), (1, 65537)]
QUICK_GRID = [(1, 256), (1, 4096), (32, 1024), (1, 997)]


def interleaved_medians(fns: dict, min_rounds=5, max_rounds=100, budget_s=1.5, block=4) -> dict:
    """Median µs of each callable, timed in round-robin blocks so that machine drift hits all alike.

    Each round runs every callable ``block + 1`` times in a row and keeps the last ``block``
    (the first call of a block re-warms the caches the other callables evicted), so the numbers
    are warm-cache times, as a production loop calling one plan repeatedly sees.
    """
    samples = {k: [] for k in fns}
    start = time.perf_counter()
    for r in range(max_rounds):
        for k, fn in fns.items():
            fn()
            for _ in range(block):
                t0 = time.perf_counter()
                fn()
                samples[k].append((time.perf_counter() - t0) * 1e6)
        if r + 1 >= min_rounds and time.perf_counter() - start > budget_s:
            break
    return {k: statistics.median(v) for k, v in samples.items()}


def bench_row(batch, n, rng):
    x64 = rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))
    x = torch.from_numpy(x64).to(torch.complex64)
    xnp = x.numpy()
    ref = np.fft.fft(x64)
    row = {"batch": batch, "n": n, "solvers": {}, "libraries": {}}
    fns = {}
    for name in trnplan.solver_names():
        try:
            plan = trnplan.plan_many(n, batch=batch, strategy=name)
        except trnplan.PlanningError as exc:
            row["solvers"][name] = {"applies": False, "why": str(exc).split(": ", 2)[-1][:120]}
            continue
        y = plan(x).numpy()
        err = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
        row["solvers"][name] = {"applies": True, "tree": str(plan.tree), "predicted_us": plan.tree.time_us,
                                "error": err}
        fns[name] = plan
    choice = trnplan.plan_many(n, batch=batch)
    fns["choice"] = choice
    fns["torch.fft"] = lambda: torch.fft.fft(x)
    fns["numpy.fft"] = lambda: np.fft.fft(xnp)
    fns["scipy.fft"] = lambda: scipy.fft.fft(xnp, workers=torch.get_num_threads())
    medians = interleaved_medians({k: (lambda f=f: f(x)) if isinstance(f, trnplan.Plan) else f for k, f in fns.items()})
    for name, us in medians.items():
        if name in row["solvers"]:
            row["solvers"][name]["us"] = us
        elif name != "choice":
            row["libraries"][name] = us
    row["choice"] = {"tree": str(choice.tree), "solver": choice.tree.solver, "us": medians["choice"],
                     "predicted_us": choice.tree.time_us}
    timed = {k: v["us"] for k, v in row["solvers"].items() if v["applies"]}
    fastest = min(timed, key=timed.get)
    row["fastest_solver"] = fastest
    # regret: the estimate choice's time over the fastest forced solver's (both measured here);
    # when the choice *is* that solver's tree the two are the same computation, so it is 1
    same = row["choice"]["tree"] == row["solvers"][fastest]["tree"]
    row["regret"] = 1.0 if same else row["choice"]["us"] / timed[fastest]
    return row


def markdown(result) -> str:
    names = list(trnplan.solver_names())
    lines = [
        "| batch × n | " + " | ".join(names) + " | **choice** (solver) | regret | torch.fft | numpy.fft | scipy.fft |",
        "|---|" + "---|" * (len(names) + 5),
    ]
    for r in result["rows"]:
        cells = []
        for name in names:
            s = r["solvers"][name]
            cells.append(f"{s['us']:.1f}" if s["applies"] else "—")
        c = r["choice"]
        lib = r["libraries"]
        flag = " ⚠" if r["regret"] > 1.2 else ""
        lines.append(
            f"| {r['batch']}×{r['n']} | " + " | ".join(cells)
            + f" | **{c['us']:.1f}** ({c['solver']}) | {r['regret']:.2f}{flag} | {lib['torch.fft']:.1f} "
            f"| {lib['numpy.fft']:.1f} | {lib['scipy.fft']:.1f} |"
        )
    lines += ["", "Predicted (cost model, µs) next to measured, per solver:", "",
              "| batch × n | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for r in result["rows"]:
        cells = []
        for name in names:
            s = r["solvers"][name]
            cells.append(f"{s['predicted_us']:.0f} / {s['us']:.0f}" if s["applies"] else "—")
        lines.append(f"| {r['batch']}×{r['n']} | " + " | ".join(cells) + " |")
    lines += ["", "Relative L2 error vs numpy.fft (complex128), complex64 input:", "",
              "| batch × n | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for r in result["rows"]:
        cells = [f"{r['solvers'][nm]['error']:.1e}" if r["solvers"][nm]["applies"] else "—" for nm in names]
        lines.append(f"| {r['batch']}×{r['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a 4-row subset of the grid")
    ap.add_argument("--out", default="bench/out", help="directory for solvers.json")
    ap.add_argument("--markdown", default=None, help="write the tables into this markdown file's marked section")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for batch, n in QUICK_GRID if args.quick else GRID:
        row = bench_row(batch, n, rng)
        rows.append(row)
        print(f"{batch}x{n}: choice {row['choice']['solver']} {row['choice']['us']:.1f} µs, fastest "
              f"{row['fastest_solver']} {row['solvers'][row['fastest_solver']]['us']:.1f} µs, regret "
              f"{row['regret']:.2f}, torch.fft {row['libraries']['torch.fft']:.1f} µs", flush=True)
    result = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                    "numpy": np.__version__, "scipy": scipy.__version__, "trnplan": trnplan.__version__},
        "rows": rows,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "solvers.json"), "w") as f:
        json.dump(result, f, indent=1)
    table = markdown(result)
    print(table)
    if args.markdown:
        replace_section(args.markdown, "solvers", section_body(table, result))


def section_body(table, result) -> str:
    """The solvers section: the machine line, then the table."""
    m = result["machine"]
    versions = ", ".join(f"{k} {m[k]}" for k in ("torch", "numpy", "scipy", "trnplan") if k in m)
    return (f"Measured {result['when']} on {m['cores']} cores ({m['torch_threads']} torch threads), "
            f"{versions}; complex64, medians.\n\n{table}")


if __name__ == "__main__":
    main()
