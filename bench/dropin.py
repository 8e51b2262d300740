"""The drop-in's costs against torch.fft, side by side in one process (a fresh plan cache).

* **new shapes**: the first ``trnplan.fft.fft`` of ``--new`` distinct lengths (each plans once)
  against ``torch.fft.fft`` of the same lengths, and the wisdom records left on disk;
* **seen shapes**: per-call time of ``trnplan.fft.fft`` / ``rfft`` and of ``torch.fft`` on a
  shape already planned, round-robin, medians of ``--rounds`` samples of ``--inner`` calls.

    python bench/dropin.py [--new 200] [--rounds 21] [--inner 200] [--json out.json]

Timings are as good as the machine is quiet; the difference is what matters (the goal: a seen
shape within 2 µs of torch.fft per call).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, ".")  # trnplan from the checkout when run from the repository root


def _new_shapes(count: int) -> dict:
    import trnplan
    from trnplan.cache import default_cache

    lengths = [1000 + 7 * i for i in range(count)]
    xs = [torch.randn(4, n, dtype=torch.complex64) for n in lengths]
    t0 = time.perf_counter()
    for x in xs:
        torch.fft.fft(x)
    torch_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for x in xs:
        trnplan.fft.fft(x)
    trnplan_s = time.perf_counter() - t0
    cache = default_cache()
    return {"lengths": count, "torch_s": torch_s, "trnplan_s": trnplan_s,
            "records": len(cache.records()) if cache is not None else 0}


def _per_call(rounds: int, inner: int) -> list[dict]:
    import trnplan

    rows = []
    for name, shape, dtype in (("fft", (64, 256), torch.complex64), ("fft", (16, 4096), torch.complex64),
                               ("rfft", (64, 256), torch.float32), ("fft", (256,), torch.complex64)):
        x = torch.randn(shape, dtype=dtype)
        fns = {"torch.fft": getattr(torch.fft, name), "trnplan.fft": getattr(trnplan.fft, name)}
        for fn in fns.values():  # plan, warm
            for _ in range(10):
                fn(x)
        samples = {k: [] for k in fns}
        for _ in range(rounds):
            for k, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn(x)
                samples[k].append((time.perf_counter() - t0) / inner * 1e6)
        med = {k: statistics.median(v) for k, v in samples.items()}
        low = {k: min(v) for k, v in samples.items()}  # the least disturbed sample: robust on a busy machine
        rows.append({"call": f"{name} {tuple(shape)} {str(dtype).removeprefix('torch.')}", **med,
                     "extra_us": med["trnplan.fft"] - med["torch.fft"],
                     "min_extra_us": low["trnplan.fft"] - low["torch.fft"]})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new", type=int, default=200, help="distinct new lengths (default 200)")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--inner", type=int, default=200)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    os.environ["TRNPLAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="trnplan-dropin-")  # a fresh cache
    new = _new_shapes(args.new)
    print(f"new shapes: {new['lengths']} lengths, trnplan.fft {new['trnplan_s'] * 1e3:.1f} ms vs torch.fft "
          f"{new['torch_s'] * 1e3:.1f} ms ({new['trnplan_s'] / new['lengths'] * 1e3:.2f} ms per new length); "
          f"{new['records']} records left on disk")
    rows = _per_call(args.rounds, args.inner)
    print(f"\n| call (torch {torch.__version__}, {torch.get_num_threads()} threads) | torch.fft | trnplan.fft | "
          f"extra (medians) | extra (minima) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['call']} | {r['torch.fft']:.2f} µs | {r['trnplan.fft']:.2f} µs | {r['extra_us']:+.2f} µs | "
              f"{r['min_extra_us']:+.2f} µs |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"new_shapes": new, "per_call": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
