"""Measure XLA:CPU's own all-to-all on virtual SPMD devices: latency and bandwidth for trnplan's cost model.

Runs one SPMD program that only reshards a (2, n, n) float32 array from axis 1 to axis 2 (one
all-to-all: the reshard trnplan.spmd's exchanges are, which tests/xla/test_spmd.py audits in
the compiled HLO; this script does not re-audit it), at several sizes, on ``CPU_NUM_DEVICES`` virtual
devices; fits time = latency + bytes_sent_per_device / bandwidth by least squares over the fastest
call per size (the machine is shared: the medians are printed too).

Usage (the torch-xla lane's venv)::

    PJRT_DEVICE=CPU CPU_NUM_DEVICES=4 python bench/spmd_collectives.py [--quick] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch
import torch_xla
import torch_xla.debug.metrics as met
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    ap.add_argument("--json", help="write the rows and the fit here")
    args = ap.parse_args()
    xr.use_spmd()
    p = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(p), (p,), ("p",))
    dev = torch_xla.device()
    sizes = (64, 256, 512) if args.quick else (64, 128, 256, 512, 1024)
    repeats = 10 if args.quick else 30
    rows = []
    for n in sizes:
        x = xs.mark_sharding(torch.randn(2, n, n).to(dev), mesh, (None, "p", None)).global_tensor
        times = []
        for i in range(repeats + 1):
            y = xs.mark_sharding(x + 0, mesh, (None, "p", None)).global_tensor
            y = xs.mark_sharding(y, mesh, (None, None, "p")).global_tensor
            t0 = time.perf_counter()
            torch_xla.sync()
            torch_xla._XLAC._xla_wait_device_ops([])
            if i:  # the first call compiles
                times.append(time.perf_counter() - t0)
        sent = 2 * n * n * 4 // p * (p - 1) // p  # bytes each device sends
        compiles = met.counter_value("UncachedCompile")
        rows.append({"n": n, "bytes_sent_per_device": sent, "median_us": statistics.median(times) * 1e6,
                     "min_us": min(times) * 1e6, "compiles_so_far": compiles})
        print(f"n={n:5d}  sent/device {sent:10d} B  median {rows[-1]['median_us']:9.1f} us  "
              f"min {rows[-1]['min_us']:9.1f} us  compiles so far {compiles}", flush=True)
    a = np.array([[1.0, r["bytes_sent_per_device"]] for r in rows])
    b = np.array([r["min_us"] for r in rows])  # the least-disturbed call: the machine is shared
    (lat, inv_bw), *_ = np.linalg.lstsq(a, b, rcond=None)
    fit = {"devices": p, "latency_us": float(lat), "bandwidth_gbs": float(1e-3 / inv_bw) if inv_bw > 0 else None}
    print(json.dumps(fit))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "fit": fit}, f, indent=1)


if __name__ == "__main__":
    main()
