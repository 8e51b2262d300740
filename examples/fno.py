"""A Fourier neural operator on trnplan plans inside torch.compile: 1-D Burgers and 2-D vorticity.

A Fourier neural operator (Li et al. [1]) learns a map between functions on a grid. Its spectral
convolution layer is three steps:

    rfft(x)  →  keep the lowest ``modes`` frequencies, multiply each by a learned complex
                 channel-mixing matrix W_k  →  irfft back to the grid

plus a pointwise linear path and a nonlinearity. Here the layer is ``trnplan.nn.SpectralConv``: its
transforms are *truncated* plans (``trnplan.fft.rfftn_truncated`` / ``irfftn_truncated``): the
forward computes only the kept frequencies and the inverse reads only them (the rest are zero),
each a cached trnplan plan that the planner makes from kept-column GEMMs per axis or from the
whole transform and a cut, differentiable (backward runs the adjoint plan). The baseline model is
the same layer with ``backend="torch"``: rfftn + slice + zero-fill + irfftn on torch.fft. The whole model is compiled with
``torch.compile(fullgraph=True)``; under compilation each transform is one opaque
``trnplan::execute`` node (with ``trnplan::execute_backward`` for autograd), so Dynamo traces
the model in one graph and Inductor compiles the real-valued work around the transforms.
What does not compile today: the complex channel mixing (``einsum`` on complex64) is left to
eager ATen by Inductor ("Torchinductor does not support code generation for complex
operators"), as it is for torch.fft models.

Datasets are made here with float64 spectral solvers (numpy.fft):

* 1-D viscous Burgers, u_t + (u²/2)_x = ν u_xx on [0, 2π), ν = 0.05: random smooth u(0) →
  u(T = 1) (the FNO paper's Burgers benchmark, on a 2π box), integrating-factor RK4, 2/3 rule;
* 2-D incompressible vorticity, ω_t + u·∇ω = ν∇²ω + f, ν = 0.01, f = 0.1(sin(x + y) +
  cos(x + y)): random ω(0) → ω(T = 2) (the FNO paper's Navier–Stokes benchmark, smaller).

What it checks (exit status 1 if any check fails):

1. The spectral convolution layer (1-D and 2-D), float32 on trnplan, against the same layer
   evaluated with numpy.fft in float64, to a bar derived from the plans' accuracy bar
   (:func:`layer_bound`).
2. Training works: after the training steps the operator's relative L2 error on held-out
   samples is below that of the trivial operator that returns its input (u(T) ≈ u(0)); an
   operator that learned nothing is not better than that.

It prints and plots the loss curves, trains the same model on torch.fft with the same seed and
batches beside it (eagerly by default, to stay within a minute: ``--compile-baseline`` compiles it
too; bench/examples.py times both compiled and eager), and times a training step of each.

Run: ``python examples/fno.py`` (most of its time is the two compiles); ``--small`` for tests;
``--no-compile`` for eager.

Devices: ``--device cuda`` runs the same code on a GPU (not run on one yet); ``--device xla``
runs it on torch-xla tensors (docs/examples.md says what ran on XLA:CPU). A NeuronCore has no
complex dtype and this example keeps complex spectra between its transforms, so on ``neuron`` it
would need the ``(re, im)`` pair form of ``Plan.execute`` and split-complex arithmetic: not done.

References
----------
.. [1] Z. Li, N. Kovachki, K. Azizzadenesheli, B. Liu, K. Bhattacharya, A. Stuart,
   A. Anandkumar, "Fourier Neural Operator for Parametric Partial Differential Equations",
   ICLR 2021, arXiv:2010.08895.
.. [2] N. J. Higham and T. Mary, "A new approach to probabilistic rounding error analysis",
   SIAM J. Sci. Comput. 41 (2019) A2815–A2835 (√n·u growth of an n-term sum).
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

import trnplan.nn
from trnplan.core.accuracy import DEFAULT_TOL, UNIT_ROUNDOFF  # the engine's bars
from trnplan.nn import SpectralConv

FP32_TOL = DEFAULT_TOL["fp32"]
U32 = UNIT_ROUNDOFF["fp32"]


# ----------------------------------------------------------------------- datasets (float64)
def _grf(rng, shape, n, alpha, dims):
    """Random smooth periodic field: Fourier amplitudes ∝ (1 + |k|²)^(-alpha/2), zero mean."""
    k = [np.fft.fftfreq(n, 1.0 / n)] * (dims - 1) + [np.fft.rfftfreq(n, 1.0 / n)]
    kk = np.meshgrid(*k, indexing="ij")
    amp = (1.0 + sum(a**2 for a in kk)) ** (-alpha / 2)
    amp.flat[0] = 0.0
    c = rng.standard_normal(shape + amp.shape) + 1j * rng.standard_normal(shape + amp.shape)
    f = np.fft.irfftn(c * amp, s=(n,) * dims, axes=tuple(range(-dims, 0)))
    return f / np.sqrt((f**2).mean(axis=tuple(range(-dims, 0)), keepdims=True))  # unit RMS


def burgers_1d(samples, n, seed, nu=0.05, t_end=1.0, dt=1e-3):
    """(u0, uT), float64, shape (samples, n): viscous Burgers by integrating-factor RK4.

    dt = 1e-3 keeps the advective CFL max|u|·dt/dx ≲ 0.1 for unit-RMS data at n ≤ 256, well
    inside RK4's stability region; the viscous term is integrated exactly by the factor.
    """
    rng = np.random.default_rng(seed)
    u0 = _grf(rng, (samples,), n, alpha=2.5, dims=1)
    k = np.fft.rfftfreq(n, 1.0 / n)
    keep = np.abs(k) < n / 3
    e_half = np.exp(-nu * k**2 * dt / 2)

    def rhs(uh):
        u = np.fft.irfft(uh, n)
        return -0.5j * k * np.fft.rfft(u * u) * keep

    uh = np.fft.rfft(u0)
    for _ in range(round(t_end / dt)):
        k1 = rhs(uh)
        k2 = rhs(e_half * (uh + dt / 2 * k1))
        k3 = rhs(e_half * uh + dt / 2 * k2)
        k4 = rhs(e_half**2 * uh + dt * e_half * k3)
        uh = e_half**2 * uh + dt / 6 * (e_half**2 * k1 + 2 * e_half * (k2 + k3) + k4)
    return u0, np.fft.irfft(uh, n)


def vorticity_2d(samples, n, seed, nu=0.01, t_end=2.0, dt=0.02):
    """(ω0, ωT), float64, shape (samples, n, n): 2-D Navier–Stokes in vorticity form, IF-RK4.

    dt = 0.02: unit-RMS vorticity at ≥ 32² gives max|u|·dt/dx ≲ 0.1 (velocities are ω/|k|), well
    inside RK4's stability region; the viscous term is integrated exactly by the factor.
    """
    rng = np.random.default_rng(seed)
    w0 = _grf(rng, (samples,), n, alpha=3.0, dims=2)
    kx = np.fft.fftfreq(n, 1.0 / n)[:, None]
    ky = np.fft.rfftfreq(n, 1.0 / n)[None, :]
    k2 = kx**2 + ky**2
    inv_k2 = np.where(k2 > 0, 1.0 / np.where(k2 > 0, k2, 1.0), 0.0)
    keep = (np.abs(kx) < n / 3) & (np.abs(ky) < n / 3)
    x = np.arange(n) * 2 * np.pi / n
    X, Y = np.meshgrid(x, x, indexing="ij")
    fh = np.fft.rfft2(0.1 * (np.sin(X + Y) + np.cos(X + Y)))
    e_half = np.exp(-nu * k2 * dt / 2)

    def rhs(wh):
        psi = wh * inv_k2  # -∇²ψ = ω
        u = np.fft.irfft2(1j * ky * psi, (n, n))  # u = ∂ψ/∂y
        v = np.fft.irfft2(-1j * kx * psi, (n, n))  # v = -∂ψ/∂x
        wx = np.fft.irfft2(1j * kx * wh, (n, n))
        wy = np.fft.irfft2(1j * ky * wh, (n, n))
        return -np.fft.rfft2(u * wx + v * wy) * keep + fh

    wh = np.fft.rfft2(w0)
    for _ in range(round(t_end / dt)):
        k1 = rhs(wh)
        k2 = rhs(e_half * (wh + dt / 2 * k1))
        k3 = rhs(e_half * wh + dt / 2 * k2)
        k4 = rhs(e_half**2 * wh + dt * e_half * k3)
        wh = e_half**2 * wh + dt / 6 * (e_half**2 * k1 + 2 * e_half * (k2 + k3) + k4)
    return w0, np.fft.irfft2(wh, (n, n))


# --------------------------------------------------------------------------------- the model
class FNO(torch.nn.Module):
    """Lift (input + grid coordinates) → ``layers`` × [spectral conv + pointwise, GELU] → project."""

    def __init__(self, dims, width, modes, layers=4, backend="trnplan"):
        super().__init__()
        self.dims = dims
        self.lift = torch.nn.Linear(1 + dims, width)
        self.convs = torch.nn.ModuleList(SpectralConv(width, width, modes, dims=dims, backend=backend)
                                         for _ in range(layers))
        self.points = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
        self.proj = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, 1))

    def forward(self, a):  # a: (B, n) or (B, n, n)
        grids = torch.meshgrid(*[torch.linspace(0, 1, s, device=a.device, dtype=a.dtype) for s in a.shape[1:]],
                               indexing="ij")
        h = torch.stack([a, *(g.expand_as(a) for g in grids)], dim=-1)
        h = self.lift(h).movedim(-1, 1)  # channels first for the spectral convs
        for i, (conv, point) in enumerate(zip(self.convs, self.points)):
            h = conv(h) + point(h.movedim(1, -1)).movedim(-1, 1)
            if i < len(self.convs) - 1:
                h = F.gelu(h)
        return self.proj(h.movedim(1, -1)).squeeze(-1)


def rel_l2(pred, target):
    """Mean over samples of ‖pred − target‖ / ‖target‖ (the FNO paper's loss)."""
    d = (pred - target).flatten(1).norm(dim=1)
    return (d / target.flatten(1).norm(dim=1)).mean()


# ---------------------------------------------------------------------- the layer's accuracy
def layer_reference(layer, x):
    """The spectral conv evaluated in float64 with numpy.fft (complex128), same weights: rfftn, the
    kept block (lowest ``m`` bins of the last axis, lowest and highest ``m`` of the others), the
    mixing, zero-fill, irfftn."""
    xd = x.detach().cpu().double().numpy()
    dims, modes = layer.dims, layer.modes
    grid = xd.shape[-dims:]
    axes = tuple(range(-dims, 0))
    xh = np.fft.rfftn(xd, axes=axes)
    rows = [np.r_[0:m, n - m:n] for m, n in zip(modes[:-1], grid[:-1])] + [np.arange(modes[-1])]
    kept = xh[np.ix_(range(xh.shape[0]), range(xh.shape[1]), *rows)]
    w = layer.weight.detach().cpu().numpy().astype(np.complex128)
    mixed = np.einsum(trnplan.nn._EINSUM[dims], kept, w)
    yh = np.zeros(xh.shape[:1] + (w.shape[1],) + xh.shape[2:], dtype=np.complex128)
    yh[np.ix_(range(yh.shape[0]), range(yh.shape[1]), *rows)] = mixed
    mats = [np.moveaxis(w.reshape(*w.shape[:2], -1), -1, 0)]  # (kept modes, in, out)
    return np.fft.irfftn(yh, s=grid, axes=axes), xh, yh, mats


def layer_bound(xh, yh, mats, cin, tol=FP32_TOL, u=U32):
    """Relative L2 bound on the float32 layer's output error, from the plans' bar ``tol``.

    The rfft errs by ≤ tol·‖X‖; the per-mode channel mixing maps that error through at most
    ‖W‖ = max_k ‖W_k‖₂ and adds its own rounding, ≲ √(2·cin)·u relative per output (a 2·cin-term
    real sum; probabilistic bound of [2]), so the mixed spectrum errs by ≤ ‖W‖·‖X‖·(tol +
    √(2 cin)·u). Relative to the output spectrum ‖Y‖ that is κ·(tol + √(2 cin)·u) with
    κ = ‖W‖·‖X‖/‖Y‖ (how much the truncation and mixing shrink the signal, measured from the
    float64 reference; Parseval, with the half-spectrum counted twice where it stands for two
    modes, bounded by √2). The irfft adds its own tol.
    """
    wnorm = max(float(np.linalg.norm(mm, ord=2, axis=(1, 2)).max()) for mm in mats)
    kappa = math.sqrt(2.0) * wnorm * float(np.linalg.norm(xh)) / float(np.linalg.norm(yh))
    return tol + kappa * (tol + math.sqrt(2 * cin) * u), kappa


# ------------------------------------------------------------------------------------- driver
def train(dims, data, args, backend, label, steps, compile, log=print, schedule=None):
    """Train an FNO with Adam for ``steps`` steps of a cosine schedule over ``schedule`` steps
    (default ``steps``); return losses, test error and step times."""
    (a_tr, u_tr), (a_te, u_te) = data
    torch.manual_seed(args.seed)
    width, modes = (args.width1, args.modes1) if dims == 1 else (args.width2, args.modes2)
    batch = args.batch if dims == 1 else args.batch2
    model = FNO(dims, width, modes, layers=4, backend=backend).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=schedule or steps)
    fwd = torch.compile(model, fullgraph=True) if compile else model

    def step(a, u, net):
        opt.zero_grad(set_to_none=True)
        loss = rel_l2(net(a), u)
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()

    g = torch.Generator().manual_seed(args.seed)
    losses, times = [], []
    for s in range(steps):
        idx = torch.randint(0, a_tr.shape[0], (batch,), generator=g)
        t0 = time.perf_counter()
        loss = step(a_tr[idx], u_tr[idx], fwd)
        sync(args.device)
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
        if log and (s % max(1, steps // 6) == 0 or s == steps - 1):
            log(f"  {label} {dims}-D step {s:4d}  train rel-L2 {losses[-1]:.4f}")
    with torch.no_grad():  # evaluated eagerly: a no-grad graph at another batch size would compile again
        test = float(rel_l2(model(a_te), u_te))
    out = {"losses": losses, "test": test, "first_step_s": times[0],
           "step_s": float(np.median(times[min(5, len(times) - 1):]))}
    if compile and args.eager_steps:  # the same model eagerly, for the timing table (weights keep training)
        eager = []
        for _ in range(args.eager_steps):
            idx = torch.randint(0, a_tr.shape[0], (batch,), generator=g)
            t0 = time.perf_counter()
            step(a_tr[idx], u_tr[idx], model)
            sync(args.device)
            eager.append(time.perf_counter() - t0)
        out["eager_step_s"] = float(np.median(eager[1:] or eager))
    return out


def make_data(dims, args):
    if dims == 1:
        a, u = burgers_1d(args.train + args.test, args.n1, args.seed)
    else:
        a, u = vorticity_2d(args.train + args.test, args.n2, args.seed)
    a = torch.from_numpy(a).float().to(args.device)
    u = torch.from_numpy(u).float().to(args.device)
    return (a[: args.train], u[: args.train]), (a[args.train:], u[args.train:])


def plot(path, results):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  plot skipped: matplotlib is not installed (pip install 'trnplan[plot]')")
        return None
    fig, axes = plt.subplots(1, len(results), figsize=(5.2 * len(results), 3.6), dpi=110, squeeze=False)
    for ax, (dims, r) in zip(axes[0], results.items()):
        ax.semilogy(r["trnplan"]["losses"], lw=1.2, label="trnplan.fft (compiled)" if r["compiled"] else "trnplan.fft")
        if "torch.fft" in r:
            ax.semilogy(r["torch.fft"]["losses"], "--", lw=1, alpha=0.8, label="torch.fft, same seed and batches")
        ax.axhline(r["identity"], color="r", ls="--", lw=1, label=f"identity operator (test) {r['identity']:.3f}")
        ax.axhline(r["trnplan"]["test"], color="k", ls=":", lw=1, label=f"trained, test {r['trnplan']['test']:.3f}")
        ax.set_title(r["title"], fontsize=9)
        ax.set_xlabel("training step")
        ax.set_ylabel("relative L2 error")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
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
    ap.add_argument("--steps1", type=int, default=250, help="training steps, 1-D Burgers (default 250)")
    ap.add_argument("--steps2", type=int, default=150, help="training steps, 2-D vorticity (default 150)")
    ap.add_argument("--n1", type=int, default=128, help="1-D grid (default 128)")
    ap.add_argument("--n2", type=int, default=32, help="2-D grid per axis (default 32)")
    ap.add_argument("--width1", type=int, default=32)
    ap.add_argument("--modes1", type=int, default=16)
    ap.add_argument("--width2", type=int, default=16)
    ap.add_argument("--modes2", type=int, default=8)
    ap.add_argument("--train", type=int, default=256, help="training samples per dataset (default 256)")
    ap.add_argument("--test", type=int, default=64, help="held-out samples (default 64)")
    ap.add_argument("--batch", type=int, default=32, help="1-D batch (default 32)")
    ap.add_argument("--batch2", type=int, default=16, help="2-D batch (default 16)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--small", action="store_true", help="tiny run for tests")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="run eagerly (default: torch.compile)")
    ap.add_argument("--baseline-steps", type=int, default=50,
                    help="steps of the same model on torch.fft, for the timing and loss comparison (default 50; 0: skip)")
    ap.add_argument("--compile-baseline", action="store_true",
                    help="compile the torch.fft model too (default: eager, to stay under a minute; bench/examples.py compiles both)")
    ap.add_argument("--eager-steps", type=int, default=10, help="eager steps of the trnplan model timed after training (default 10)")
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    ap.add_argument("--out", default="examples/out/fno.png", help="PNG path for the loss curves")
    ap.add_argument("--json", default=None, help="also write the checks and timings here")
    args = ap.parse_args(argv)
    args.device = use_device(args.device)
    if args.small:
        args.steps1, args.steps2, args.n1, args.n2, args.train, args.test = 80, 60, 64, 16, 64, 16
        args.width1, args.modes1, args.width2, args.modes2 = 16, 8, 8, 4
    warnings.filterwarnings("ignore", message="Torchinductor does not support code generation for complex")

    checks = []

    def check(name, value, bar, why):
        ok = bool(value <= bar)
        checks.append({"name": name, "value": value, "bar": bar, "ok": ok, "why": why})
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}: {value:.3e} <= {bar:.3e}  ({why})")

    results = {}
    for dims in (1, 2):
        steps = args.steps1 if dims == 1 else args.steps2
        t0 = time.perf_counter()
        data = make_data(dims, args)
        n = args.n1 if dims == 1 else args.n2
        title = (f"1-D Burgers ν=0.05, n={n}: u(0) → u(1)" if dims == 1 else
                 f"2-D vorticity ν=0.01, {n}²: ω(0) → ω(2)")
        print(f"{title}: {args.train}+{args.test} samples made in {time.perf_counter() - t0:.1f} s (float64 spectral solver)")
        identity = float(rel_l2(data[1][0], data[1][1]))
        # 1. the spectral conv layer against float64
        torch.manual_seed(args.seed)
        width, modes = (args.width1, args.modes1) if dims == 1 else (args.width2, args.modes2)
        layer = SpectralConv(width, width, modes, dims=dims).to(args.device)
        x = torch.randn(8, width, *([n] * dims), device=args.device)
        with torch.no_grad():
            y = layer(x)
        ref, xh, yh, mats = layer_reference(layer, x)
        err = float(np.linalg.norm(y.cpu().double().numpy() - ref) / np.linalg.norm(ref))
        bar, kappa = layer_bound(xh, yh, mats, width)
        check(f"{dims}-D spectral conv float32 (trnplan) vs numpy.fft float64, relative L2", err, bar,
              f"tol + κ·(tol + √(2·cin)·u32), κ = {kappa:.1f} (layer_bound)")
        # 2. training
        r = {"title": title, "identity": identity, "compiled": args.compile}
        r["trnplan"] = train(dims, data, args, "trnplan", "trnplan  ", steps, args.compile)
        base = min(args.baseline_steps, steps)
        if base:  # the same model, seed and batches on torch.fft (compiled only with --compile-baseline)
            r["torch.fft"] = train(dims, data, args, "torch", "torch.fft", base, args.compile_baseline, log=None,
                                   schedule=steps)  # the trnplan run's learning-rate schedule, cut short
        check(f"{dims}-D trained operator, test relative L2 vs the identity operator's", r["trnplan"]["test"], identity,
              "an operator that learned nothing does no better than returning its input")
        tr = r["trnplan"]
        mode = "compiled" if args.compile else "eager"
        print(f"  {dims}-D: test rel-L2 {tr['test']:.4f} (identity operator {identity:.4f}); training step "
              f"(median, this machine as loaded now): trnplan {mode} {tr['step_s'] * 1e3:.1f} ms (first step "
              f"{tr['first_step_s']:.1f} s)" + (f", trnplan eager {tr['eager_step_s'] * 1e3:.1f} ms" if "eager_step_s" in tr else ""))
        if base:
            tb = r["torch.fft"]
            print(f"      torch.fft {'compiled' if args.compile_baseline else 'eager'} {tb['step_s'] * 1e3:.1f} ms; "
                  f"after {base} steps train loss trnplan {tr['losses'][base - 1]:.4f} vs torch.fft "
                  f"{tb['losses'][base - 1]:.4f} (same seed and batches), test {tb['test']:.4f}")
        results[dims] = r
    png = plot(args.out, results)
    out = {"example": "fno", "device": str(args.device), "compiled": args.compile, "checks": checks, "png": png,
           "runs": {str(d): {"identity": r["identity"],
                             **{k: {kk: vv for kk, vv in v.items() if kk != "model"} for k, v in r.items()
                                if k in ("trnplan", "torch.fft")}} for d, r in results.items()}}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(out, indent=1))
    failed = [c["name"] for c in checks if not c["ok"]]
    print("all checks passed" if not failed else f"FAILED: {failed}")
    out["ok"] = not failed
    return out


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
