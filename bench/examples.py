"""The three examples at a real size: trnplan against the same code on torch.fft, same run.

    python bench/examples.py [--quick] [--json bench/out/examples.json] [--markdown docs/examples.md]

Rows (each timed side by side with :func:`trnplan.tools.benchsuite.time_cells`: warmed up, then
round-robin rounds so that a busy machine hits both columns alike; medians):

* ``taylor_green``: one low-storage RK3 step of examples/taylor_green.py at 64³ (6 batched
  3-D transforms: 3 c2r of 6 fields, 3 r2c of 3 fields) on trnplan plans vs torch.fft.rfftn/irfftn;
* ``fno 1-D`` / ``fno 2-D``: one training step (forward, backward, Adam) of examples/fno.py's
  model (1-D: n = 1024, width 64, 16 modes, batch 32; 2-D: 64², width 32, 12 modes, batch 16),
  eager and under ``torch.compile(fullgraph=True)``, on trnplan.fft vs torch.fft;
* ``spectrogram``: examples/spectrogram.py's STFT → mask → ISTFT of 32 signals × 10 s at 16 kHz
  (n_fft 1024, hop 256) on trnplan.stft/istft vs torch.stft/istft.

Each row also reports the relative difference between the two columns' outputs (both float32;
a sanity check that both ran the same computation — the examples check trnplan against float64).
``--quick`` runs tiny sizes (to prove the script works, not to measure). ``--markdown`` rewrites the
section between the ``<!-- bench:examples -->`` markers of that file.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import warnings

import torch
from _docs import replace_section  # bench/ is on sys.path when a bench script runs

import trnplan
from trnplan.tools.benchsuite import time_cells

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def synced(fns: dict, device) -> dict:
    """Each callable followed by a wait for the device (CUDA and XLA queue work asynchronously)."""
    if str(device) == "cpu":
        return fns
    sync = load("spectrogram").sync
    return {k: (lambda f=f: (f(), sync(device))) for k, f in fns.items()}


def rel(a, b) -> float:
    a, b = (t.detach().cpu().to(torch.complex128 if t.is_complex() else torch.float64) for t in (a, b))
    return float((a - b).abs().norm() / b.abs().norm())


def bench_taylor_green(n, cell_seconds, device):
    tg = load("taylor_green")
    dt = 2.0 / n  # the example's default step
    solvers = {c.name: tg.TaylorGreen(c(n, device), n, dt, dtype=torch.float32, device=device)
               for c in (tg.TrnplanFFT, tg.TorchFFT)}
    states = {k: s.step(s.initial()) for k, s in solvers.items()}
    diff = rel(solvers["trnplan"].step(states["trnplan"]), solvers["torch.fft"].step(states["torch.fft"]))
    cells = time_cells(synced({k: (lambda s=s, u=states[k]: s.step(u)) for k, s in solvers.items()}, device), cell_seconds, 5)
    return [{"example": "taylor_green", "case": f"RK3 step, {n}³", "variant": "eager", "cells": cells, "diff": diff,
             "trnplan_plans": solvers["trnplan"].fft.describe()}]


def bench_fno(dims, n, width, modes, batch, cell_seconds, device, compiled):
    fno = load("fno")
    warnings.filterwarnings("ignore", message="Torchinductor does not support code generation for complex")
    g = torch.Generator().manual_seed(0)
    a = torch.randn(batch, *([n] * dims), generator=g).to(device)
    u = torch.randn(batch, *([n] * dims), generator=g).to(device)
    fns, outs = {}, {}
    for name, fft in (("trnplan", fno.tfft), ("torch.fft", fno.TorchFFT)):
        torch.manual_seed(0)
        model = fno.FNO(dims, width, modes, layers=4, fft=fft).to(device)
        with torch.no_grad():
            outs[name] = model(a)
        net = torch.compile(model, fullgraph=True) if compiled else model
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(net=net, opt=opt):
            opt.zero_grad(set_to_none=True)
            fno.rel_l2(net(a), u).backward()
            opt.step()

        step()  # compiles here when compiled
        fns[name] = step
    cells = time_cells(synced(fns, device), cell_seconds, 5)
    size = f"n={n}" if dims == 1 else f"{n}²"
    return [{"example": f"fno {dims}-D", "case": f"train step, {size}, width {width}, {modes} modes, batch {batch}",
             "variant": "torch.compile" if compiled else "eager", "cells": cells,
             "diff": rel(outs["trnplan"], outs["torch.fft"])}]


def bench_spectrogram(batch, seconds, n_fft, hop, cell_seconds, device):
    sp = load("spectrogram")
    noisy, _ = sp.make_audio(batch, seconds, 16000, 0.3, 0)
    x = torch.from_numpy(noisy).float().to(device)
    window = torch.hann_window(n_fft, device=device)
    npow = 0.09 * float((sp.hann(n_fft) ** 2).sum())
    pairs = {"trnplan": (trnplan.stft, trnplan.istft), "torch.fft": (torch.stft, torch.istft)}
    outs = {k: sp.pipeline(x, n_fft, hop, window, npow, f, g)[0] for k, (f, g) in pairs.items()}
    cells = time_cells(synced({k: (lambda f=f, g=g: sp.pipeline(x, n_fft, hop, window, npow, f, g))
                               for k, (f, g) in pairs.items()}, device), cell_seconds, 5)
    return [{"example": "spectrogram", "case": f"STFT→mask→ISTFT, {batch}×{seconds:g} s at 16 kHz, n_fft {n_fft}, hop {hop}",
             "variant": "eager", "cells": cells, "diff": rel(outs["trnplan"], outs["torch.fft"])}]


def markdown(rows) -> str:
    lines = ["| example | case | variant | trnplan (ms) | torch (ms) | trnplan / torch | outputs differ by |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        t, b = r["cells"]["trnplan"]["us"] / 1e3, r["cells"]["torch.fft"]["us"] / 1e3
        lines.append(f"| {r['example']} | {r['case']} | {r['variant']} | {t:.2f} | {b:.2f} | {t / b:.2f} | {r['diff']:.1e} |")
    return "\n".join(lines)



def main(argv=None) -> list:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: proves the script runs, measures nothing")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cell-seconds", type=float, default=1.0, help="timed seconds per cell (default 1)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile FNO rows (two compiles each)")
    ap.add_argument("--json", default="bench/out/examples.json")
    ap.add_argument("--markdown", default=None, help="rewrite the bench:examples section of this file")
    args = ap.parse_args(argv)
    q = args.quick
    cs = 0.05 if q else args.cell_seconds
    rows = bench_taylor_green(16 if q else 64, cs, args.device)
    for compiled in (False,) if args.no_compile else (False, True):
        rows += bench_fno(1, 64 if q else 1024, 8 if q else 64, 4 if q else 16, 4 if q else 32, cs, args.device, compiled)
        rows += bench_fno(2, 16 if q else 64, 4 if q else 32, 4 if q else 12, 2 if q else 16, cs, args.device, compiled)
    rows += bench_spectrogram(2 if q else 32, 0.25 if q else 10.0, 256 if q else 1024, 64 if q else 256, cs, args.device)
    info = pathlib.Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    cpu = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), platform.machine())
    head = (f"Measured {datetime.datetime.now():%Y-%m-%d %H:%M} on {cpu} ({os.cpu_count()} vCPU, torch "
            f"{torch.get_num_threads()} threads), device {args.device}, torch {torch.__version__}, Python "
            f"{platform.python_version()}{' — QUICK (tiny sizes, not a measurement)' if q else ''}.\n\n")
    text = head + markdown(rows)
    print(text)
    out = pathlib.Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"header": head.strip(), "rows": rows}, indent=1, default=str))
    print(f"wrote {out}")
    if args.markdown:
        replace_section(args.markdown, "examples", text)
    return rows


if __name__ == "__main__":
    main()
