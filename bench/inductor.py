"""compile="inductor" against eager: the same plan trees, side by side in one process.

    python bench/inductor.py [--device cpu|cuda] [--markdown FILE]

For a few GEMM trees (the ones the reduced precision modes pick) and precision modes, builds the
plan eagerly and with ``compile="inductor"`` (torch.compile at plan time), checks both against
numpy.fft in complex128, and times both in round-robin rounds (median of repeats after a warm-up;
CUDA-synchronised on a GPU); a compile that falls back to eager stops the run. Prints a table (and replaces the ``<!-- inductor -->`` section of FILE). Nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, ".")
import trnplan

CASES = [  # (n, batch, strategy, precision)
    (64, 1024, "(dft-gemm)", "fp32"),
    (64, 1024, "(dft-gemm)", "bf16x3"),
    (256, 256, "(dft-gemm)", "bf16"),
    (1024, 64, "(stockham 1024=8x8x4x4)", "fp32"),
    (4096, 16, "(four-step 4096=64x64 (dft-gemm) (dft-gemm))", "fp32"),
    (4096, 16, "(four-step 4096=64x64 (dft-gemm) (dft-gemm))", "bf16x3"),
]


def timed_us(fns: dict, device: str, repeats: int = 30) -> dict:
    """Median µs per call of each function, timed in round-robin rounds (one call of each per round)."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    samples = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            if device == "cuda":
                torch.cuda.synchronize()
            samples[k].append((time.perf_counter() - t0) * 1e6)
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--markdown", help="replace the <!-- inductor --> section of this file with the table")
    args = ap.parse_args()
    rows = []
    for n, b, strategy, precision in CASES:
        rng = np.random.default_rng(n)
        x64 = rng.standard_normal((b, n)) + 1j * rng.standard_normal((b, n))
        x = torch.from_numpy(x64.astype(np.complex64)).to(args.device)
        ref = np.fft.fft(x64)
        plans, errs, build = {}, {}, {}
        for mode in ("eager", "inductor"):
            t0 = time.perf_counter()
            plan = trnplan.plan_many(n, batch=b, strategy=strategy, precision=precision, compile=mode, cache=None,
                                     device=args.device)
            build[mode] = time.perf_counter() - t0
            if plan.provenance.compile_mode != mode:  # a failed compile runs eagerly: never time it as compiled
                sys.exit(f"{strategy} {precision}: compile={mode!r} fell back to {plan.provenance.compile_mode} "
                         f"({plan.provenance.compile_reason})")
            y = plan(x).cpu().numpy()
            errs[mode] = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
            plans[mode] = plan
        us = timed_us({mode: (lambda p=p, x=x: p(x)) for mode, p in plans.items()}, args.device)
        tree = str(plans["eager"].tree)
        rows.append(f"| {b}×{n} `{tree}` | {precision} | {us['eager']:.0f} µs ({errs['eager']:.1e}) | "
                    f"{us['inductor']:.0f} µs ({errs['inductor']:.1e}) | {us['eager'] / us['inductor']:.2f}× | "
                    f"{build['inductor']:.1f} s |")
        print(rows[-1], flush=True)
    header = [(f"`python bench/inductor.py --device {args.device}` (torch {torch.__version__}, "
               f"{torch.get_num_threads()} threads); time (error vs numpy complex128):"), "",
              "| problem | mode | eager | inductor | speedup | compile |", "|---|---|---|---|---|---|"]
    table = "\n".join(header + rows)
    print(table)
    if args.markdown:
        with open(args.markdown) as f:
            text = f.read()
        block = f"<!-- inductor -->\n{table}\n<!-- /inductor -->"
        new, count = re.subn(r"<!-- inductor -->.*?<!-- /inductor -->", lambda _m: block, text, flags=re.DOTALL)
        if count != 1:
            sys.exit(f"{args.markdown} has no <!-- inductor --> ... <!-- /inductor --> section")
        with open(args.markdown, "w") as f:
            f.write(new)


if __name__ == "__main__":
    main()
