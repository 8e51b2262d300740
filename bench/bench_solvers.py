"""Time every solver and the planner's choice against torch.fft, numpy.fft and scipy.fft.

    python bench/bench_solvers.py [--quick] [--out bench/out] [--markdown docs/benchmarks.md]

One process, one table: every column of a row is measured side by side in the same run, so
ratios hold even when absolute times drift on a noisy machine. Each time is the median of
repeats after a warm-up (at least 5 repeats and until ~0.2 s of samples). The grid is the seed
project's: 1-D fft 256…65536 at batch 1, batched 32×1024 and 128×1024, Bluestein sizes 127,
997 and 4097. For each row it reports each forced solver's measured time and predicted time,
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

import trnplan

GRID = [(1, 256), (1, 1024), (1, 4096), (1, 16384), (1, 65536), (32, 1024), (128, 1024),
        (1, 127), (1, 997), (1, 4097)]
QUICK_GRID = [(1, 256), (1, 4096), (32, 1024), (1, 997)]


def median_us(fn, min_repeats=5, budget_s=0.2, warmup=2):
    for _ in range(warmup):
        fn()
    times, start = [], time.perf_counter()
    while len(times) < min_repeats or (time.perf_counter() - start < budget_s and len(times) < 200):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def bench_row(batch, n, rng):
    x64 = rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))
    x = torch.from_numpy(x64).to(torch.complex64)
    xnp = x.numpy()
    ref = np.fft.fft(x64)
    row = {"batch": batch, "n": n, "solvers": {}, "libraries": {}}
    for name in trnplan.solver_names():
        try:
            plan = trnplan.plan_many(n, batch=batch, strategy=name)
        except trnplan.PlanningError as exc:
            row["solvers"][name] = {"applies": False, "why": str(exc).split(": ", 2)[-1][:120]}
            continue
        y = plan(x).numpy()
        err = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
        row["solvers"][name] = {"applies": True, "tree": str(plan.tree), "us": median_us(lambda: plan(x)),
                                "predicted_us": plan.tree.time_us, "error": err}
    plan = trnplan.plan_many(n, batch=batch)
    row["choice"] = {"tree": str(plan.tree), "solver": plan.tree.solver, "us": median_us(lambda: plan(x)),
                     "predicted_us": plan.tree.time_us}
    row["libraries"]["torch.fft"] = median_us(lambda: torch.fft.fft(x))
    row["libraries"]["numpy.fft"] = median_us(lambda: np.fft.fft(xnp))
    row["libraries"]["scipy.fft"] = median_us(lambda: scipy.fft.fft(xnp, workers=torch.get_num_threads()))
    timed = {k: v["us"] for k, v in row["solvers"].items() if v["applies"]}
    fastest = min(timed, key=timed.get)
    row["fastest_solver"] = fastest
    # regret: the estimate choice's time over the fastest forced solver's (both measured here)
    row["regret"] = row["choice"]["us"] / timed[fastest]
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
        replace_section(args.markdown, "solvers", table, result)


def replace_section(path, name, table, result):
    """Replace the text between ``<!-- bench:NAME -->`` markers (or append the section)."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    m = result["machine"]
    body = (f"{begin}\nMeasured {result['when']} on {m['cores']} cores ({m['torch_threads']} torch threads), "
            f"torch {m['torch']}, numpy {m['numpy']}, scipy {m['scipy']}, trnplan {m['trnplan']}; "
            f"complex64, µs, median of repeats.\n\n{table}\n{end}")
    text = open(path).read() if os.path.exists(path) else ""
    if begin in text and end in text:
        text = text[: text.index(begin)] + body + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + body + "\n"
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
