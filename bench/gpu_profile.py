"""Where the GEMM trees' time goes on a GPU: a per-op / per-kernel profile, and the race against cuFFT.

    python bench/gpu_profile.py --out DIR [--device cuda|cpu] [--scale 24] [--repeats 20] [--no-inductor]

For batched 1-D c2c at n = 256, 1024, 4096 and 2-D 256² (complex64, 2^scale points in all), in the
fp32, bf16 and bf16x3 modes, a forced GEMM tree (``(dft-gemm 256)``, the 32×32 and 64×64 four-steps
of dft-gemm leaves, the row-column 256² of dft-gemm leaves) and the planner's own pick are

* timed (median of ``repeats`` calls after warm-ups; CUDA events) eager and compiled
  (``compile="inductor"``), against cuFFT (``torch.fft``, complex64) on the same input;
* checked against numpy.fft in complex128 on the first rows, at the mode's bar (``DEFAULT_TOL``);
* profiled: eager plans op by op (a ``TorchDispatchMode`` that times each aten op with CUDA events
  and counts its bytes in and out and, for matmuls, its flops: achieved GB/s and TFLOP/s against
  the card's peaks); compiled plans kernel by kernel (``torch.profiler``; the GEMM kernels' TFLOP/s
  from the flops the eager profile counted for the same tree).

Writes DIR/gpu_profile.json and DIR/gpu_profile.md. ``--device cpu`` runs the same logic on the
CPU at a small scale (the dry run of the device check; CPU times mean nothing for the GPU).
Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, ".")
import trnplan
from trnplan.core.accuracy import DEFAULT_TOL

#: datasheet peaks by GPU name fragment (NVIDIA H100 SXM5 / H200 datasheets): HBM TB/s, dense bf16
#: tensor TFLOP/s, fp32 (CUDA-core) TFLOP/s. An 8192³ bf16 matmul measured 769-798 on these cards.
PEAKS = {"H200": (4.8, 989.0, 67.0), "H100": (3.35, 989.0, 67.0)}
MODES = ("fp32", "bf16", "bf16x3")
CASES = (  # label, shape, forced GEMM tree
    ("n=256", (256,), "(dft-gemm 256)"),
    ("n=1024", (1024,), "(four-step 1024=32x32 (dft-gemm) (dft-gemm))"),
    ("n=4096", (4096,), "(four-step 4096=64x64 (dft-gemm) (dft-gemm))"),
    ("256²", (256, 256), "(nd 65536=256x256 method=rowcol (dft-gemm 256) (dft-gemm 256))"),
)
#: aten ops that move no data (views, metadata); not timed or counted
VIEW_OPS = {"view", "_unsafe_view", "as_strided", "permute", "select", "slice", "t", "transpose", "expand",
            "_reshape_alias", "alias", "view_as_complex", "view_as_real", "unsqueeze", "squeeze", "detach",
            "reshape", "unbind", "split", "chunk", "real", "imag", "movedim", "lift_fresh", "empty", "empty_like",
            "new_empty", "empty_strided"}
DEVICE = "cuda"
RACE_ONLY = False  # --race-only: times and errors, no op or kernel profile


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def timed_ms(fn, repeats: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        if DEVICE == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def host_us(fn, calls: int = 10) -> float:
    """The host's time per call, launches only (no synchronize inside: the GPU queue absorbs the
    work). Where it exceeds the GPU time, the GPU waits for the host: the time is the host's."""
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t0) / calls * 1e6
    sync()
    return host


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in _flat(item)]
    return []


def _mm_flops(name, args, out) -> float:
    if name in ("mm", "bmm", "addmm", "baddbmm", "matmul"):
        a = [t for t in args if isinstance(t, torch.Tensor)][-2]
        return 2.0 * out.numel() * a.shape[-1]
    return 0.0


class OpProfile(TorchDispatchMode):
    """Each aten op of one call: name, shapes, dtypes, bytes read + written, flops, time (CUDA
    events around the op: the GPU's time for it, the ops run back to back)."""

    def __init__(self):
        super().__init__()
        self.rows = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in VIEW_OPS:
            return func(*args, **kwargs)
        if DEVICE == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = func(*args, **kwargs)
            end.record()
        else:
            t0 = time.perf_counter()
            out = func(*args, **kwargs)
            start, end = t0, time.perf_counter()
        ins, outs = _flat(list(args) + list(kwargs.values())), _flat(out)
        self.rows.append({"op": name, "shapes": [list(t.shape) for t in ins][:3],
                          "dtypes": sorted({str(t.dtype).replace("torch.", "") for t in ins + outs}),
                          "bytes": _bytes(ins) + _bytes(outs), "flops": _mm_flops(name, args, outs[0]) if outs else 0.0,
                          "_ev": (start, end)})
        return out

    def finish(self):
        sync()
        for r in self.rows:
            start, end = r.pop("_ev")
            r["ms"] = start.elapsed_time(end) if DEVICE == "cuda" else (end - start) * 1e3
        return self.rows


def eager_ops(plan, x):
    plan.execute(x)  # warm (lazy buffers, cuBLAS handles)
    sync()
    prof = OpProfile()
    with prof:
        plan.execute(x)
    return prof.finish()


def kernel_table(fn, calls: int = 5):
    """torch.profiler's device kernels of ``calls`` calls: name, calls per call of fn, µs per call of fn."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(calls):
            fn()
        sync()
    rows = []
    events = list(prof.key_averages())
    # on the GPU: the kernels themselves (device-side events), not the aten ops or compiled regions above them
    kernels = [e for e in events if str(getattr(e, "device_type", "")).endswith("CUDA")] or [
        e for e in events if not e.key.startswith(("aten::", "cuda", "Torch-Compiled", "##", "CompiledFunction"))]
    for e in kernels if DEVICE == "cuda" else events:
        if DEVICE == "cuda":
            us = getattr(e, "device_time_total", None)
            if us is None:
                us = getattr(e, "cuda_time_total", 0.0)
            if us <= 0 or e.key.startswith(("Memcpy", "Memset")):
                continue
        else:  # CPU dry run: the compiled graph's own kernels and aten calls, self time
            if not (e.key.startswith("aten::") or "kernel" in e.key.lower() or e.key.startswith("cpp_fused")):
                continue
            us = e.self_cpu_time_total
        rows.append({"kernel": e.key[:90], "calls": e.count / calls, "us": us / calls})
    rows.sort(key=lambda r: -r["us"])
    return rows


def is_gemm_kernel(name: str) -> bool:
    low = name.lower()
    return any(k in low for k in ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "cublas", "aten::mm", "aten::bmm",
                                  "addmm", "extern_kernels"))


def accuracy(y, x, shape) -> float:
    rows = min(16, x.shape[0])
    xs = x[:rows].cpu().numpy().astype(np.complex128)
    ref = np.fft.fftn(xs, axes=tuple(range(-len(shape), 0)))
    ys = y[:rows].cpu().numpy().astype(np.complex128)
    return float(np.linalg.norm(ys - ref) / np.linalg.norm(ref))


def one_plan(case, mode, compile_mode, strategy, x, batch, repeats, peaks):
    label, shape, _ = case
    out = {"case": label, "mode": mode, "compile": compile_mode, "strategy": strategy or "planner"}
    if compile_mode.startswith("inductor:"):  # a torch.compile mode, e.g. inductor:reduce-overhead (CUDA graphs)
        compile_mode, os.environ["TRNPLAN_INDUCTOR_MODE"] = "inductor", compile_mode.split(":", 1)[1]
    else:
        os.environ.pop("TRNPLAN_INDUCTOR_MODE", None)
    try:
        trnplan.clear_plan_cache()  # the in-process memo does not key on TRNPLAN_INDUCTOR_MODE
        t0 = time.perf_counter()
        plan = trnplan.plan_many(shape, batch=batch, device=DEVICE, precision=mode, strategy=strategy,
                                 compile=compile_mode, cache=None)
        out["build_s"] = time.perf_counter() - t0
        out["tree"], out["predicted_err"] = str(plan.tree), plan.tree.error
        out["runner"] = type(plan._runner).__name__ if plan._runner is not None else "eager"
        y = plan.execute(x)
        sync()
        out["err"] = accuracy(y, x, shape)
        out["bar"] = DEFAULT_TOL[mode]
        out["within_bar"] = out["err"] <= out["bar"]
        del y
        out["ms"] = timed_ms(lambda: plan.execute(x), repeats)
        out["host_us"] = host_us(lambda: plan.execute(x))
        points = x.numel()
        out["gbs_min_traffic"] = 16 * points / (out["ms"] * 1e-3) / 1e9
        if RACE_ONLY:
            return out
        if compile_mode == "eager":
            ops = eager_ops(plan, x)
            out["ops"] = ops
            out["gemm_flops"] = sum(r["flops"] for r in ops)
            out["bytes_moved"] = sum(r["bytes"] for r in ops)
        else:
            out["kernels"] = kernel_table(lambda: plan.execute(x))
        return out
    except Exception as exc:  # noqa: BLE001 - a failing cell is reported, not fatal
        out["failed"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        return out


def run_case(case, modes, compile_modes, scale, repeats, peaks, gen):
    label, shape, tree = case
    n = int(np.prod(shape))
    batch = max(1, (1 << scale) // n)
    x = torch.randn(batch, *shape, dtype=torch.complex64, device=DEVICE, generator=gen)
    dims = tuple(range(-len(shape), 0))
    fft = {"case": label, "mode": "cuFFT" if DEVICE == "cuda" else "torch.fft", "compile": "-", "strategy": "library"}
    y = torch.fft.fftn(x, dim=dims)
    fft["err"] = accuracy(y, x, shape)
    del y
    fft["ms"] = timed_ms(lambda: torch.fft.fftn(x, dim=dims), repeats)
    fft["gbs_min_traffic"] = 16 * x.numel() / (fft["ms"] * 1e-3) / 1e9
    if not RACE_ONLY:
        fft["kernels"] = kernel_table(lambda: torch.fft.fftn(x, dim=dims))
    cells = [fft]
    for mode in modes:
        for compile_mode in compile_modes:
            cells.append(one_plan(case, mode, compile_mode, tree, x, batch, repeats, peaks))
        if mode != "fp32":  # the planner's own pick in the mode (fp32 picks cuFFT itself)
            cells.append(one_plan(case, mode, "eager", None, x, batch, repeats, peaks))
        if mode == "bf16" and "inductor" in compile_modes and DEVICE == "cuda":  # CUDA graphs: no launch overhead
            cells.append(one_plan(case, mode, "inductor:reduce-overhead", tree, x, batch, repeats, peaks))
    for c in cells:
        c["batch"], c["points"] = batch, x.numel()
        print(summary_line(c, fft), flush=True)
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return cells


def summary_line(c, fft) -> str:
    head = f"[{c['case']} {c['mode']} {c['compile']} {c['strategy']}]"
    if "failed" in c:
        return f"{head} FAILED {c['failed']}"
    ratio = fft["ms"] / c["ms"]
    return f"{head} {c['ms']:.3f} ms ({ratio:.2f}x cuFFT) err {c['err']:.2e} {c.get('tree', '')}"


def op_table(c, peaks) -> list[str]:
    hbm, bf16_peak, fp32_peak = peaks or (None, None, None)
    lines = ["| op | shapes (first inputs) | dtypes | µs | share | MB moved | GB/s (% HBM) | TFLOP/s (% peak) |",
             "|---|---|---|---|---|---|---|---|"]
    total = sum(r["ms"] for r in c["ops"]) or 1.0
    for r in c["ops"]:
        gbs = r["bytes"] / (r["ms"] * 1e-3) / 1e9 if r["ms"] > 0 else 0.0
        pct = f" ({100 * gbs / (hbm * 1e3):.0f}%)" if hbm else ""
        tf = ""
        if r["flops"]:
            rate = r["flops"] / (r["ms"] * 1e-3) / 1e12
            peak = bf16_peak if "bfloat16" in r["dtypes"] else fp32_peak
            tf = f"{rate:.1f}" + (f" ({100 * rate / peak:.0f}%)" if peak else "")
        lines.append(f"| {r['op']} | {r['shapes']} | {','.join(r['dtypes'])} | {1e3 * r['ms']:.1f} | "
                     f"{100 * r['ms'] / total:.0f}% | {r['bytes'] / 1e6:.1f} | {gbs:.0f}{pct} | {tf} |")
    return lines


def kernel_lines(c, gemm_flops, peaks, bf16: bool) -> list[str]:
    _, bf16_peak, fp32_peak = peaks or (None, None, None)
    lines = ["| kernel | per call | µs | share |", "|---|---|---|---|"]
    total = sum(r["us"] for r in c["kernels"]) or 1.0
    gemm_us = sum(r["us"] for r in c["kernels"] if is_gemm_kernel(r["kernel"]))
    for r in c["kernels"][:14]:
        lines.append(f"| `{r['kernel']}` | {r['calls']:.0f} | {r['us']:.1f} | {100 * r['us'] / total:.0f}% |")
    if gemm_flops and gemm_us:
        rate = gemm_flops / (gemm_us * 1e-6) / 1e12
        peak = bf16_peak if bf16 else fp32_peak
        lines.append(f"\nGEMM kernels: {gemm_us:.1f} µs of {total:.1f} µs, {rate:.1f} TFLOP/s"
                     + (f" ({100 * rate / peak:.0f}% of the {peak:.0f} peak)" if peak else ""))
    return lines


def markdown(info, cells, peaks) -> str:
    hbm = peaks[0] if peaks else None
    md = [(f"Device: {info['device']}, torch {info['torch']}, CUDA {info.get('cuda')}, "
           f"driver {info.get('driver')}, peaks (datasheet) {peaks}"), "",
          "| case | mode | compile | tree | ms | × cuFFT | host µs/call | GB/s at 16 B/pt" + (" (% HBM)" if hbm else "")
          + " | err | bar | ok |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    base = {c["case"]: c["ms"] for c in cells if c["strategy"] == "library" and "ms" in c}
    for c in cells:
        if "failed" in c:
            md.append(f"| {c['case']} | {c['mode']} | {c['compile']} | {c['strategy']} | fails: {c['failed'][:160]} "
                      f"| | | | | | |")
            continue
        pct = f" ({100 * c['gbs_min_traffic'] / (hbm * 1e3):.0f}%)" if hbm else ""
        md.append(f"| {c['case']} | {c['mode']} | {c['compile']} | `{c.get('tree', c['strategy'])}` | {c['ms']:.3f} | "
                  f"{base[c['case']] / c['ms']:.2f} | {c.get('host_us', 0):.0f} | {c['gbs_min_traffic']:.0f}{pct} | {c['err']:.1e} | "
                  f"{c.get('bar', '')} | {'yes' if c.get('within_bar', True) else 'NO'} |")
    flops = {(c["case"], c["mode"]): c.get("gemm_flops") for c in cells if c["compile"] == "eager"
             and c["strategy"] not in ("planner", "library")}
    for c in cells:
        if "failed" in c or c["strategy"] == "planner":
            continue
        md += ["", f"### {c['case']} {c['mode']} {c['compile']}: `{c.get('tree', c['strategy'])}`, {c['ms']:.3f} ms", ""]
        if "ops" in c:
            md.append(f"{len(c['ops'])} data-moving ops, {c['bytes_moved'] / 1e6:.0f} MB moved "
                      f"({c['bytes_moved'] / (16 * c['points']):.1f}× the 16 B/point minimum), "
                      f"{c['gemm_flops'] / 1e9:.1f} GFLOP in GEMMs")
            md.append("")
            md += op_table(c, peaks)
        elif "kernels" in c:
            md += kernel_lines(c, flops.get((c["case"], c["mode"])), peaks, c["mode"].startswith("bf16"))
    return "\n".join(md) + "\n"


def device_info():
    info = {"torch": torch.__version__, "python": platform.python_version(), "numpy": np.__version__,
            "trnplan": trnplan.__version__}
    if DEVICE == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(device=f"{props.name} (sm {props.major}.{props.minor}, {props.multi_processor_count} SMs)",
                    cuda=torch.version.cuda)
        try:
            from trnplan.backends.cuda import cuda_driver_version

            info["driver"] = cuda_driver_version()
        except Exception as exc:  # noqa: BLE001 - the driver line is nice to have
            info["driver"] = f"unknown ({type(exc).__name__})"
        peaks = next((v for k, v in PEAKS.items() if k in props.name), None)
    else:
        info["device"] = f"CPU dry run ({platform.processor() or platform.machine()})"
        peaks = None
    return info, peaks


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--scale", type=int, default=None, help="log2 of the points per case (cuda 24, cpu 14)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--no-inductor", action="store_true", help="eager plans only")
    ap.add_argument("--cases", default=None, help="comma-separated labels (n=256,n=1024,n=4096,256²)")
    ap.add_argument("--race-only", action="store_true", help="times and errors only (e.g. an older checkout's)")
    args = ap.parse_args()
    global DEVICE, RACE_ONLY
    DEVICE, RACE_ONLY = args.device, args.race_only
    if DEVICE == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_profile needs a CUDA GPU (or --device cpu)")
    scale = args.scale or (24 if DEVICE == "cuda" else 14)
    repeats = args.repeats or (20 if DEVICE == "cuda" else 3)
    info, peaks = device_info()
    info["scale"] = scale
    print(json.dumps(info), flush=True)
    compile_modes = ("eager",) if args.no_inductor else ("eager", "inductor")
    cases = [c for c in CASES if args.cases is None or c[0] in args.cases.split(",")]
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    cells = []
    os.makedirs(args.out, exist_ok=True)
    for case in cases:
        cells += run_case(case, MODES, compile_modes, scale, repeats, peaks, gen)
        # written after every case: a run cut short by its time limit keeps what it measured
        with open(os.path.join(args.out, "gpu_profile.json"), "w") as f:
            json.dump({"info": info, "peaks": peaks, "cells": cells}, f, indent=1)
        md = markdown(info, cells, peaks)
        with open(os.path.join(args.out, "gpu_profile.md"), "w") as f:
            f.write(md)
    print(md.split("\n### ")[0])


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        raise
