"""The drop-in's costs against torch.fft, side by side in one process (a fresh plan cache).

* **new shapes**: the first ``trnplan.fft.fft`` of ``--new`` distinct lengths (each plans once)
  against ``torch.fft.fft`` of the same lengths, and the wisdom records left on disk;
* **seen shapes**: per-call time of ``trnplan.fft.<f>`` and of ``torch.fft.<f>`` on a shape
  already planned, for ``fft ifft rfft irfft fft2 rfft2 fftn`` over unbatched ``(256,)`` and
  ``(1, 256)``, batched ``(64, 256)`` and ``(16, 4096)``, 2-D ``(64, 64)`` and ``(8, 64, 64)``
  (the 2-D functions on inputs of two or more dimensions); the two calls alternate, round-robin,
  and each row gives the medians of ``--rounds`` samples (each as many calls as take about
  ``--sample-us``) and their difference, the difference of the least-disturbed samples, and the
  median difference of single calls made back to back ("paired": the figure a busy machine moves
  least).

    python bench/dropin.py [--new 200] [--rounds 301] [--sample-us 100] [--json out.json]
    python bench/dropin.py --quick              # 20 new lengths, 61 rounds

Timings are as good as the machine is quiet; the difference is what matters (the goal: a seen
shape within 2 µs of torch.fft per call). torch runs on ``--threads`` threads (default 1: on a
busy machine a 2-thread call of these sizes spends most of its time in thread hand-off).
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


#: the functions timed, and the dtype each takes (the real transforms' inputs are float32)
FUNCTIONS = {"fft": torch.complex64, "ifft": torch.complex64, "rfft": torch.float32, "irfft": torch.complex64,
             "fft2": torch.complex64, "rfft2": torch.float32, "fftn": torch.complex64}
SHAPES = ((256,), (1, 256), (64, 256), (16, 4096), (64, 64), (8, 64, 64))


def cases() -> list[tuple]:
    """(function name, input shape, dtype) of every timed call: the 2-D functions on inputs of two or
    more dimensions (on one dimension torch.fft.fft2 raises)."""
    return [(name, shape, dtype) for shape in SHAPES for name, dtype in FUNCTIONS.items()
            if not (name.endswith("2") and len(shape) < 2)]


def _samples(fns: dict, x, rounds: int, n_in: int) -> dict:
    """Per-call µs of each function: ``rounds`` samples of ``n_in`` calls, the functions in turn."""
    samples = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(n_in):
                fn(x)
            samples[k].append((time.perf_counter() - t0) / n_in * 1e6)
    return samples


def _paired(fa, fb, x, pairs: int) -> float:
    """Median over ``pairs`` single calls of ``fb(x)`` minus ``fa(x)`` made back to back (in turn
    first), in µs: a stall hits one pair of thousands, not a whole sample, so this is the figure
    least moved by a busy machine (the clock's own cost is on both sides)."""
    clock, diffs = time.perf_counter_ns, []
    for i in range(pairs):
        first, second = (fb, fa) if i % 2 else (fa, fb)
        t0 = clock()
        first(x)
        t1 = clock()
        second(x)
        t2 = clock()
        ta, tb = (t2 - t1, t1 - t0) if i % 2 else (t1 - t0, t2 - t1)
        diffs.append(tb - ta)
    return statistics.median(diffs) / 1e3


def _per_call(rounds: int, inner: int, sample_us: float) -> list[dict]:
    import trnplan

    rows = []
    for name, shape, dtype in cases():
        x = torch.randn(shape, dtype=dtype)
        fns = {"torch.fft": getattr(torch.fft, name), "trnplan.fft": getattr(trnplan.fft, name)}
        for fn in fns.values():  # plan, warm
            for _ in range(10):
                fn(x)
        t0 = time.perf_counter()
        for _ in range(10):
            fns["torch.fft"](x)
        call_us = max((time.perf_counter() - t0) / 10 * 1e6, 0.1)
        # short samples: on a busy machine the scheduler takes the CPU away for 4-12 ms every ~2 ms of
        # calls (measured here: 17-22 such stalls in 5000 calls of 2-4 µs); a sample of 200 calls of
        # 4 µs held one about half the time and its median was 3x the call's cost; one of ~100 µs
        # rarely does, and the median over many rounds leaves those out
        samples = _samples(fns, x, rounds, max(1, min(inner, round(sample_us / call_us))))
        med = {k: statistics.median(v) for k, v in samples.items()}
        low = {k: min(v) for k, v in samples.items()}  # the least disturbed sample: robust on a busy machine
        pairs = max(100, min(20 * rounds, round(rounds * sample_us * 2 / call_us)))
        rows.append({"call": f"{name} {tuple(shape)} {str(dtype).removeprefix('torch.')}", **med,
                     "extra_us": med["trnplan.fft"] - med["torch.fft"],
                     "min_extra_us": low["trnplan.fft"] - low["torch.fft"],
                     "paired_extra_us": _paired(fns["torch.fft"], fns["trnplan.fft"], x, pairs)})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new", type=int, default=200, help="distinct new lengths (default 200)")
    ap.add_argument("--rounds", type=int, default=301, help="samples per call (default 301)")
    ap.add_argument("--inner", type=int, default=200, help="calls per sample at most (default 200)")
    ap.add_argument("--sample-us", type=float, default=100.0,
                    help="calls per sample: as many as take about this long (default 100 µs)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--quick", action="store_true", help="--new 20 --rounds 61")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.quick:
        args.new, args.rounds = 20, 61
    torch.set_num_threads(args.threads)
    os.environ["TRNPLAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="trnplan-dropin-")  # a fresh cache
    new = _new_shapes(args.new)
    print(f"new shapes: {new['lengths']} lengths, trnplan.fft {new['trnplan_s'] * 1e3:.1f} ms vs torch.fft "
          f"{new['torch_s'] * 1e3:.1f} ms ({new['trnplan_s'] / new['lengths'] * 1e3:.2f} ms per new length); "
          f"{new['records']} records left on disk")
    rows = _per_call(args.rounds, args.inner, args.sample_us)
    print(f"\n| call (torch {torch.__version__}, {torch.get_num_threads()} threads) | torch.fft | trnplan.fft | "
          f"extra (medians) | extra (minima) | extra (paired calls) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['call']} | {r['torch.fft']:.2f} µs | {r['trnplan.fft']:.2f} µs | {r['extra_us']:+.2f} µs | "
              f"{r['min_extra_us']:+.2f} µs | {r['paired_extra_us']:+.2f} µs |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"new_shapes": new, "per_call": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
