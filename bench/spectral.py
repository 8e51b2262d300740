"""Spectral operators against what a user would write instead: truncated (FNO) transforms, DCT/DST, long convolution.

    python bench/spectral.py [--quick] [--threads 1] [--only truncated,dct,conv] [--markdown docs/benchmarks.md]
                             [--json out.json] [--plot out.png]

Truncated transforms (FNO shapes): batch × channels signals, the forward ``rfftn`` keeping the
FNO's modes and the inverse reading only them, each timed alone (forward; inverse), as one round
trip (forward + inverse) and with its backward pass, against torch.fft: ``rfftn`` + slice (forward),
zero-fill + ``irfftn`` (inverse) — what an FNO layer writes, the ``backend="torch"`` side of
``trnplan.nn.SpectralConv``:

* ``trnplan``: ``trnplan.fft.rfftn_truncated`` → ``irfftn_truncated`` (the estimate's pick of the
  truncated solver's methods; the trees are printed);
* ``method=gemm``: the pruned GEMM plans, forced (``plan.execute``);
* ``torch.fft``: rfftn, the kept block cut out, zero-filled back, irfftn.

DCT/DST: ``trnplan.fft.dct``/``dctn`` (the r2r solver's pick) against ``scipy.fft.dct`` (pocketfft,
workers=1, scipy's own backend even where trnplan is installed as one) and FFTW's r2r through
``pyfftw.interfaces.scipy_fft`` (its interface cache on) where pyFFTW is installed; input is a torch
tensor for trnplan and a numpy array for the others (no conversion timed). The column "scipy.fft
with trnplan's backend" is a scipy user's call with ``trnplan.interfaces.scipy_fft`` as the backend
(arrays in and out, the ``set_backend`` context entered per call: ~1 µs of it).

Long convolution: ``trnplan.conv.plan_conv`` (the filter bank's spectrum made once) against the
torch.fft convolution one writes (rfft of signal and filter, product, irfft, crop) and, for short
filters, a depthwise ``torch.nn.functional.conv1d`` on the zero-padded signal (its ``padding=``
argument ran 1.3–27× slower here: another kernel).

Every result is checked once against float64 (numpy.fft / scipy.fft) with the fp32 bar. Times are
medians of round-robin cells in one process (trnplan.tools.benchsuite.time_cells): ratios, not absolutes,
carry over; on a busy machine they move (the docs say which run this was). The convolution rows'
"trnplan / torch.fft" is paired per round (the median over rounds of the two cells' ratio in that
round: trnplan.tools.benchsuite.per_round_ratio), over at least ``CONV_ROUNDS`` rounds.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform

import numpy as np
import scipy.fft
import torch
from _docs import replace_section  # bench/ is on sys.path when a bench script runs

import trnplan
from trnplan import fft as tfft
from trnplan.conv import plan_conv, smooth_length
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.core.errors import PlanningError
from trnplan.interfaces import scipy_fft as trnplan_scipy
from trnplan.kernels import hostlib
from trnplan.tools.benchsuite import _cpu_model, per_round_ratio, time_cells

BAR = DEFAULT_TOL["fp32"]
#: the parts --only chooses from
PARTS = ("truncated", "dct", "conv")
# (label, grid, modes, batch × channels); --quick shrinks the batch of the big ones
TRUNCATED = [
    ("1-D n=1024, 16 modes", (1024,), (16,), 32 * 64),
    ("1-D n=1024, 64 modes", (1024,), (64,), 32 * 64),
    ("2-D 128², 16×16 modes", (128, 128), (16, 16), 32 * 64),
    ("3-D 64³, 12³ modes", (64, 64, 64), (12, 12, 12), 32 * 64),
]
QUICK_BATCH = {(1024,): 512, (128, 128): 128, (64, 64, 64): 8}
R2R = [  # (label, shape, batch, type)
    ("dct2 n=64", (64,), 4096, 2), ("dct2 n=1024", (1024,), 256, 2), ("dct2 n=4096", (4096,), 64, 2),
    ("dct3 n=1024", (1024,), 256, 3), ("dct1 n=1025", (1025,), 256, 1), ("dct4 n=1024", (1024,), 256, 4),
    ("dst2 n=1024", (1024,), 256, 2), ("dctn 2 256²", (256, 256), 8, 2),
]


def rel(got, ref) -> float:
    got = got.detach().double().numpy() if isinstance(got, torch.Tensor) else np.asarray(got, dtype=np.float64)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def torch_round_trip(x, grid, modes):
    """What an FNO layer writes with torch.fft: rfftn, cut, zero-fill, irfftn."""
    dims = tuple(range(-len(grid), 0))
    xh = torch.fft.rfftn(x, dim=dims)
    for axis, m in enumerate(modes[:-1]):
        d = x.ndim - len(grid) + axis
        xh = torch.cat([xh.narrow(d, 0, m), xh.narrow(d, grid[axis] - m, m)], d)
    yh = torch.nn.functional.pad(xh[..., : modes[-1]], (0, grid[-1] // 2 + 1 - modes[-1]))
    for axis, m in enumerate(modes[:-1]):
        d = yh.ndim - len(grid) + axis
        zeros = yh.new_zeros(*yh.shape[:d], grid[axis] - 2 * m, *yh.shape[d + 1:])
        yh = torch.cat([yh.narrow(d, 0, m), zeros, yh.narrow(d, m, m)], d)
    return torch.fft.irfftn(yh, s=grid, dim=dims)


def torch_forward(x, grid, modes):
    """rfftn and the kept block cut out, with torch.fft."""
    xh = torch.fft.rfftn(x, dim=tuple(range(-len(grid), 0)))[..., : modes[-1]]
    for axis, m in enumerate(modes[:-1]):
        d = x.ndim - len(grid) + axis
        xh = torch.cat([xh.narrow(d, 0, m), xh.narrow(d, grid[axis] - m, m)], d)
    return xh


def torch_inverse(xh, grid, modes):
    """The kept block zero-filled back and irfftn, with torch.fft."""
    yh = torch.nn.functional.pad(xh, (0, grid[-1] // 2 + 1 - modes[-1]))
    for axis, m in enumerate(modes[:-1]):
        d = yh.ndim - len(grid) + axis
        zeros = yh.new_zeros(*yh.shape[:d], grid[axis] - 2 * m, *yh.shape[d + 1:])
        yh = torch.cat([yh.narrow(d, 0, m), zeros, yh.narrow(d, m, m)], d)
    return torch.fft.irfftn(yh, s=grid, dim=tuple(range(-len(grid), 0)))


def trnplan_round_trip(x, grid, modes):
    dims = tuple(range(-len(grid), 0))
    return tfft.irfftn_truncated(tfft.rfftn_truncated(x, modes, dim=dims), s=grid, modes=modes, dim=dims)


def truncated_row(label, grid, modes, batch, cell_seconds):
    x = torch.randn(batch, *grid)
    ref = torch_round_trip(x.double(), grid, modes).numpy()
    err = rel(trnplan_round_trip(x, grid, modes), ref)
    assert err <= 2 * BAR, (label, err)  # two fp32 plans in a row
    xg = x.clone().requires_grad_()
    g = torch.randn(batch, *grid)
    pruned = [trnplan.plan_many(grid, batch, kind=k, modes=modes, dtype=torch.float32,
                                strategy="(truncated method=gemm)") for k in ("r2c", "c2r")]
    err_pruned = rel(pruned[1].execute(pruned[0].execute(x)), ref)
    assert err_pruned <= 2 * BAR, (label, err_pruned)
    dims = tuple(range(-len(grid), 0))
    xh = torch_forward(x, grid, modes).contiguous()
    fns = {
        "torch.fft fwd": lambda: torch_forward(x, grid, modes),
        "trnplan fwd": lambda: tfft.rfftn_truncated(x, modes, dim=dims),
        "method=gemm fwd": lambda: pruned[0].execute(x),
        "torch.fft inv": lambda: torch_inverse(xh, grid, modes),
        "trnplan inv": lambda: tfft.irfftn_truncated(xh, s=grid, modes=modes, dim=dims),
        "method=gemm inv": lambda: pruned[1].execute(xh),
        "trnplan": lambda: trnplan_round_trip(x, grid, modes),
        "trnplan method=gemm": lambda: pruned[1].execute(pruned[0].execute(x)),
        "torch.fft": lambda: torch_round_trip(x, grid, modes),
        "trnplan fwd+bwd": lambda: torch.autograd.grad(trnplan_round_trip(xg, grid, modes), xg, g),
        "torch.fft fwd+bwd": lambda: torch.autograd.grad(torch_round_trip(xg, grid, modes), xg, g),
    }
    cells = time_cells(fns, cell_seconds, 5, rounds=TRUNC_ROUNDS, keep_samples=True)
    samples = {k: v.pop("samples_us") for k, v in cells.items()}
    # each ratio paired per round against its torch.fft column (a ratio of the two cells' medians
    # swung 0.91-1.11 between two quiet runs for the same library call and cut, 5 rounds)
    pairs = {f"{who} {d}": f"torch.fft {d}" for d in ("fwd", "inv") for who in ("trnplan", "method=gemm")}
    pairs.update({"trnplan": "torch.fft", "trnplan method=gemm": "torch.fft", "trnplan fwd+bwd": "torch.fft fwd+bwd"})
    fwd = trnplan.plan_many(grid, batch, kind="r2c", modes=modes, dtype=torch.float32)
    inv = trnplan.plan_many(grid, batch, kind="c2r", modes=modes, dtype=torch.float32)
    return {"row": label, "batch": batch, "error": err, "trees": [str(fwd.tree), str(inv.tree)],
            "us": {k: v["us"] for k, v in cells.items()},
            "ratio": {k: per_round_ratio(samples[k], {b: samples[b]}) for k, b in pairs.items()}}


def _pyfftw_r2r():
    if hostlib.library_module("pyfftw") is None:  # imported bound to its own FFTW (fftw.import_pyfftw)
        return None
    import pyfftw.interfaces.cache
    import pyfftw.interfaces.scipy_fft as pf
    pyfftw.interfaces.cache.enable()  # the interface re-plans on every call otherwise
    return pf


def r2r_row(label, shape, batch, t, cell_seconds, pf):
    x64 = np.random.default_rng(0).standard_normal((batch, *shape))
    x32 = x64.astype(np.float32)
    x = torch.from_numpy(x32)
    axes = tuple(range(-len(shape), 0))
    fn_t = tfft.dctn if len(shape) > 1 else tfft.dct
    name = "dctn" if len(shape) > 1 else ("dst" if label.startswith("dst") else "dct")
    if name == "dst":
        fn_t = tfft.dst
    with scipy.fft.set_backend("scipy", only=True):
        ref = scipy.fft.dctn(x64, type=t, axes=axes) if name == "dctn" else getattr(scipy.fft, name)(x64, type=t)
    kw = {"dim": axes} if len(shape) > 1 else {}
    err = rel(fn_t(x, type=t, **kw), ref)
    assert err <= BAR, (label, err)

    def sp():
        return getattr(scipy.fft, name)(x32, type=t, axes=axes, workers=1) if name == "dctn" else \
            getattr(scipy.fft, name)(x32, type=t, workers=1)

    def backend():  # what a scipy user calls with trnplan as scipy.fft's backend (its context entered per call)
        with scipy.fft.set_backend(trnplan_scipy, only=True):
            return sp()

    with scipy.fft.set_backend(trnplan_scipy, only=True):
        assert rel(backend(), ref) <= BAR, label
    fns = {"trnplan": lambda: fn_t(x, type=t, **kw), "scipy.fft": sp, "trnplan scipy backend": backend}
    if pf is not None:
        fns["pyFFTW r2r"] = (lambda: pf.dctn(x32, type=t, axes=axes)) if name == "dctn" else \
            (lambda: getattr(pf, name)(x32, type=t))
    # scipy's own backend for the scipy.fft column (even where trnplan is the global backend), entered
    # once: the column times scipy.fft.dct as a user calls it, not a set_backend context per call
    with scipy.fft.set_backend("scipy", only=True):
        cells = time_cells(fns, cell_seconds, 5, rounds=5)
    plan = trnplan.plan_many(shape, batch, kind=f"{name[:3]}{t}", dtype=torch.float32)
    return {"row": label, "batch": batch, "error": err, "tree": str(plan.tree),
            "us": {k: v["us"] for k, v in cells.items()}}


# (label, length, filter length, batch, channels, mode); conv1d applies (linear/causal) where K is short enough
CONV = [("L=256, K=256", 256, 256, 8, 64, "causal"), ("L=4096, K=4096", 4096, 4096, 8, 32, "causal"),
        ("L=65536, K=65536", 65536, 65536, 2, 8, "causal"), ("L=4096, K=64", 4096, 64, 8, 32, "linear")]


#: the least round-robin rounds of a truncated row (its ratios paired per round: per_round_ratio)
TRUNC_ROUNDS = 11
#: the least round-robin rounds of a convolution row (its ratio is paired per round: per_round_ratio)
CONV_ROUNDS = 11


def torch_fft_conv(x, h, n, keep):
    """What one writes with torch.fft: rfft both at length n, multiply, irfft, crop."""
    return torch.fft.irfft(torch.fft.rfft(x, n=n) * torch.fft.rfft(h, n=n), n=n)[..., :keep]


def conv_row(label, length, k, batch, channels, mode, cell_seconds):
    x = torch.randn(batch, channels, length)
    h = torch.randn(channels, k) / k
    conv = plan_conv(h, length, mode, batch=batch)  # priced for the batch it runs
    keep = length if mode == "causal" else length + k - 1
    n_torch = 2 * length if mode == "causal" and k == length else smooth_length(length + k - 1)
    ref = torch_fft_conv(x.double(), h.double(), n_torch, keep).numpy()
    err = rel(conv(x), ref)
    assert err <= BAR, (label, err)
    fns = {"trnplan": lambda: conv(x), "torch.fft": lambda: torch_fft_conv(x, h, n_torch, keep)}
    routes = {"method": conv.method}
    try:  # the four-step (Monarch) GEMM route forced, where it plans within the bound
        gemm = plan_conv(h, length, mode, method="gemm", batch=batch)
        routes["gemm error"] = rel(gemm(x), ref)
        assert routes["gemm error"] <= gemm.bound, (label, routes["gemm error"], gemm.bound)
        routes["gemm split"] = gemm.tree.param("split")
    except PlanningError as exc:
        gemm, routes["gemm"] = None, str(exc)[:160]
    if k <= 1024:  # a direct depthwise conv1d (flipped filter: conv1d is a correlation) on the padded signal:
        # conv1d(x, w, padding=k - 1) ran 1.3-27× slower than that here (another kernel; 2026-11-27)
        w = h.flip(-1)[:, None, :].contiguous()
        pad = (k - 1, k - 1 if mode == "linear" else 0)
        fns["F.conv1d"] = lambda: torch.nn.functional.conv1d(torch.nn.functional.pad(x, pad), w, groups=channels)
    # paired per round (per_round_ratio), only cells of comparable time in one round-robin (method=gemm,
    # ~10× slower, in one of its own with torch.fft): on this 2-vCPU machine the first few ms of calls
    # after ~20 ms of other work (or of sleep) run 1.5-3× slow (an rfft of 8×32×4320 points: 2.8, 1.6,
    # 0.9, then 0.8 ms after a 24 ms conv1d; 2026-11-27), more than the round's one untimed call
    # absorbs, so the cell after a long one pays it: with conv1d's slow padding= form (24 ms) in the
    # row, trnplan / torch.fft measured 1.36-1.45 with trnplan after it and 0.90-0.91 with torch.fft
    # there, in one process (L=4096, K=64 linear; no page faults in either order)
    cells = time_cells(fns, cell_seconds, 5, rounds=CONV_ROUNDS, keep_samples=True)
    samples = {name: cell.pop("samples_us") for name, cell in cells.items()}
    for other in ("torch.fft", "F.conv1d"):
        if other in samples:
            routes[f"trnplan / {other}"] = per_round_ratio(samples["trnplan"], {other: samples[other]})
    if gemm is not None:
        pair = time_cells({"gemm": lambda: gemm(x), "torch.fft": fns["torch.fft"]}, cell_seconds, 5, rounds=5)
        routes["gemm / torch.fft"] = pair["gemm"]["us"] / pair["torch.fft"]["us"]
        cells["trnplan method=gemm"] = pair["gemm"]
    return {"row": f"{label} {mode}", "batch": f"{batch}×{channels}", "error": err, "n": conv.n[0],
            "us": {k2: v["us"] for k2, v in cells.items()}, **routes}


def _ratio(row: dict, ours: str, theirs: str) -> float:
    """A truncated row's ratio: paired per round where the run kept it, else of the two medians."""
    paired = row.get("ratio", {}).get(ours)
    return paired if paired is not None else row["us"][ours] / row["us"][theirs]


def markdown(trunc, r2r, meta, convs=()) -> str:
    lines = [(f"*{meta['when']}, {meta['cpu']}, torch {meta['torch']} ({meta['threads']} threads), "
              f"{'quick form, ' if meta['quick'] else ''}load average {meta.get('load', float('nan')):.1f} at the end of the run, the bench's own ~1 included "
              f"({'a busy machine: ' if meta.get('load', 99) > 2.5 else 'no other work running: '}"
              f"{meta.get('cpus', '?')} CPUs): medians "
              f"of round-robin cells in one process; the truncated and convolution ratios paired per round "
              f"(the median of the per-round ratios), the DCT/DST ones of the medians; ratios, not absolutes, "
              f"carry over.*"), "",
             ("| truncated, one direction | batch | fwd: torch.fft rfftn+cut | fwd: trnplan (estimate) | ratio | "
              "fwd: method=gemm | ratio | inv: torch.fft fill+irfftn | inv: trnplan (estimate) | ratio | "
              "inv: method=gemm | ratio |"), "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in trunc:
        u = r["us"]
        cells = []
        for d in ("fwd", "inv"):
            base = u[f"torch.fft {d}"]
            cells += [f"{base:.0f} µs", f"{u[f'trnplan {d}']:.0f} µs", f"{_ratio(r, f'trnplan {d}', f'torch.fft {d}'):.2f}",
                      f"{u[f'method=gemm {d}']:.0f} µs", f"{_ratio(r, f'method=gemm {d}', f'torch.fft {d}'):.2f}"]
        lines.append(f"| {r['row']} | {r['batch']} | " + " | ".join(cells) + " |")
    lines += ["", ("| truncated round trip (fwd + inv) | batch | torch.fft (rfftn+cut+fill+irfftn) | trnplan (estimate's "
              "pick) | ratio | trnplan pruned GEMMs (method=gemm) | ratio | fwd+bwd torch.fft | fwd+bwd trnplan | "
              "ratio | trnplan's trees (estimate) |"), "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in trunc:
        u = r["us"]
        lines.append(f"| {r['row']} | {r['batch']} | {u['torch.fft']:.0f} µs | {u['trnplan']:.0f} µs | "
                     f"{_ratio(r, 'trnplan', 'torch.fft'):.2f} | {u['trnplan method=gemm']:.0f} µs | "
                     f"{_ratio(r, 'trnplan method=gemm', 'torch.fft'):.2f} | {u['torch.fft fwd+bwd']:.0f} µs | "
                     f"{u['trnplan fwd+bwd']:.0f} µs | {_ratio(r, 'trnplan fwd+bwd', 'torch.fft fwd+bwd'):.2f} | "
                     f"`{r['trees'][0]}` / `{r['trees'][1]}` |")
    lines += ["", ("| DCT/DST (float32) | batch | scipy.fft (pocketfft) | pyFFTW r2r | trnplan | trnplan / best | "
                   "scipy.fft with trnplan's backend | / scipy.fft | trnplan's tree | error |"),
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in r2r:
        u = r["us"]
        best = min(v for k, v in u.items() if not k.startswith("trnplan"))
        fftw = f"{u['pyFFTW r2r']:.0f} µs" if "pyFFTW r2r" in u else "—"
        via = u.get("trnplan scipy backend")
        via_cells = f"{via:.0f} µs | {via / u['scipy.fft']:.2f}" if via else "— | —"
        lines.append(f"| {r['row']} | {r['batch']} | {u['scipy.fft']:.0f} µs | {fftw} | {u['trnplan']:.0f} µs | "
                     f"{u['trnplan'] / best:.2f} | {via_cells} | `{r['tree']}` | {r['error']:.1e} |")
    lines += ["", ("| long convolution (float32, filter bank) | batch×channels | torch.fft (rfft·rfft→irfft) | "
                   "F.conv1d (padded input) | trnplan.conv (route) | trnplan / torch.fft (per round) | trnplan / F.conv1d (per round) | "
                   "method=gemm | gemm / torch.fft | N | error |"),
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in convs:
        u = r["us"]
        direct = f"{u['F.conv1d']:.0f} µs" if "F.conv1d" in u else "—"
        gemm = u.get("trnplan method=gemm")
        gemm_cells = f"{gemm:.0f} µs | {r['gemm / torch.fft']:.2f}" if gemm else "— (over the bound) | —"
        vs_direct = f"{r['trnplan / F.conv1d']:.2f}" if "trnplan / F.conv1d" in r else "—"
        lines.append(f"| {r['row']} | {r['batch']} | {u['torch.fft']:.0f} µs | {direct} | {u['trnplan']:.0f} µs "
                     f"({r.get('method', 'library')}) | {r.get('trnplan / torch.fft', u['trnplan'] / u['torch.fft']):.2f} | {vs_direct} | {gemm_cells} | {r['n']} | "
                     f"{r['error']:.1e} |")
    return "\n".join(lines)


def plot(path, trunc, r2r) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), dpi=110)
    labels = [r["row"] for r in trunc]
    cols = (("trnplan", "torch.fft", "round trip, estimate's pick"), ("trnplan method=gemm", "torch.fft",
            "round trip, pruned GEMMs"), ("trnplan fwd+bwd", "torch.fft fwd+bwd", "fwd+bwd, estimate's pick"))
    for i, (col, base, name) in enumerate(cols):
        axes[0].bar(np.arange(len(trunc)) + 0.27 * i, [r["us"][col] / r["us"][base] for r in trunc], 0.27,
                    label=f"trnplan / torch.fft, {name}")
    axes[0].axhline(1.0, color="k", lw=0.8)
    axes[0].set_xticks(np.arange(len(trunc)) + 0.27, labels, rotation=20, fontsize=7)
    axes[0].set_ylabel("time ratio (< 1: trnplan faster)")
    axes[0].set_title("truncated FNO transforms vs rfftn+cut+fill+irfftn", fontsize=9)
    axes[0].legend(fontsize=7)
    labels = [r["row"] for r in r2r]
    for i, col in enumerate(("scipy.fft", "pyFFTW r2r")):
        vals = [r["us"]["trnplan"] / r["us"][col] if col in r["us"] else np.nan for r in r2r]
        axes[1].bar(np.arange(len(r2r)) + 0.4 * i, vals, 0.4, label=f"trnplan / {col}")
    axes[1].axhline(1.0, color="k", lw=0.8)
    axes[1].set_xticks(np.arange(len(r2r)) + 0.2, labels, rotation=30, fontsize=7)
    axes[1].set_title("DCT/DST vs scipy.fft and FFTW r2r", fontsize=9)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    print(f"wrote {path}")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller batches and short cells (a busy machine)")
    ap.add_argument("--cell-seconds", type=float, default=None)
    ap.add_argument("--markdown", default=None, help="rewrite the bench:spectral section of this file")
    ap.add_argument("--json", default=None)
    ap.add_argument("--plot", default=None, help="PNG of the ratios")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads first (1 steadies a busy 2-core machine: two-thread OpenMP ops "
                         "stall behind other processes there)")
    ap.add_argument("--conv-only", action="store_true", help="only the long-convolution rows (--only conv)")
    ap.add_argument("--only", default=None, help="comma-separated parts to run: truncated, dct, conv (default all; "
                    "not with --markdown or --plot, which need every table)")
    args = ap.parse_args(argv)
    if args.only is not None and (args.markdown or args.plot):
        ap.error("--only leaves tables out: run without it to rewrite docs/benchmarks.md's section or the plot")
    if args.conv_only:
        args.only = ",".join(filter(None, (args.only, "conv")))
    parts = set(PARTS if args.only is None else args.only.split(","))
    if parts - set(PARTS):
        ap.error(f"--only takes {', '.join(PARTS)}; got {args.only!r}")
    if args.threads:
        torch.set_num_threads(args.threads)
    cell = args.cell_seconds or (0.15 if args.quick else 1.0)
    trunc, r2r = [], []
    for label, grid, modes, batch in TRUNCATED if "truncated" in parts else ():
        batch = QUICK_BATCH.get(grid, batch) if args.quick else batch
        trunc.append(truncated_row(label, grid, modes, batch, cell))
        print(json.dumps(trunc[-1]), flush=True)
    pf = _pyfftw_r2r()
    for label, shape, batch, t in R2R if "dct" in parts else ():
        r2r.append(r2r_row(label, shape, batch // 4 if args.quick else batch, t, cell, pf))
        print(json.dumps(r2r[-1]), flush=True)
    convs = []
    for label, length, k, batch, channels, mode in CONV if "conv" in parts else ():
        convs.append(conv_row(label, length, k, batch, channels, mode, cell))
        print(json.dumps(convs[-1]), flush=True)
    meta = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": _cpu_model(),
            "machine": platform.machine(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "quick": args.quick, "cpus": os.cpu_count(), "load": os.getloadavg()[0]}
    text = markdown(trunc, r2r, meta, convs)
    print(text)
    if args.markdown and args.only is None:  # a partial run never replaces the whole section
        replace_section(args.markdown, "spectral", text)
    if args.plot and trunc:
        plot(args.plot, trunc, r2r)
    out = {"meta": meta, "truncated": trunc, "r2r": r2r, "conv": convs}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
