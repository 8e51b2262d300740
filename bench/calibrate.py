"""Measure the constants of a backend's cost profile on this machine (see trnplan/core/cost.py).

    python bench/calibrate.py [--device cpu|cuda]
    python bench/calibrate.py --fit [--quick] [--threads 1,2] [--seconds S] [--json out.json]

Prints dispatch latency, GEMM rate per dtype (on CUDA also bf16 tensors into fp32, and TF32),
elementwise bandwidth and the native FFT's sustained 5·n·log2(n) rate, each a median of repeats. The numbers in trnplan/backends/*.py were
taken with this script; rerun it on a new machine and compare.

``--fit`` instead times the CPU FFT leaves (torch.fft, pyFFTW, mkl_fft, scipy) through trnplan's
plans on a training grid, fits the leaf cost model, prints its rms log-error on a disjoint held-out
grid (and the uncalibrated constants' on the same grid), and stores the fit in the plan cache the
planner reads (TRNPLAN_CACHE_DIR or ~/.cache/trnplan), per machine and thread count:
trnplan.tools.calibrate.fit_cpu_model.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import torch

sys.path.insert(0, ".")  # trnplan from the checkout (bench/gpu_check.sh sets PYTHONPATH as well)


#: GEMM shapes (rows, contraction, columns) of the solvers: the truncated solver's pruned passes at
#: issue 30's FNO shapes and the dft-gemm leaves' batched products
SKINNY = ((512, 1024, 32), (512, 1024, 128), (16384, 128, 32), (2048, 256, 64), (4096, 128, 48), (8192, 64, 128),
          (16384, 32, 64), (32768, 64, 24), (65536, 16, 32))


def median_us(fn, repeats=30, warmup=5, sync=lambda: None):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def fit_main(args):
    """--fit: the leaf cost model per thread count, stored in the default plan cache."""
    from trnplan.cache import default_cache
    from trnplan.tools.calibrate import fit_cpu_model

    reports = []
    threads = [int(t) for t in args.threads.split(",")] if args.threads else [torch.get_num_threads()]
    for t in threads:
        report = fit_cpu_model(default_cache(), threads=t, quick=args.quick, seconds=args.seconds)
        print(report.describe(), flush=True)
        reports.append({"threads": t, "rms_train": report.rms_train, "rms_heldout": report.rms_heldout,
                        "rms_default": report.rms_default, "seconds": report.seconds, "grid": report.grid,
                        "per_leaf": report.per_leaf, "stored": report.stored})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--fit", action="store_true", help="fit the CPU leaf cost model and store it in the plan cache")
    ap.add_argument("--quick", action="store_true", help="with --fit: the smaller grids (about 40 s)")
    ap.add_argument("--threads", help="with --fit: comma-separated torch thread counts (default: the current)")
    ap.add_argument("--seconds", type=float, help="with --fit: time limit per thread count")
    ap.add_argument("--json", help="with --fit: write the reports (grids, timings) here")
    args = ap.parse_args()
    if args.fit:
        return fit_main(args)
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    out = {"device": args.device, "threads": torch.get_num_threads(), "torch": torch.__version__}
    tiny = torch.ones(8, device=dev)
    out["launch_us"] = median_us(lambda: tiny * tiny, 200, sync=sync)
    for dtype in (torch.float32, torch.float64):
        name = str(dtype).removeprefix("torch.")
        rates = {}
        for m, k, n in ((1024, 1024, 1024), (64, 128, 65536), (4096, 16, 16)):
            a, b = torch.randn(m, k, dtype=dtype, device=dev), torch.randn(k, n, dtype=dtype, device=dev)
            t = median_us(lambda a=a, b=b: torch.mm(a, b), 10, sync=sync)
            rates[f"{m}x{k}x{n}"] = round(2 * m * k * n / t / 1e3, 1)
        out[f"gemm_gflops_{name}"] = rates
        # the solvers' own GEMMs are skinny: rows × n @ n × 2m (the pruned DFT passes of the truncated
        # solver, dft-gemm leaves); the CPU profile's rate is the median of these (issue 30)
        skinny = {}
        for m, k, n in SKINNY:
            a, b = torch.randn(m, k, dtype=dtype, device=dev), torch.randn(k, n, dtype=dtype, device=dev)
            t = median_us(lambda a=a, b=b: torch.mm(a, b), 10, sync=sync)
            skinny[f"{m}x{k}x{n}"] = round(2 * m * k * n / t / 1e3, 1)
        out[f"gemm_gflops_skinny_{name}"] = {**skinny, "median": statistics.median(skinny.values())}
        x = torch.randn(1 << 22, dtype=dtype, device=dev)
        t = median_us(lambda x=x: x * x, 20, sync=sync)
        out[f"bandwidth_gbs_{name}"] = round(3 * x.numel() * x.element_size() / t / 1e3, 1)
        cdt = torch.complex64 if dtype == torch.float32 else torch.complex128
        ffts = {}
        for n, b in ((256, 4096), (4096, 256), (65536, 16), (65536, 1), (256, 1)):
            z = torch.randn(b, n, dtype=cdt, device=dev)
            t = median_us(lambda z=z: torch.fft.fft(z), 10, sync=sync)
            ffts[f"{b}x{n}"] = {"us": round(t, 1), "gflops": round(5 * n * math.log2(n) * b / t / 1e3, 1)}
        out[f"fft_{name}"] = ffts
    if dev.type == "cuda":  # the tensor-core rates the CUDA profile prices the bf16 and tf32 modes at
        from trnplan.kernels.gemm import native_bf16_matmul, tf32_scope

        for name in ("bfloat16", "tf32"):
            rates = {}
            for m, k, n in ((1024, 1024, 1024), (64, 128, 65536), (262144, 128, 128), (4096, 16, 16)):
                if name == "bfloat16":
                    if not native_bf16_matmul("cuda"):
                        break
                    a = torch.randn(m, k, device=dev).to(torch.bfloat16)
                    b = torch.randn(k, n, device=dev).to(torch.bfloat16)
                    t = median_us(lambda a=a, b=b: torch.mm(a, b, out_dtype=torch.float32), 10, sync=sync)
                else:
                    a, b = torch.randn(m, k, device=dev), torch.randn(k, n, device=dev)
                    with tf32_scope():
                        t = median_us(lambda a=a, b=b: torch.mm(a, b), 10, sync=sync)
                rates[f"{m}x{k}x{n}"] = round(2 * m * k * n / t / 1e3, 1)
            out[f"gemm_gflops_{name}"] = rates
    ratios = {}
    for shape in ((256, 256), (1024, 1024), (64, 1024, 16)):
        x = torch.randn(*shape, device=dev)
        plain = median_us(lambda x=x: x.clone(), 20, sync=sync)
        moved = median_us(lambda x=x: x.transpose(-1, -2).contiguous(), 20, sync=sync)
        ratios["x".join(map(str, shape))] = round(moved / plain, 2)
    out["transpose_vs_copy"] = ratios
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
