"""plan_conv's pick on a grid a user plans, against what a user writes instead (issue 30 item 2).

Per cell (batch×channels float32 signals of length L, a bank of K taps, linear or causal), in one
process and one round-robin (shuffled rounds, paired per round: ``per_round_ratio``):

* ``before``: the default's transform length and call path as they were before issue 30's pick
  fixes (main at 151ea9e): the estimate at the least even smooth length, method=spatial's calls
  through its route module (its ready call cleared first); the prices are today's (at 2 threads
  the old ones picked method=spatial at 1×64, L = 1024, K ≤ 8 and L = 16384, K = 128: see
  docs/benchmarks.md);
* ``estimate``: ``plan_conv(h, L, mode, batch=B)``, the cost model's pick (the default);
* ``measure``: ``plan_conv(..., effort="measure")``, the routes and lengths timed at planning
  (timed as its own cell only where its tree differs from the estimate's);
* ``torch.fft``: bench/spectral.py's one-liner, ``irfft(rfft(x, n) · rfft(h, n), n)[..., :keep]``
  at ``n = next 2·3·5-smooth ≥ L + K − 1``;
* ``F.conv1d``: bench/spectral.py's direct form, ``conv1d(F.pad(x, pad), h.flip(-1)[:, None], groups=C)``.

Every output is checked against a float64 torch.fft convolution with the fp32 bar. Prints one JSON
line per cell (the ratios ``estimate / torch.fft`` etc.) and a markdown table at the end; the issue's
goal is each plan's ratio ≤ 1.05 against both forms. A busy machine moves the ratios; say the load.

    PYTHONPATH=. python bench/conv_picks.py --threads 1 [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os

import torch

from trnplan.conv import ConvPlan, plan_conv, smooth_length
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.tools.benchsuite import per_round_ratio, time_cells

BAR = DEFAULT_TOL["fp32"]
SHAPES = ((1, 64), (8, 32))
LENGTHS = (256, 1024, 4096, 16384)
KERNELS = (3, 8, 32, 128, 256)
MODES = ("linear", "causal")
PLANS = ("before", "estimate", "measure")


def _least_even(n: int) -> int:
    """The least even 2·3·5-smooth length ≥ n: the transform length before 2026-11-27 11:00."""
    m = smooth_length(n)
    while m % 2:
        m = smooth_length(m + 1)
    return m


def torch_fft_conv(x, h, n, keep):
    """bench/spectral.py's torch.fft form: rfft both at length n, multiply, irfft, crop."""
    return torch.fft.irfft(torch.fft.rfft(x, n=n) * torch.fft.rfft(h, n=n), n=n)[..., :keep]


def cell(batch, channels, length, k, mode, cell_seconds, rounds):
    x = torch.randn(batch, channels, length)
    h = torch.randn(channels, k) / k
    keep = length + k - 1 if mode == "linear" else length
    n = smooth_length(length + k - 1)
    ref = torch_fft_conv(x.double(), h.double(), n, keep)
    est = plan_conv(h, length, mode, batch=batch)
    meas = plan_conv(h, length, mode, batch=batch, effort="measure")
    w = h.flip(-1)[:, None, :].contiguous()
    pad = (k - 1, k - 1 if mode == "linear" else 0)
    fns = {"estimate": lambda: est(x), "torch.fft": lambda: torch_fft_conv(x, h, n, keep),
           "F.conv1d": lambda: torch.nn.functional.conv1d(torch.nn.functional.pad(x, pad), w, groups=channels)}
    # before (main at 151ea9e): the estimate at the least even smooth length, method=spatial without
    # its ready call (each call through the route module: the ready call cleared first)
    old = ConvPlan(h, (length,), mode, None, batch, n=(_least_even(length + k - 1),))
    fns["before"] = (lambda: (old._scratch.clear(), old(x))[1]) if old.method == "spatial" else (lambda: old(x))
    same = meas.tree == est.tree
    if not same:
        fns["measure"] = lambda: meas(x)
    for name, fn in fns.items():
        err = float(torch.linalg.vector_norm(fn().double() - ref) / torch.linalg.vector_norm(ref))
        assert err <= BAR, (name, batch, channels, length, k, mode, err)
    timed = time_cells(fns, cell_seconds, 3, rounds=rounds, keep_samples=True)
    s = {name: t["samples_us"] for name, t in timed.items()}
    out = {"shape": f"{batch}x{channels}", "L": length, "K": k, "mode": mode,
           "estimate": f"{est.method} {est.n[0]}", "measure": f"{meas.method} {meas.n[0]}",
           "us": {name: round(t["us"], 1) for name, t in timed.items()}}
    out["before"] = f"{old.method} {old.n[0]}"
    for plan in PLANS:
        mine = s["estimate" if same and plan == "measure" else plan]
        for other in ("torch.fft", "F.conv1d"):
            out[f"{plan} / {other}"] = round(per_round_ratio(mine, {other: s[other]}), 3)
    return out


def table(rows) -> str:
    lines = [("| B×C | L | K | mode | before's pick | / torch.fft | / F.conv1d | estimate's pick | / torch.fft | "
              "/ F.conv1d | measured pick | / torch.fft | / F.conv1d |"), "|---" * 13 + "|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['L']} | {r['K']} | {r['mode']} | " + " | ".join(
            f"{r[plan]} | {r[f'{plan} / torch.fft']:.2f} | {r[f'{plan} / F.conv1d']:.2f}"
            for plan in PLANS) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="L in (256, 1024, 16384), K in (3, 8, 128)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    lengths, kernels = ((256, 1024, 16384), (3, 8, 128)) if args.quick else (LENGTHS, KERNELS)
    rows = []
    for (batch, channels), length, k, mode in itertools.product(SHAPES, lengths, kernels, MODES):
        rows.append(cell(batch, channels, length, k, mode, cell_seconds=0.05, rounds=9))
        print(json.dumps(rows[-1]), flush=True)
    print(f"\nthreads {args.threads}, load average {os.getloadavg()[0]:.1f} at the end")
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "load": os.getloadavg(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
