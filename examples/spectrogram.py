"""A spectrogram pipeline on trnplan: STFT → magnitude mask → ISTFT over a batch of audio.

A batch of synthetic recordings is made here (16 kHz: a linear chirp, a harmonic tone with
vibrato and a click train, plus white noise at a known level), transformed with
:func:`trnplan.stft` (one batched r2c plan over every frame of every signal), denoised by a
magnitude mask (the Wiener gain of power spectral subtraction, m = max(0, 1 − P_n/|X|²), where
P_n is the expected noise power of a bin: white noise of variance σ² gives σ²·Σ w[k]² under
window w), and put back with :func:`trnplan.istft` (one batched c2r plan, windowed overlap-add
divided by the overlap-added squared window: Griffin and Lim's least-squares inverse [1]).

What it checks (exit status 1 if any check fails), each against the same computation in float64
with numpy.fft (complex128), to bars derived from trnplan's fp32 plan bar (see :func:`bars`):

1. the STFT;
2. the round trip ISTFT(STFT(x)) = x;
3. the whole masked pipeline's output;
4. and that the mask does its job: the output is closer to the clean signal than the noisy input
   (SNR gain > 0 dB; a mask that does not help has failed).

It writes a PNG of the noisy and masked spectrograms of one signal and times the pipeline on
trnplan against torch.stft/istft.

Run: ``python examples/spectrogram.py`` (a few seconds on a 2-core CPU); ``--small`` for tests.

Devices: ``--device cuda`` runs the same code on a GPU (not run on one yet); ``--device xla``
runs it on torch-xla tensors (docs/examples.md says what ran on XLA:CPU). A NeuronCore has no
complex dtype and this example keeps complex spectra between its transforms, so on ``neuron`` it
would need the ``(re, im)`` pair form of ``Plan.execute`` and split-complex arithmetic: not done.

References
----------
.. [1] D. W. Griffin and J. S. Lim, "Signal estimation from modified short-time Fourier
   transform", IEEE Trans. ASSP 32 (1984) 236–243.
.. [2] S. F. Boll, "Suppression of acoustic noise in speech using spectral subtraction", IEEE
   Trans. ASSP 27 (1979) 113–120.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import time

import numpy as np
import torch

import trnplan
from trnplan.core.accuracy import DEFAULT_TOL, UNIT_ROUNDOFF  # the engine's bars

FP32_TOL = DEFAULT_TOL["fp32"]
U32 = UNIT_ROUNDOFF["fp32"]


def make_audio(batch, seconds, sr, noise_rms, seed):
    """(noisy, clean) float64 arrays (batch, samples): chirp + vibrato tone + clicks, + noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    clean = np.zeros((batch, t.size))
    for b in range(batch):
        f0, f1 = rng.uniform(200, 1000), rng.uniform(2000, 6000)  # linear chirp f0 → f1
        clean[b] += 0.5 * np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * seconds)))
        fv = rng.uniform(150, 400)  # harmonic tone, 5 Hz vibrato of ±2 %
        phase = 2 * np.pi * fv * (t - 0.02 / (2 * np.pi * 5) * np.cos(2 * np.pi * 5 * t))
        clean[b] += sum(0.3 / h * np.sin(h * phase) for h in range(1, 5))
        clicks = np.zeros_like(t)  # a click train, 4 per second, 2 ms decaying bursts
        for c in np.arange(0.1, seconds, 0.25):
            i = int(c * sr)
            n = min(int(0.002 * sr), t.size - i)
            clicks[i:i + n] += np.exp(-np.arange(n) / (0.0005 * sr)) * rng.standard_normal(n)
        clean[b] += 0.5 * clicks
    noisy = clean + noise_rms * rng.standard_normal(clean.shape)
    return noisy, clean


# ---------------------------------------------------------------------- float64 reference
def hann(n):
    """The periodic Hann window in float64 (torch.hann_window's definition)."""
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)


def stft_ref(x, n_fft, hop, w):
    """torch.stft(center=True, pad_mode='reflect', onesided) in float64 with numpy.fft."""
    xp = np.pad(x, [(0, 0), (n_fft // 2, n_fft // 2)], mode="reflect")
    frames = 1 + (xp.shape[-1] - n_fft) // hop
    idx = np.arange(frames)[:, None] * hop + np.arange(n_fft)[None, :]
    return np.fft.rfft(xp[:, idx] * w, axis=-1).transpose(0, 2, 1)  # (B, bins, frames)


def istft_ref(X, n_fft, hop, w, length):
    """torch.istft(center=True, length=...) in float64 with numpy.fft."""
    frames = np.fft.irfft(X.transpose(0, 2, 1), n_fft, axis=-1) * w  # (B, T, n_fft)
    T = frames.shape[1]
    size = n_fft + hop * (T - 1)
    y, wsum = np.zeros((X.shape[0], size)), np.zeros(size)
    for m in range(T):
        y[:, m * hop:m * hop + n_fft] += frames[:, m]
        wsum[m * hop:m * hop + n_fft] += w**2
    start = n_fft // 2
    return y[:, start:start + length] / wsum[start:start + length]


def wiener_mask(power, noise_power):
    """Power spectral subtraction's gain [2]: max(0, 1 − P_n/|X|²), a function of |X| only."""
    return np.clip(1.0 - noise_power / np.maximum(power, 1e-300), 0.0, None)


# ------------------------------------------------------------------------------ the pipeline
def pipeline(x, n_fft, hop, window, noise_power, stft=trnplan.stft, istft=trnplan.istft):
    """STFT → mask → ISTFT on torch tensors; ``stft``/``istft``: trnplan's or torch's."""
    X = stft(x, n_fft, hop_length=hop, window=window, return_complex=True)
    power = X.real**2 + X.imag**2
    mask = torch.clamp(1.0 - noise_power / power.clamp_min(torch.finfo(power.dtype).tiny), min=0.0)
    return istft(X * mask, n_fft, hop_length=hop, window=window, length=x.shape[-1]), X


def bars(w, n_fft, hop, shrink, tol=FP32_TOL, u=U32):
    """The three accuracy bars, from the plans' bar ``tol`` (relative L2) and u = 2^-24.

    * STFT: the r2c plan's tol, plus the frames' windowing (the float32 window is within u of
      the float64 one, and the product rounds once): tol + 2u.
    * Round trip: the STFT's error and the c2r plan's tol, carried back to the signal through
      the overlap-add; relative L2 errors in the STFT domain map to the signal with at most
      κ = √(max/min of the overlap-added squared window) (the frame bounds of the windowed
      transform: κ = 1 for a periodic Hann window at hop n_fft/4, where the sum is 1.5
      everywhere). The inverse's own arithmetic: window product, a sum of n_fft/hop
      overlapping frames, one division: (2 + n_fft/hop)·u.
    * Masked pipeline: the gain m = max(0, 1 − P_n/|X|²) is 1-Lipschitz in the sense
      |X|·|δm| ≤ 2|δX| (d m/d|X|² = P_n/|X|⁴ and P_n ≤ |X|² where m > 0), so
      ‖δ(mX)‖ ≤ ‖δX‖ + 2‖δX‖ = 3‖δX‖, relative to ‖mX‖ a factor ``shrink`` = ‖X‖/‖mX‖ larger
      (measured on the float64 reference); then the inverse as above.
    """
    wsum = np.zeros(n_fft + hop * (4 * n_fft // hop))
    for m in range(4 * n_fft // hop + 1):
        wsum[m * hop:m * hop + n_fft] += w**2
    interior = wsum[n_fft:-n_fft]
    kappa = math.sqrt(interior.max() / interior.min())
    stft_bar = tol + 2 * u
    inverse = (2 + n_fft / hop) * u
    return {"stft": stft_bar,
            "round_trip": kappa * (stft_bar + tol + inverse),
            "pipeline": kappa * (3 * stft_bar * shrink + tol + inverse),
            "kappa": kappa}


def rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def snr_db(x, clean) -> float:
    return float(10 * np.log10((clean**2).sum() / ((x - clean) ** 2).sum()))


def time_pipeline(x, n_fft, hop, window, noise_power, repeats):
    """Median seconds of the whole pipeline on trnplan and on torch.stft/istft (warm)."""
    out = {}
    pairs = {"trnplan": (trnplan.stft, trnplan.istft), "torch.stft": (torch.stft, torch.istft)}
    if x.device.type == "xla":
        # torch.istft on an xla tensor aborted the process here (torch-xla 2.9, PJRT_DEVICE=CPU: XLA
        # "Check failed: p1.size() == p2.size()" in permutation_util.h): no torch baseline there
        print("  timing: torch.istft is skipped on xla (it aborts the process on torch-xla 2.9)")
        del pairs["torch.stft"]
    for name, (f, g) in pairs.items():
        pipeline(x, n_fft, hop, window, noise_power, f, g)  # warm: plans built, caches filled
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            pipeline(x, n_fft, hop, window, noise_power, f, g)
            sync(x.device)
            ts.append(time.perf_counter() - t0)
        out[name] = float(np.median(ts))
    return out


def plot(path, noisy, X, masked_X, clean_snr, sr, hop):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  plot skipped: matplotlib is not installed (pip install 'trnplan[plot]')")
        return None
    # 80 dpi and a 32-level colour map: a noise texture does not compress, and the PNG goes in the docs
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), dpi=80, sharey=True, layout="constrained")
    cmap = plt.get_cmap("magma", 32)
    extent = [0, noisy.shape[-1] / sr, 0, sr / 2000]
    vmax = 20 * np.log10(np.abs(X).max())
    for ax, S, title in ((axes[0], X, "noisy input, trnplan.stft"), (axes[1], masked_X, f"masked (SNR gain {clean_snr:+.1f} dB)")):
        im = ax.imshow(20 * np.log10(np.abs(S) + 1e-12), origin="lower", aspect="auto", extent=extent,
                       vmin=vmax - 80, vmax=vmax, cmap=cmap)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("time (s)")
    axes[0].set_ylabel("frequency (kHz)")
    fig.colorbar(im, ax=axes, label="dB", shrink=0.9)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.canvas.draw()
    from PIL import Image  # Pillow is a matplotlib dependency

    # a 64-colour palette PNG: ~4× smaller than RGBA for this image, no visible loss
    Image.fromarray(np.asarray(fig.canvas.buffer_rgba())[..., :3]).quantize(64).save(path, optimize=True)
    plt.close(fig)
    print(f"  wrote {path}")
    return str(path)


def sync(device) -> None:
    """Wait for the device's queued work, so a timer measures it (CUDA and XLA run asynchronously;
    XLA tensors are lazy until a step is cut)."""
    device = str(device)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    elif device.startswith("xla"):
        import torch_xla
        import torch_xla.core.xla_model as xm

        torch_xla.sync()  # cut the lazy graph and run it (xm.mark_step() in torch-xla < 2.6)
        xm.wait_device_ops()


def use_device(name: str) -> str:
    """Make ``--device`` usable: the ``xla`` device exists only once torch_xla is imported."""
    if name.startswith("xla"):
        try:
            import torch_xla  # noqa: F401  (registers the xla device with torch)
        except ImportError as e:
            raise SystemExit(f"--device {name} needs torch_xla (pip install torch-xla matching your torch): {e}")
    return name


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=16, help="signals (default 16)")
    ap.add_argument("--seconds", type=float, default=2.0, help="length of each (default 2 s)")
    ap.add_argument("--sr", type=int, default=16000, help="sample rate (default 16 kHz)")
    ap.add_argument("--n-fft", type=int, default=512)
    ap.add_argument("--hop", type=int, default=128)
    ap.add_argument("--noise", type=float, default=0.3, help="noise RMS (default 0.3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=None, help="timed repetitions (default 10, 2 with --small; 0: skip)")
    ap.add_argument("--small", action="store_true", help="tiny run for tests")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    ap.add_argument("--out", default="examples/out/spectrogram.png", help="PNG path for the spectrograms")
    ap.add_argument("--json", default=None, help="also write the checks and timings here")
    args = ap.parse_args(argv)
    args.device = use_device(args.device)
    if args.small:
        args.batch, args.seconds, args.n_fft, args.hop = 2, 0.25, 256, 64
    if args.repeats is None:
        args.repeats = 2 if args.small else 10

    noisy64, clean64 = make_audio(args.batch, args.seconds, args.sr, args.noise, args.seed)
    x = torch.from_numpy(noisy64).float().to(args.device)
    xd = x.cpu().double().numpy()  # the reference starts from the same float32 samples
    window = torch.hann_window(args.n_fft, device=args.device)
    w64 = hann(args.n_fft)
    noise_power = args.noise**2 * float((w64**2).sum())  # E|N_k|² of white noise under the window
    print(f"spectrogram pipeline: {args.batch} signals × {x.shape[-1]} samples at {args.sr} Hz, n_fft {args.n_fft}, "
          f"hop {args.hop}, Hann window, device {args.device}")

    y, X = pipeline(x, args.n_fft, args.hop, window, noise_power)
    rt = trnplan.istft(X, args.n_fft, hop_length=args.hop, window=window, length=x.shape[-1])
    Xr = stft_ref(xd, args.n_fft, args.hop, w64)
    mask_r = wiener_mask(np.abs(Xr) ** 2, noise_power)
    yr = istft_ref(Xr * mask_r, args.n_fft, args.hop, w64, xd.shape[-1])
    b = bars(w64, args.n_fft, args.hop, shrink=float(np.linalg.norm(Xr) / np.linalg.norm(Xr * mask_r)))

    checks = []

    def check(name, value, bar, why, at_least=False):
        ok = bool(value >= bar if at_least else value <= bar)
        checks.append({"name": name, "value": value, "bar": bar, "at_least": at_least, "ok": ok, "why": why})
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}: {value:.3e} {'>' if at_least else '<'}= {bar:.3e}  ({why})")

    Xn = X.cpu().numpy().astype(np.complex128)
    check("STFT float32 (trnplan) vs numpy.fft float64, relative L2", rel(Xn, Xr), b["stft"], "tol + 2u (bars)")
    check("round trip istft(stft(x)) vs x, relative L2", rel(rt.cpu().double().numpy(), xd), b["round_trip"],
          f"κ·(stft bar + tol + (2 + n_fft/hop)·u), κ = {b['kappa']:.3f}")
    check("masked pipeline float32 vs float64 reference, relative L2", rel(y.cpu().double().numpy(), yr), b["pipeline"],
          "κ·(3·stft bar·‖X‖/‖mX‖ + tol + (2 + n_fft/hop)·u)")
    gain = snr_db(y.cpu().double().numpy(), clean64) - snr_db(xd, clean64)
    check("SNR gain of the mask, dB", gain, 0.0, "the output must be closer to the clean signal than the input", at_least=True)
    print(f"  SNR: input {snr_db(xd, clean64):.2f} dB, output {snr_db(y.cpu().double().numpy(), clean64):.2f} dB")

    timing = time_pipeline(x, args.n_fft, args.hop, window, noise_power, args.repeats) if args.repeats else {}
    if timing:
        print(f"  pipeline time ({args.repeats} runs, median, this machine as loaded now): "
              + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in timing.items()))
    masked_X = trnplan.stft(y, args.n_fft, hop_length=args.hop, window=window, return_complex=True)
    png = plot(args.out, xd[0], Xn[0], masked_X[0].cpu().numpy(), gain, args.sr, args.hop)
    out = {"example": "spectrogram", "device": str(args.device), "checks": checks, "snr_gain_db": gain,
           "timing_s": timing, "png": png, "shape": list(x.shape), "n_fft": args.n_fft, "hop": args.hop}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(out, indent=1))
    failed = [c["name"] for c in checks if not c["ok"]]
    print("all checks passed" if not failed else f"FAILED: {failed}")
    out["ok"] = not failed
    return out


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
