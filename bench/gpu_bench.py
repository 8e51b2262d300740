"""The GPU race: trnplan's plans in every precision mode against cuFFT, in one process.

    python bench/gpu_bench.py --out DIR [--quick] [--aot] [--inductor]

Batched c2c complex64 with B·N = 2^24 for N ∈ {64, 256, 1024, 4096, 16384, 65536}, plus fft2
1024² × 16 and an STFT row. Columns: cuFFT (torch.fft, complex64), trnplan's pick in each
precision mode (fp32, tf32, bf16, bf16x3, bf16x6; eager torch on the GPU), and trnplan's pick
for tol 1e-2, 1e-5, 1e-6 (precision="auto"). Every cell: median time of repeats after a
warm-up (CUDA events), effective bandwidth (16 bytes per point read + written ÷ time, against
the card's HBM peak), and relative L2 error against an fp64 reference (cuFFT in complex128 on
the same input; one size is cross-checked against numpy.fft in complex128).

Writes DIR/gpu_bench.json (machine, versions, every cell) and DIR/gpu_bench.md (the tables).
Nothing here asserts a time: the numbers go to docs/gpu.md and docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, ".")
import trnplan

MODES = ["fp32", "tf32", "bf16", "bf16x3", "bf16x6"]
TOLS = [1e-2, 1e-5, 1e-6]
#: HBM peak by GPU name fragment, TB/s (vendor datasheets: H100 SXM5 3.35, H200 4.8, A100 80GB 2.0)
HBM_PEAK = {"H200": 4.8, "H100": 3.35, "A100": 2.0}


def hbm_peak(name: str) -> float | None:
    return next((v for k, v in HBM_PEAK.items() if k in name), None)


DEVICE = "cuda"


def cuda_time_ms(fn, repeats: int, warmup: int = 3) -> float:
    """Median of ``repeats`` timed calls after a warm-up: CUDA events on the GPU (the dry run on
    the CPU uses perf_counter)."""
    for _ in range(warmup):
        fn()
    if DEVICE != "cuda":
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm((y.to(ref.dtype) - ref).flatten()) / torch.linalg.vector_norm(ref.flatten()))


def cell(label, fn, ref, points, peak, repeats, plan=None):
    try:
        y = fn()
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        ms = cuda_time_ms(fn, repeats)
        err = rel_err(y, ref)
        out = {"label": label, "ms": ms, "err": err, "gbs": 16 * points / (ms * 1e-3) / 1e9}
        if peak:
            out["peak_frac"] = out["gbs"] / (peak * 1e3)
        if plan is not None:
            out["tree"] = str(plan.tree)
            out["precision"] = plan.problem.precision
            out["predicted_err"] = plan.tree.error
        return out
    except Exception as exc:  # noqa: BLE001 - a failing cell is reported, not fatal
        return {"label": label, "failed": f"{type(exc).__name__}: {str(exc)[:300]}"}


def row(title, x, ref, points, plan_args, peak, repeats, extra=()):
    cells = [cell("cuFFT", lambda: torch.fft.fftn(x, dim=plan_args["dims"]), ref, points, peak, repeats)]
    for mode in MODES:
        try:
            plan = trnplan.plan_many(plan_args["shape"], batch=plan_args["batch"], device=DEVICE, precision=mode,
                                     compile="eager", cache=None)
            cells.append(cell(mode, lambda p=plan: p.execute(x), ref, points, peak, repeats, plan))
        except Exception as exc:  # noqa: BLE001
            cells.append({"label": mode, "failed": f"{type(exc).__name__}: {str(exc)[:300]}"})
    for tol in TOLS:
        try:
            plan = trnplan.plan_many(plan_args["shape"], batch=plan_args["batch"], device=DEVICE, precision="auto",
                                     tol=tol, compile="eager", cache=None)
            cells.append(cell(f"auto tol {tol:g}", lambda p=plan: p.execute(x), ref, points, peak, repeats, plan))
        except Exception as exc:  # noqa: BLE001
            cells.append({"label": f"auto tol {tol:g}", "failed": f"{type(exc).__name__}: {str(exc)[:300]}"})
    for label, strategy, precision, compile_mode in extra:
        try:
            t0 = time.perf_counter()
            plan = trnplan.plan_many(plan_args["shape"], batch=plan_args["batch"], device=DEVICE, precision=precision,
                                     strategy=strategy, compile=compile_mode, cache=None, tol=1e-2)
            built = time.perf_counter() - t0
            c = cell(label, lambda p=plan: p.execute(x), ref, points, peak, repeats, plan)
            c["build_s"] = built
            cells.append(c)
        except Exception as exc:  # noqa: BLE001
            cells.append({"label": label, "failed": f"{type(exc).__name__}: {str(exc)[:300]}"})
    print(f"[{title}] " + "; ".join(
        f"{c['label']}: {c['ms']:.3f} ms err {c['err']:.1e}" if "ms" in c else f"{c['label']}: FAILED"
        for c in cells), flush=True)
    return {"title": title, "points": points, "cells": cells}


def markdown(rows, peak) -> str:
    lines = []
    labels = []
    for r in rows:
        for c in r["cells"]:
            if c["label"] not in labels:
                labels.append(c["label"])
    lines.append("| problem | " + " | ".join(labels) + " |")
    lines.append("|---|" + "---|" * len(labels))
    for r in rows:
        base = next((c["ms"] for c in r["cells"] if c["label"] == "cuFFT" and "ms" in c), None)
        out = []
        by = {c["label"]: c for c in r["cells"]}
        for label in labels:
            c = by.get(label)
            if c is None:
                out.append("—")
            elif "failed" in c:
                out.append("fails")
            else:
                ratio = f", {base / c['ms']:.2f}× cuFFT" if base and label != "cuFFT" else ""
                frac = f", {100 * c['peak_frac']:.0f}% HBM" if "peak_frac" in c else ""
                out.append(f"{c['ms']:.3f} ms{ratio}{frac}; err {c['err']:.1e}")
        lines.append(f"| {r['title']} | " + " | ".join(out) + " |")
    lines.append("")
    lines.append("Trees picked (precision: tree):")
    lines.append("")
    for r in rows:
        for c in r["cells"]:
            if "tree" in c:
                lines.append(f"- {r['title']}, {c['label']}: `{c['tree']}` (predicted err {c['predicted_err']:.1e})")
            elif "failed" in c:
                lines.append(f"- {r['title']}, {c['label']}: {c['failed']}")
    return "\n".join(lines)


def _device_info(dry_run_cpu: bool):
    """(info, HBM peak TB/s, log2 of the elements per row) of the GPU, or of the CPU dry run (sets DEVICE)."""
    global DEVICE
    scale = 24
    if dry_run_cpu:
        DEVICE, scale = "cpu", 16
        info = {"gpu": "none (CPU dry run)", "capability": "-", "torch": torch.__version__}
        peak = None
    else:
        if not torch.cuda.is_available():
            sys.exit("gpu_bench needs a CUDA GPU (or --dry-run-cpu)")
        props = torch.cuda.get_device_properties(0)
        peak = hbm_peak(props.name)
        info = {"gpu": props.name, "capability": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
                "torch": torch.__version__, "cuda": torch.version.cuda}
    info.update(python=platform.python_version(), hbm_peak_tbs=peak, trnplan=trnplan.__version__)
    with contextlib.suppress(Exception):  # a driver query torch may not have: the table just leaves it out
        info["driver"] = torch._C._cuda_getDriverVersion()
    return info, peak, scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    ap.add_argument("--aot", action="store_true", help="also time AOTInductor-compiled GEMM trees (slow to build)")
    ap.add_argument("--inductor", action="store_true",
                    help="also time torch.compile'd (compile='inductor') GEMM trees at n = 256 and 4096")
    ap.add_argument("--dry-run-cpu", action="store_true", help="run the script's logic on the CPU at 1/256 size")
    args = ap.parse_args()
    info, peak, scale = _device_info(args.dry_run_cpu)
    print(json.dumps(info), flush=True)
    repeats = 5 if args.quick else 20
    sizes = [256, 4096] if args.quick else [64, 256, 1024, 4096, 16384, 65536]
    rows = []
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    for n in sizes:
        b = max(1, (1 << scale) // n)
        x = torch.randn(b, n, dtype=torch.complex64, device=DEVICE, generator=gen)
        ref = torch.fft.fft(x.to(torch.complex128))
        if n == 4096:  # cross-check the fp64 reference against numpy on a slice
            x_np = x[:8].cpu().numpy().astype(np.complex128)
            info["ref_check_4096"] = float(np.linalg.norm(ref[:8].cpu().numpy() - np.fft.fft(x_np))
                                           / np.linalg.norm(np.fft.fft(x_np)))
        extra = []
        if args.aot and n == 4096:  # one AOTInductor build (30–90 s on a GPU): does fusion pay?
            extra = [("bf16 aot", None, "bf16", "aot")]
        if args.inductor and n in (256, 4096):  # torch.compile'd GEMM trees (seconds each): does fusion pay?
            gemm_tree = "(dft-gemm)" if n == 256 else "(four-step 4096=64x64 (dft-gemm) (dft-gemm))"
            extra += [(f"{mode} inductor", gemm_tree, mode, "inductor") for mode in ("fp32", "bf16", "bf16x3")]
        rows.append(row(f"c2c {b}×{n}", x, ref, b * n, {"shape": (n,), "batch": b, "dims": (-1,)}, peak, repeats, extra))
        del x, ref
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    # fft2 1024² × 16
    side, images = (1024, 16) if DEVICE == "cuda" else (128, 2)
    x = torch.randn(images, side, side, dtype=torch.complex64, device=DEVICE, generator=gen)
    ref = torch.fft.fftn(x.to(torch.complex128), dim=(-2, -1))
    rows.append(row(f"fft2 {images}×{side}²", x, ref, x.numel(), {"shape": (side, side), "batch": images, "dims": (-2, -1)},
                    peak, repeats))
    del x, ref
    # STFT row: 16 000 samples, n_fft 512, hop 128 (as the CPU grid), batch 64
    stft = {}
    if hasattr(trnplan, "stft"):
        sig = torch.randn(64, 16000, device=DEVICE, generator=gen)
        win = torch.hann_window(512, device=DEVICE)
        ref = torch.stft(sig.double(), 512, 128, window=win.double(), return_complex=True)
        for label, fn in (("torch.stft (cuFFT)", lambda: torch.stft(sig, 512, 128, window=win, return_complex=True)),
                          ("trnplan.stft", lambda: trnplan.stft(sig, 512, 128, window=win, return_complex=True))):
            stft[label] = cell(label, fn, ref, ref.numel(), None, repeats)
        print("[stft] " + json.dumps(stft), flush=True)
    result = {"info": info, "rows": rows, "stft": stft}
    import os

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = [(f"GPU: {info['gpu']} (sm {info['capability']}), torch {info['torch']}, CUDA {info.get('cuda')}, "
          f"driver {info.get('driver')}, HBM peak {peak} TB/s"), "", markdown(rows, peak)]
    if stft:
        md += ["", "| STFT 64 × 16 000 samples, n_fft 512, hop 128 | time | error |", "|---|---|---|"]
        for label, c in stft.items():
            md.append(f"| {label} | {c['ms']:.3f} ms | {c['err']:.1e} |" if "ms" in c else f"| {label} | fails | |")
    with open(os.path.join(args.out, "gpu_bench.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        raise
