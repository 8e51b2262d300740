"""Measure trnplan's relative L2 error against numpy.fft (complex128), per precision mode.

    python bench/accuracy.py [--section solvers picks] [--batches 1 4] [--max-log2 20] [--out bench/out]

``solvers``: every GEMM-bearing solver (forced at the root; children planned freely, and once
more with GEMM-only children for the composites) in every precision mode, on the engine's test
grid, both directions: measured error, the accuracy model's predicted bound, their ratio. The
constants in trnplan/planner/*.py and GEMM_STAGE_ERROR in trnplan/core/accuracy.py were
fitted from this table: the prediction must stay above every measurement (ratio < 1).
Two batch sizes by default, because MKL's sgemm sums 1–3 rows sequentially and 4+ blockwise.

``picks``: the plan the planner picks in each mode on the precision issue's grid (2^4 … 2^20,
primes 97, 509, 4099, 65537, and 1000, 4097, 10000), seeded complex normal input: measured
error, predicted bound, execute time, next to scipy.fft's and torch.fft's complex64 errors on
the same input, checked against each mode's bar; writes a markdown table (pasted into
docs/precision.md), JSON, and a log-log plot when matplotlib is installed (optional).

Exits non-zero if a ratio reaches 1 or a pick misses its bar.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch

import trnplan
from trnplan.core.accuracy import DEFAULT_TOL

SIZES = [1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 64, 97, 100, 127, 128, 256, 500, 512, 997, 1000, 1024,
         4096, 4097, 8192, 65536]
#: composite trees with GEMM-only children, measured besides each registered solver forced at the root
GEMM_ONLY_TREES = ["(four-step _ dft-gemm dft-gemm)", "(bluestein _ stockham stockham)"]


def strategies() -> list[str]:
    """Every registered solver, found in the registry (so a new solver's error constant is fitted
    here without editing this file; one that never applies to a 1-D c2c problem gives no rows),
    then the composites with GEMM-only children."""
    return [*trnplan.solver_names(), *GEMM_ONLY_TREES]


MODES = {"fp32": torch.complex64, "fp64": torch.complex128, "bf16": torch.complex64,
         "bf16x3": torch.complex64, "bf16x6": torch.complex64}
#: the engine's bars, imported (fp32 also ≤ 2× scipy.fft complex64 on the same input)
BARS = {mode: DEFAULT_TOL[mode] for mode in MODES}
PRIMES_AND_MIXED = [97, 509, 4099, 65537, 1000, 4097, 10000]


def rel_l2(y: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def solvers_section(batches, rng, modes, names=None) -> list[dict]:
    rows = []
    for precision, dtype in ((m, MODES[m]) for m in modes):
        for strategy in names or strategies():
            for n, batch, inverse in ((n, b, i) for n in SIZES for b in batches for i in (False, True)):
                spec = strategy.replace("_", str(n), 1) if strategy.startswith("(") else strategy
                try:
                    plan = trnplan.plan_many(n, batch=batch, strategy=spec, dtype=dtype, precision=precision,
                                             inverse=inverse, tol=1.0, cache=None)
                except trnplan.PlanningError:
                    continue
                x = rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))
                y = plan(torch.from_numpy(x).to(dtype)).numpy()
                ref = np.fft.ifft(x) if inverse else np.fft.fft(x)
                err = rel_l2(y, ref)
                rows.append({"precision": precision, "strategy": strategy, "n": n, "batch": batch,
                             "inverse": inverse, "tree": str(plan.tree), "error": err,
                             "predicted": plan.tree.error, "ratio": err / plan.tree.error})
    worst = {}
    for r in rows:
        key = (r["precision"], r["strategy"])
        if key not in worst or r["ratio"] > worst[key]["ratio"]:
            worst[key] = r
    print("| precision | strategy | worst at batch×n | measured | predicted | ratio |\n|---|---|---|---|---|---|")
    for (precision, strategy), r in worst.items():
        print(f"| {precision} | `{strategy}` | {r['batch']}×{r['n']} | {r['error']:.2e} | {r['predicted']:.2e} "
              f"| {r['ratio']:.2f} |")
    return rows


def _time_us(fn, x, repeats=5) -> float:
    fn(x)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def picks_section(max_log2: int, rng) -> list[dict]:
    import scipy.fft

    sizes = [2**k for k in range(4, max_log2 + 1)] + PRIMES_AND_MIXED
    rows = []
    for n in sizes:
        batch = max(1, 2**14 // n)
        x = rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))
        ref = np.fft.fft(x)
        x64 = x.astype(np.complex64)
        row = {"n": n, "batch": batch, "scipy": rel_l2(scipy.fft.fft(x64), ref),
               "torch": rel_l2(torch.fft.fft(torch.from_numpy(x64)).numpy(), ref)}
        for mode, dtype in MODES.items():
            try:
                plan = trnplan.plan_many(n, batch=batch, dtype=dtype, precision=mode, cache=None)
            except trnplan.PlanningError as exc:  # the model cannot certify the bar: a refusal, reported
                row[mode] = {"tree": None, "refused": str(exc)[:200]}
                continue
            xt = torch.from_numpy(x).to(dtype)
            err = rel_l2(plan(xt).numpy(), ref)
            row[mode] = {"tree": str(plan.tree), "error": err, "predicted": plan.tree.error,
                         "time_us": _time_us(plan, xt, repeats=3 if n >= 2**18 else 5)}
        rows.append(row)
        print(f"n={n:>8} " + "  ".join(_cell(row[m], m) for m in MODES)
              + f"  scipy {row['scipy']:.1e} torch {row['torch']:.1e}", flush=True)
    return rows


def _cell(r, m, time=False) -> str:
    if r.get("tree") is None:
        return f"{m} refused" if not time else "refused (model over the bar)"
    if time:
        return f"{r['error']:.1e} / {r['predicted']:.1e} ({r['time_us']:.3g})"
    return f"{m} {r['error']:.1e}/{r['predicted']:.1e}"


def picks_table(rows) -> str:
    head = ("| n | batch | scipy c64 | torch c64 | " + " | ".join(f"{m} measured / predicted (µs)" for m in MODES)
            + " |\n|---|---|---|---|" + "---|" * len(MODES))
    lines = [head]
    for r in rows:
        cells = [_cell(r[m], m, time=True) for m in MODES]
        lines.append(f"| {r['n']} | {r['batch']} | {r['scipy']:.1e} | {r['torch']:.1e} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def picks_failures(rows) -> list[str]:
    bad = []
    for r in rows:
        for m in MODES:
            if r[m].get("tree") is None:
                bad.append(f"n={r['n']} {m}: refused ({r[m]['refused']})")
                continue
            e = r[m]["error"]
            if e > BARS[m] or (m == "fp32" and e > 2 * r["scipy"]) or e > r[m]["predicted"]:
                bad.append(f"n={r['n']} {m}: {r[m]['tree']} measured {e:.2e}, predicted {r[m]['predicted']:.2e}, "
                           f"bar {BARS[m]:.0e}, scipy {r['scipy']:.2e}")
    return bad


def plot(rows, path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return False
    pow2 = sorted((r for r in rows if r["n"] & (r["n"] - 1) == 0), key=lambda r: r["n"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ns = [r["n"] for r in pow2]
    for m in MODES:
        pts = [(r["n"], r[m]["error"]) for r in pow2 if r[m].get("tree") is not None]
        ax.loglog([p[0] for p in pts], [max(p[1], 1e-17) for p in pts], "o-", label=f"trnplan {m}")
    ax.loglog(ns, [r["scipy"] for r in pow2], "k--", label="scipy.fft complex64")
    ax.loglog(ns, [r["torch"] for r in pow2], "k:", label="torch.fft complex64")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n")
    ax.set_ylabel("relative L2 error vs numpy complex128")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", nargs="+", default=["solvers", "picks"], choices=["solvers", "picks"])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--max-log2", type=int, default=20)
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES), help="solvers section: modes")
    ap.add_argument("--strategies", nargs="+", default=None,
                    help="solvers section: strategies (default: every registered solver, then GEMM_ONLY_TREES)")
    ap.add_argument("--out", default="bench/out")
    args = ap.parse_args()
    rng = np.random.default_rng(1234)
    os.makedirs(args.out, exist_ok=True)
    failed = []
    if "solvers" in args.section:
        rows = solvers_section(args.batches, rng, args.modes, args.strategies)
        with open(os.path.join(args.out, "accuracy.json"), "w") as f:
            json.dump(rows, f, indent=1)
        failed += [f"UNDER-PREDICTED: {r}" for r in rows if r["ratio"] >= 1]
    if "picks" in args.section:
        rows = picks_section(args.max_log2, rng)
        with open(os.path.join(args.out, "precision_picks.json"), "w") as f:
            json.dump(rows, f, indent=1)
        table = picks_table(rows)
        with open(os.path.join(args.out, "precision_picks.md"), "w") as f:
            f.write(table + "\n")
        print(table)
        plot(rows, os.path.join(args.out, "precision.png"))
        failed += [f"OVER THE BAR: {b}" for b in picks_failures(rows)]
    for line in failed:
        print(line)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
