"""Measure each solver's relative L2 error against numpy.fft (complex128) and the model's prediction.

    python bench/accuracy.py [--batches 1 4] [--out bench/out]

For every solver (forced at the root; children planned freely, and once more with GEMM-only
children for the composites), precision and size of the engine's test grid, prints the
measured error, the accuracy model's predicted bound, and their ratio; writes JSON. The
constants in trnplan/planner/*.py (ERROR_C …) were fitted from this table: the prediction must
stay above every measurement (ratio < 1). Two batch sizes by default, because MKL's sgemm sums
1–3 rows sequentially (larger error) and 4+ rows blockwise.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import torch

import trnplan

SIZES = [1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 64, 97, 100, 127, 128, 256, 500, 512, 997, 1000, 1024,
         4096, 4097, 8192, 65536]
STRATEGIES = list(trnplan.solver_names()) + ["(four-step _ dft-gemm dft-gemm)", "(bluestein _ stockham stockham)"]


def rel_l2(y: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--out", default="bench/out")
    args = ap.parse_args()
    rng = np.random.default_rng(1234)
    rows = []
    for precision, dtype in (("fp32", torch.complex64), ("fp64", torch.complex128)):
        for strategy in STRATEGIES:
            for n, batch, inverse in ((n, b, i) for n in SIZES for b in args.batches for i in (False, True)):
                spec = strategy.replace("_", str(n), 1) if strategy.startswith("(") else strategy
                try:
                    plan = trnplan.plan_many(n, batch=batch, strategy=spec, dtype=dtype,
                                             inverse=inverse, tol=1.0)
                except trnplan.PlanningError:
                    continue
                x = rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))
                y = plan(torch.from_numpy(x).to(dtype)).numpy()
                ref = np.fft.ifft(x) if inverse else np.fft.fft(x)
                err = rel_l2(y, ref)
                rows.append({"precision": precision, "strategy": strategy, "n": n, "batch": batch, "inverse": inverse,
                             "tree": str(plan.tree), "error": err, "predicted": plan.tree.error,
                             "ratio": err / plan.tree.error})
    worst = {}
    for r in rows:
        key = (r["precision"], r["strategy"])
        if key not in worst or r["ratio"] > worst[key]["ratio"]:
            worst[key] = r
    print("| precision | strategy | worst at batch×n | measured | predicted | ratio |\n|---|---|---|---|---|---|")
    for (precision, strategy), r in worst.items():
        print(f"| {precision} | `{strategy}` | {r['batch']}×{r['n']} | {r['error']:.2e} | {r['predicted']:.2e} "
              f"| {r['ratio']:.2f} |")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "accuracy.json"), "w") as f:
        json.dump(rows, f, indent=1)
    bad = [r for r in rows if r["ratio"] >= 1]
    for r in bad:
        print(f"UNDER-PREDICTED: {r}")
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
