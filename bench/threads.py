"""Host FFT libraries' own threads next to torch's intra-op pool (issue 19 item 2).

Times each library raw (prebuilt, on numpy arrays, no trnplan glue) at 1 and 2 of its own
threads, round-robin, with torch's OpenMP pool *hot* (a parallel torch op right before every
call, as in a model that mixes torch ops and FFTs) and *cold* (FFT calls back to back), torch
at ``--torch-threads``. Columns: torch.fft; pyFFTW threads 1/2 (FFTW_MEASURE plans; pyFFTW ships
its own libgomp, a second OpenMP pool); scipy.fft workers 1/2 (pocketfft's own pool, batch
only); mkl_fft with MKL at 1/2 threads (libmkl_gnu_thread: the GNU OpenMP that torch loaded, so
the same pool as torch's), set through MKL's own ``mkl_set_num_threads_local``.

    python bench/threads.py                     # table on stdout
    python bench/threads.py --json out.json --rounds 41
    python bench/threads.py --fftw-passive      # pyFFTW's own OpenMP pool passive, torch's as is

The median of each column over the rounds is shown (hot: the torch ops' own median subtracted),
with the interquartile spread in % of the timed samples' median.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

from trnplan.kernels import hostlib

#: (label, batch, shape, kind): single long transforms, batches of mid lengths, the Taylor-Green rfftn
SIZES = [("1x4096", 1, (4096,), "c2c"), ("1x65536", 1, (65536,), "c2c"), ("1x262144", 1, (262144,), "c2c"),
         ("64x4096", 64, (4096,), "c2c"), ("512x192", 512, (192,), "c2c"), ("3x64^3 r2c", 3, (64, 64, 64), "r2c")]


def _mkl_threads_setter():
    """MKL's ``mkl_set_num_threads_local`` from the libmkl_rt that mkl_fft loaded, or None."""
    try:
        import mkl_fft  # noqa: F401 - loads libmkl_rt
    except ImportError:
        return None
    libdir = os.path.join(sys.prefix, "lib")
    for path in sorted(glob.glob(os.path.join(libdir, "libmkl_rt.so*"))):
        lib = ctypes.CDLL(path)
        return lib.MKL_Set_Num_Threads_Local
    return None


def _fftw(x: np.ndarray, shape: tuple, kind: str, threads: int):
    pyfftw = hostlib.library_module("pyfftw")  # bound to its own FFTW, not MKL's wrappers (fftw.import_pyfftw)
    axes = tuple(range(-len(shape), 0))
    a = pyfftw.empty_aligned(x.shape, x.dtype)
    a[...] = x
    out_shape = (*x.shape[:-1], x.shape[-1] // 2 + 1) if kind == "r2c" else x.shape
    o = pyfftw.empty_aligned(out_shape, np.complex64)
    f = pyfftw.FFTW(a, o, axes=axes, flags=("FFTW_MEASURE",), threads=threads)
    a[...] = x
    return f.execute


def _calls(x: np.ndarray, shape: tuple, kind: str) -> dict:
    """Column name -> zero-argument callable."""
    import scipy.fft as sfft
    axes = tuple(range(-len(shape), 0))
    t = torch.from_numpy(x)
    calls = {"torch.fft": (lambda: torch.fft.rfftn(t, dim=axes)) if kind == "r2c" else (lambda: torch.fft.fftn(t, dim=axes))}
    sf = sfft.rfftn if kind == "r2c" else sfft.fftn
    for w in (1, 2):
        calls[f"scipy w{w}"] = lambda w=w: sf(x, axes=axes, workers=w)
    try:
        for k in (1, 2):
            calls[f"pyfftw t{k}"] = _fftw(x, shape, kind, k)
    except ImportError:
        pass
    setter = _mkl_threads_setter()
    if setter is not None:
        import mkl_fft
        mf = (lambda: mkl_fft.rfftn(x, s=shape, axes=axes)) if kind == "r2c" else (lambda: mkl_fft.fftn(x, s=shape, axes=axes))
        if len(shape) == 1:
            mf = (lambda: mkl_fft.fft(x, n=shape[-1], axis=-1))

        def mkl_at(k, mf=mf):
            def run():
                prev = setter(k)
                try:
                    return mf()
                finally:
                    setter(prev)
            return run
        for k in (1, 2):
            calls[f"mkl t{k}"] = mkl_at(k)
    return calls


def _input(batch: int, shape: tuple, kind: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    size = (batch, *shape)
    if kind == "r2c":
        return rng.standard_normal(size).astype(np.float32)
    return (rng.standard_normal(size) + 1j * rng.standard_normal(size)).astype(np.complex64)


def _row(batch: int, shape: tuple, kind: str, rounds: int, hot: bool) -> dict:
    """Median and spread per column. Each timed sample starts after a 3 ms pause (every OpenMP
    pool's workers stop spinning and sleep), then runs, for a hot pool, the torch op and the FFT
    (timed together, the op's own median subtracted: a pool that stalls the *next torch op*
    is charged too), or for a cold one the FFT twice (the second timed)."""
    calls = _calls(_input(batch, shape, kind), shape, kind)
    warm = torch.ones(1 << 20)  # a parallel elementwise op over 4 MB: both torch threads work
    calls["(torch op alone)"] = lambda: None
    times = {k: [] for k in calls}
    for f in calls.values():
        f(), f()
    for _ in range(rounds):
        for name, f in calls.items():
            time.sleep(0.003)
            if hot:
                t0 = time.perf_counter()
                warm.mul_(1.0)
                f()
                warm.mul_(1.0)
            else:
                f()
                t0 = time.perf_counter()
                f()
            times[name].append((time.perf_counter() - t0) * 1e6)
    base = statistics.median(times.pop("(torch op alone)")) if hot else 0.0
    out = {}
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=4)
        raw = statistics.median(ts)  # the spread is relative to the whole sample's median
        out[name] = {"median_us": raw - base, "iqr_pct": 100.0 * (q[2] - q[0]) / raw}
    if hot:
        out["(2 torch ops)"] = {"median_us": base, "iqr_pct": 0.0}
    else:
        out.pop("(torch op alone)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--torch-threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--sizes", default=None, help="comma-separated labels of SIZES (default: all)")
    ap.add_argument("--fftw-passive", action="store_true",
                    help="load pyFFTW's own libgomp with OMP_WAIT_POLICY=PASSIVE (its workers sleep at once "
                         "after a call; torch's pool, loaded with torch above, keeps its policy): the "
                         "untried policy 'FFTW threads with a passive pool'")
    args = ap.parse_args()
    if args.fftw_passive:  # libgomp reads the variable once, when it is loaded: set it around the import
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        hostlib.library_module("pyfftw")  # bound to its own FFTW (fftw.import_pyfftw)
        del os.environ["OMP_WAIT_POLICY"]
    torch.set_num_threads(args.torch_threads)
    results = []
    wanted = set(args.sizes.split(",")) if args.sizes else None
    for label, batch, shape, kind in SIZES:
        if wanted and label not in wanted:
            continue
        for hot in (True, False):
            row = _row(batch, shape, kind, args.rounds, hot)
            results.append({"size": label, "pool": "hot" if hot else "cold", "columns": row})
            cols = "  ".join(f"{k} {v['median_us']:8.1f} ±{v['iqr_pct']:3.0f}%" for k, v in row.items())
            print(f"{label:11s} {'hot ' if hot else 'cold'}  {cols}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch_threads": args.torch_threads, "cpus": os.cpu_count(), "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
