"""Time trnplan's N-D, real and STFT transforms against torch.fft, numpy.fft and scipy.fft.

    python bench/bench_transforms.py [--quick] [--out bench/out] [--markdown docs/benchmarks.md]

One process, one table: every column of a row is timed side by side, in round-robin blocks
after a warm-up (bench_solvers.interleaved_medians), so ratios hold on a noisy machine. Rows:
fft2 256² and 1024², fftn 32×64×64 (complex64), rfft of 1024, 4096 and 65536 points at batch 1
and batched (float32), and the STFT of 16 000 samples (n_fft 512, hop 128, Hann window).
Columns: trnplan.fft (torch tensors in and out), trnplan.interfaces.numpy_fft (numpy arrays in
and out, so the column adds the numpy↔torch bridge), torch.fft, numpy.fft and scipy.fft (with
``workers`` = torch's thread count); each row also reports trnplan's relative L2 error against
numpy.fft in complex128 and the ratio trnplan / torch.fft. Writes bench/out/transforms.json and,
with --markdown, the ``<!-- bench:transforms -->`` section of that file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys

import numpy as np
import scipy
import scipy.fft
import torch

import trnplan
import trnplan.fft as tfft
from trnplan.interfaces import numpy_fft

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_solvers import interleaved_medians, replace_section

STFT_N, STFT_NFFT, STFT_HOP = 16000, 512, 128


def _rows(quick: bool):
    c2c = [("fft2", (256, 256)), ("fft2", (1024, 1024)), ("fftn", (32, 64, 64))]
    rfft = [(1, 1024), (1, 4096), (1, 65536), (64, 1024), (16, 4096)]
    if quick:
        c2c, rfft = c2c[:1], rfft[:2]
    return c2c, rfft


def _rel(y, ref) -> float:
    y = y.numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def bench_c2c(name, shape, rng):
    x64 = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    xnp = x64.astype(np.complex64)
    x = torch.from_numpy(xnp)
    ref = getattr(np.fft, name)(x64)
    fns = {
        "trnplan": lambda: getattr(tfft, name)(x),
        "trnplan numpy_fft": lambda: getattr(numpy_fft, name)(xnp),
        "torch.fft": lambda: getattr(torch.fft, name)(x),
        "numpy.fft": lambda: getattr(np.fft, name)(xnp),
        "scipy.fft": lambda: getattr(scipy.fft, name)(xnp, workers=torch.get_num_threads()),
    }
    return _row(f"{name} {'×'.join(map(str, shape))}", "complex64", fns, _rel(fns["trnplan"](), ref))


def bench_rfft(batch, n, rng):
    x64 = rng.standard_normal((batch, n))
    xnp = x64.astype(np.float32)
    x = torch.from_numpy(xnp)
    ref = np.fft.rfft(x64)
    fns = {
        "trnplan": lambda: tfft.rfft(x),
        "trnplan numpy_fft": lambda: numpy_fft.rfft(xnp),
        "torch.fft": lambda: torch.fft.rfft(x),
        "numpy.fft": lambda: np.fft.rfft(xnp),
        "scipy.fft": lambda: scipy.fft.rfft(xnp, workers=torch.get_num_threads()),
    }
    return _row(f"rfft {batch}×{n}", "float32", fns, _rel(fns["trnplan"](), ref))


def bench_stft(rng):
    x64 = rng.standard_normal(STFT_N)
    xnp = x64.astype(np.float32)
    x = torch.from_numpy(xnp)
    w = torch.hann_window(STFT_NFFT)
    wnp = w.numpy()
    pad = STFT_NFFT // 2

    def numpy_stft(lib):
        # the same centred, reflect-padded, Hann-windowed frames torch.stft takes, cut with a
        # strided view, then one batched rfft
        frames = np.lib.stride_tricks.sliding_window_view(np.pad(xnp, pad, mode="reflect"), STFT_NFFT)[::STFT_HOP]
        if lib is scipy.fft:
            return lib.rfft(frames * wnp, workers=torch.get_num_threads()).T
        return lib.rfft(frames * wnp).T

    frames64 = np.lib.stride_tricks.sliding_window_view(np.pad(x64, pad, mode="reflect"), STFT_NFFT)[::STFT_HOP]
    ref = np.fft.rfft(frames64 * wnp.astype(np.float64)).T
    fns = {
        "trnplan": lambda: trnplan.stft(x, STFT_NFFT, STFT_HOP, window=w, return_complex=True),
        "torch.fft": lambda: torch.stft(x, STFT_NFFT, STFT_HOP, window=w, return_complex=True),
        "numpy.fft": lambda: numpy_stft(np.fft),
        "scipy.fft": lambda: numpy_stft(scipy.fft),
    }
    assert np.allclose(numpy_stft(np.fft), fns["torch.fft"]().numpy(), atol=1e-3)  # same transform in every column
    return _row(f"stft {STFT_N} (n_fft {STFT_NFFT}, hop {STFT_HOP})", "float32", fns, _rel(fns["trnplan"](), ref))


def _row(label, dtype, fns, error):
    for fn in fns.values():  # warm-up: plans built, caches filled
        fn()
    medians = interleaved_medians(fns)
    return {"row": label, "dtype": dtype, "us": medians, "error": error,
            "ratio_vs_torch": medians["trnplan"] / medians["torch.fft"]}


COLUMNS = ["trnplan", "trnplan numpy_fft", "torch.fft", "numpy.fft", "scipy.fft"]


def markdown(result) -> str:
    lines = ["| transform | dtype | " + " | ".join(COLUMNS) + " | trnplan / torch.fft | error vs complex128 |",
             "|---|---|" + "---:|" * (len(COLUMNS) + 2)]
    for r in result["rows"]:
        cells = [f"{r['us'][c]:.1f}" if c in r["us"] else "—" for c in COLUMNS]
        lines.append(f"| {r['row']} | {r['dtype']} | " + " | ".join(cells)
                     + f" | {r['ratio_vs_torch']:.2f} | {r['error']:.1e} |")
    m = result["machine"]
    busy = m["load_before"][0] > 0.5 * m["cores"] or m["load_after"][0] > 0.5 * m["cores"]
    about = ("Median µs per call (warm plans, warm caches). The trnplan numpy_fft column includes the "
             "numpy↔torch bridge; the numpy/scipy STFT columns frame with a strided view and run one batched "
             "rfft (numpy has no STFT). Error: trnplan's relative L2 error against numpy.fft on the float64 "
             "copy of the input.")
    load = (f"Load average (1/5/15 min) before: {'/'.join(f'{v:.2f}' for v in m['load_before'])}, after: "
            f"{'/'.join(f'{v:.2f}' for v in m['load_after'])}")
    if busy:
        load += (" — the machine was busy (other processes ran), so absolute times are noisy; the columns of a "
                 "row were interleaved, so the ratios are the figures to read.")
    lines += ["", about, "", load + ("" if busy else ".")]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one row of each kind")
    ap.add_argument("--out", default="bench/out", help="directory for transforms.json")
    ap.add_argument("--markdown", default=None, help="write the table into this markdown file's marked section")
    args = ap.parse_args()
    load_before = os.getloadavg()
    rng = np.random.default_rng(0)
    c2c, rfft = _rows(args.quick)
    rows = []
    for name, shape in c2c:
        rows.append(bench_c2c(name, shape, rng))
        print(f"{rows[-1]['row']}: trnplan {rows[-1]['us']['trnplan']:.1f} µs, torch.fft "
              f"{rows[-1]['us']['torch.fft']:.1f} µs", flush=True)
    for batch, n in rfft:
        rows.append(bench_rfft(batch, n, rng))
        print(f"{rows[-1]['row']}: trnplan {rows[-1]['us']['trnplan']:.1f} µs, torch.fft "
              f"{rows[-1]['us']['torch.fft']:.1f} µs", flush=True)
    rows.append(bench_stft(rng))
    result = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                    "numpy": np.__version__, "scipy": scipy.__version__, "trnplan": trnplan.__version__,
                    "load_before": list(load_before), "load_after": list(os.getloadavg())},
        "rows": rows,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "transforms.json"), "w") as f:
        json.dump(result, f, indent=1)
    table = markdown(result)
    print(table)
    if args.markdown:
        replace_section(args.markdown, "transforms", table, result)


if __name__ == "__main__":
    main()
