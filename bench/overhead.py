"""Per-call overhead of trnplan's library leaves (issue 19 item 6: plan.execute adds <= 2 us).

For each leaf (pyfftw, mkl-fft, scipy, native = torch.fft) at a few sizes and torch thread
counts, times, round-robin in one process:

``raw``
    the library on data it already holds: pyFFTW's prebuilt ``FFTW.execute()`` on its own
    arrays (no output allocated: a floor, not a competitor), ``mkl_fft.fft`` / ``scipy.fft.fft``
    on a numpy array (workers = torch's threads), ``torch.fft.fft`` on the tensor;
``leaf``
    the plan's root library call on the tensor (``plan.module.root.library_call(norm)(x)``):
    tensor -> numpy view -> library -> new tensor;
``run`` / ``execute``
    :meth:`Plan.run` and :meth:`Plan.execute` (validation cached after the first call).

Each sample is the mean of ``--inner`` calls; the table shows medians over ``--rounds`` samples,
and the differences ``leaf - raw`` and ``execute - leaf`` (the goal: <= 2 us).

    python bench/overhead.py                          # table
    python bench/overhead.py --json overhead.json --rounds 31 --inner 400
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

import trnplan
from trnplan.kernels import hostlib

LEAVES = ("pyfftw", "mkl-fft", "scipy", "native")
SIZES = (16, 256, 4096, 65536)


def _raw(leaf: str, x: torch.Tensor):
    """The library's own call on data it holds (see the module docstring), or None if absent."""
    a = x.numpy()
    if leaf == "native":
        return lambda: torch.fft.fft(x)
    module = hostlib.library_module(leaf.replace("-", "_"))
    if module is None:
        return None
    if leaf == "scipy":
        return lambda: module.fft(a, axis=-1, workers=torch.get_num_threads())
    if leaf == "mkl-fft":
        return lambda: module.fft(a, n=a.shape[-1], axis=-1)
    fin = module.empty_aligned(a.shape, a.dtype)
    fin[...] = a
    fftw = module.FFTW(fin, module.empty_aligned(a.shape, a.dtype), axes=(-1,), flags=("FFTW_MEASURE",))
    return fftw.execute


def _calls(leaf: str, n: int) -> dict | None:
    x = torch.randn(1, n, dtype=torch.complex64)
    raw = _raw(leaf, x)
    if raw is None:
        return None
    plan = trnplan.plan_many(n, 1, strategy=leaf if leaf != "native" else "native", cache=None)
    call = plan.module.root.library_call(plan.problem.norm)
    plan.execute(x)  # validated once: later calls take the cached signature
    return {"raw": raw, "leaf": lambda: call(x), "run": lambda: plan.run(x), "execute": lambda: plan.execute(x)}


def _time(calls: dict, rounds: int, inner: int) -> dict:
    """Median µs per call of each callable, sampled round-robin."""
    samples = {k: [] for k in calls}
    for f in calls.values():
        for _ in range(inner):
            f()
    for _ in range(rounds):
        for name, f in calls.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                f()
            samples[name].append((time.perf_counter() - t0) / inner * 1e6)
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--inner", type=int, default=200)
    ap.add_argument("--threads", default="1,2", help="torch thread counts, comma-separated")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    print(f"{'threads':>7} {'leaf':8} {'n':>6} {'raw':>8} {'leaf':>8} {'run':>8} {'execute':>8} "
          f"{'leaf-raw':>9} {'exec-leaf':>9}  (µs, median)")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for leaf in LEAVES:
            for n in SIZES:
                calls = _calls(leaf, n)
                if calls is None:
                    continue
                t = _time(calls, args.rounds, max(1, args.inner * 256 // max(n, 256)))
                rows.append({"threads": threads, "leaf": leaf, "n": n, **t})
                print(f"{threads:7d} {leaf:8} {n:6d} {t['raw']:8.2f} {t['leaf']:8.2f} {t['run']:8.2f} "
                      f"{t['execute']:8.2f} {t['leaf'] - t['raw']:9.2f} {t['execute'] - t['leaf']:9.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "numpy": np.__version__, "libraries": hostlib.available(),
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
