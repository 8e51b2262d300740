"""Pseudo-spectral 3-D Navier–Stokes: the Re = 1600 Taylor–Green vortex on reusable trnplan plans.

The incompressible Navier–Stokes equations in the periodic box [0, 2π)³,

    ∂u/∂t = u × ω − ∇(p + |u|²/2) + ν ∇²u,     ∇·u = 0,     ω = ∇ × u,

are advanced in Fourier space the way spectral DNS codes do it (Canuto et al. [1]; Mortensen and
Langtangen's spectralDNS [2]): the velocity lives as its r2c spectrum û (3, N, N, N/2+1); each
right-hand side runs ONE c2r plan over the six fields (û, ω̂ = i k × û), forms u × ω on the grid,
runs ONE r2c plan over its three components, removes aliases with the 2/3 rule (modes with
|k_i| ≥ N/3 are zeroed, so the quadratic product's aliases land only on discarded modes) and
projects onto divergence-free fields (P = I − k kᵀ/|k|², which is the pressure). Time stepping is
Williamson's low-storage (2N) RK3 [3] on the integrating-factor variable v = exp(ν|k|²t) û, so
the viscous term is integrated exactly and the step is limited by advection only.

The two plans are built once by :func:`trnplan.plan_many` and executed 6 times per step:
plan once, execute thousands of times.

Initial condition (Brachet et al. [4]): u = sin x cos y cos z, v = −cos x sin y cos z, w = 0,
ν = 1/1600. Its energy E = ½⟨|u|²⟩ = 1/8 and enstrophy Ω = ½⟨|ω|²⟩ = 3/8 follow from the
averages of sin² and cos² (1/2 each): ⟨|u|²⟩ = 2·(1/8), ⟨|ω|²⟩ = (1 + 1 + 4)/8.

What it checks (exit status 1 if any check fails):

1. t = 0: E and Ω of the r2c spectrum equal 1/8 and 3/8, to the r2c plan's own bar.
2. Every step: the energy budget −dE/dt = 2νΩ. The dealiased nonlinear term moves energy
   between modes but creates none (u·(u × ω) = 0 pointwise, and P and the 2/3 mask are
   orthogonal projections that leave û unchanged), so its energy transfer T = ⟨u · N(u)⟩ must
   vanish and dE/dt = T − 2νΩ. |T| is checked against a bound derived from the plans' error
   bar (:func:`transfer_bound`), relative to 2νΩ.
3. The float32 trnplan run against a float64 run of the same scheme whose FFTs are numpy.fft in
   complex128: E(t), ε(t) = 2νΩ and the final velocity field, within the plans' bar times a
   stated growth factor (:func:`drift_bound`).

It also prints -ΔE/Δt against the trapezoid mean of 2νΩ over each step (the budget in discrete
time, which holds to O(Δt²): reported, not checked), plots ε(t) with the published 512³ peak
(≈ 0.0128 near t ≈ 9), and times a step on trnplan plans against the same solver on torch.fft.

Run: ``python examples/taylor_green.py`` (32³ to t = 10: ~50 s of CPU time here); ``--n 64`` for
a curve near the published one (8× the work per step, twice the steps); ``--small`` for tests.

Devices: ``--device cuda`` runs the same code on a GPU (not run on one yet); ``--device xla``
runs it on torch-xla tensors (docs/examples.md says what ran on XLA:CPU). A NeuronCore has no
complex dtype and this example keeps complex spectra between its transforms, so on ``neuron`` it
would need the ``(re, im)`` pair form of ``Plan.execute`` and split-complex arithmetic: not done.

References
----------
.. [1] C. Canuto, M. Y. Hussaini, A. Quarteroni, T. A. Zang, *Spectral Methods: Evolution to
   Complex Geometries and Applications to Fluid Dynamics*, Springer 2007, §3.3 (dealiasing).
.. [2] M. Mortensen and H. P. Langtangen, "High performance Python for direct numerical
   simulations of turbulent flows", Comput. Phys. Commun. 203 (2016) 53–65.
.. [3] J. H. Williamson, "Low-storage Runge–Kutta schemes", J. Comput. Phys. 35 (1980) 48–56.
.. [4] M. E. Brachet et al., "Small-scale structure of the Taylor–Green vortex", J. Fluid
   Mech. 130 (1983) 411–452; 512³ reference dissipation also in W. M. van Rees et al., J.
   Comput. Phys. 230 (2011) 2794–2805, and Z. J. Wang et al., Int. J. Numer. Meth. Fluids 72
   (2013) 811–845 (the high-order CFD workshop's TGV case).
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

NU = 1.0 / 1600.0
E0, OMEGA0 = 1.0 / 8.0, 3.0 / 8.0
#: Williamson's 2N-storage RK3 (case 7 of [3]): q ← A q + Δt f, v ← v + B q, at time t + c Δt
RK3_A = (0.0, -5.0 / 9.0, -153.0 / 128.0)
RK3_B = (1.0 / 3.0, 15.0 / 16.0, 8.0 / 15.0)
RK3_C = (0.0, 1.0 / 3.0, 3.0 / 4.0)
#: the published 512³ dissipation peak (refs [4]), drawn as a marker: ε ≈ 0.0128 at t ≈ 9
REFERENCE_PEAK = (9.0, 0.0128)
FP32_TOL = DEFAULT_TOL["fp32"]  # the bar every fp32 plan is built to meet (relative L2)
U32 = UNIT_ROUNDOFF["fp32"]


# ------------------------------------------------------------------------------- FFT back ends
class TrnplanFFT:
    """r2c/c2r over the box on two reusable trnplan plans (3 fields forward, 6 back)."""

    name = "trnplan"

    def __init__(self, n: int, device, dtype=torch.float32):
        shape = (n, n, n)
        self.forward = trnplan.plan_many(shape, batch=3, kind="r2c", dtype=dtype, device=device)
        self.inverse = trnplan.plan_many(shape, batch=6, kind="c2r", dtype=dtype, device=device)

    def r2c(self, x):
        return self.forward.execute(x)

    def c2r(self, xh):
        return self.inverse.execute(xh)

    def describe(self) -> str:
        return f"r2c {self.forward.tree}\n      c2r {self.inverse.tree}"


class TorchFFT:
    """The same transforms on torch.fft (the baseline)."""

    name = "torch.fft"

    def __init__(self, n: int, device, dtype=torch.float32):
        self.n = n

    def r2c(self, x):
        return torch.fft.rfftn(x, dim=(-3, -2, -1))

    def c2r(self, xh):
        return torch.fft.irfftn(xh, s=(self.n,) * 3, dim=(-3, -2, -1))

    def describe(self) -> str:
        return "torch.fft.rfftn / irfftn"


class NumpyFFT:
    """numpy.fft in float64/complex128 on the host: the reference run's transforms."""

    name = "numpy.fft (float64)"

    def __init__(self, n: int, device, dtype=torch.float64):
        self.n = n

    def r2c(self, x):
        return torch.from_numpy(np.fft.rfftn(x.cpu().numpy().astype(np.float64), axes=(-3, -2, -1))).to(x.device)

    def c2r(self, xh):
        y = np.fft.irfftn(xh.cpu().numpy().astype(np.complex128), s=(self.n,) * 3, axes=(-3, -2, -1))
        return torch.from_numpy(y).to(xh.device)

    def describe(self) -> str:
        return "numpy.fft.rfftn / irfftn (complex128)"


# ------------------------------------------------------------------------------------- solver
class TaylorGreen:
    """The pseudo-spectral solver; ``fft`` supplies r2c/c2r, everything else is torch."""

    def __init__(self, fft, n: int, dt: float, dtype=torch.float32, device="cpu", nu: float = NU):
        self.fft, self.n, self.dt, self.nu, self.dtype, self.device = fft, n, dt, nu, dtype, device
        k = torch.fft.fftfreq(n, 1.0 / n, dtype=torch.float64)
        kz = torch.fft.rfftfreq(n, 1.0 / n, dtype=torch.float64)
        kx, ky, kz = k.view(n, 1, 1), k.view(1, n, 1), kz.view(1, 1, -1)
        k2 = kx**2 + ky**2 + kz**2
        # 2/3 rule: keep |k_i| < N/3 on every axis; a product of two kept modes reaches < 2N/3
        # and its alias (shifted by N) lands at > N/3, on a discarded mode
        keep = (kx.abs() < n / 3) & (ky.abs() < n / 3) & (kz.abs() < n / 3)
        # half-spectrum weights for sums over the full spectrum: kz = 0 (and Nyquist) once, others twice
        w = torch.full((1, 1, kz.shape[-1]), 2.0, dtype=torch.float64)
        w[..., 0] = 1.0
        if n % 2 == 0:
            w[..., -1] = 1.0
        self.w, self.k2 = w, k2  # the diagnostics' float64 weights, on the host
        rdt = dtype
        self.kx, self.ky, self.kz = (t.to(device=device, dtype=rdt) for t in (kx, ky, kz))
        self.k2r = k2.to(device=device, dtype=rdt)
        self.inv_k2 = torch.where(k2 > 0, 1.0 / k2.clamp(min=1), 0.0).to(device=device, dtype=rdt)
        self.keep = keep.to(device=device, dtype=rdt)
        # integrating factors in float64, cast once: exp(∓ν|k|²cΔt) at each stage time and the step
        f = lambda c: torch.exp(-nu * k2 * c * dt).to(device=device, dtype=rdt)
        self.decay = [f(c) for c in RK3_C]
        self.grow = [f(-c) for c in RK3_C]
        self.decay_step = f(1.0)
        self.norm = float(n) ** 6  # |û|² sums over the unnormalised r2c spectrum → grid averages

    # -- fields
    def initial(self):
        """û at t = 0: the sampled Taylor–Green field through the r2c plan, dealiased."""
        x = torch.arange(self.n, dtype=torch.float64) * (2 * math.pi / self.n)
        X, Y, Z = torch.meshgrid(x, x, x, indexing="ij")
        u = torch.stack([torch.sin(X) * torch.cos(Y) * torch.cos(Z),
                         -torch.cos(X) * torch.sin(Y) * torch.cos(Z),
                         torch.zeros_like(X)])
        return self.fft.r2c(u.to(device=self.device, dtype=self.dtype)) * self.keep

    def curl(self, uh):
        ux, uy, uz = uh
        i = 1j
        return torch.stack([i * (self.ky * uz - self.kz * uy),
                            i * (self.kz * ux - self.kx * uz),
                            i * (self.kx * uy - self.ky * ux)])

    def nonlinear(self, uh, with_fields: bool = False):
        """P[(u × ω)^] on kept modes; optionally also the grid fields (for the budget bound)."""
        fields = self.fft.c2r(torch.cat([uh, self.curl(uh)]))  # ONE c2r over six fields
        u, w = fields[:3], fields[3:]
        cross = torch.stack([u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]])
        fh = self.fft.r2c(cross) * self.keep  # ONE r2c over three components
        kdotf = (self.kx * fh[0] + self.ky * fh[1] + self.kz * fh[2]) * self.inv_k2
        nh = torch.stack([fh[0] - self.kx * kdotf, fh[1] - self.ky * kdotf, fh[2] - self.kz * kdotf])
        return (nh, u, w, cross) if with_fields else nh

    def step(self, uh, first_rhs=None):
        """One low-storage RK3 step with exact viscous decay; ``first_rhs``: N(ûₙ) if known."""
        v, q = uh, None
        for s in range(3):
            us = v if s == 0 else v * self.decay[s]
            nh = first_rhs if (s == 0 and first_rhs is not None) else self.nonlinear(us)
            f = nh if s == 0 else nh * self.grow[s]
            q = self.dt * f if s == 0 else RK3_A[s] * q + self.dt * f
            v = v + RK3_B[s] * q
        return v * self.decay_step

    # -- diagnostics: float64 sums on the host whatever the run's dtype and device (XLA and Neuron
    # devices have no float64, and torch-xla 2.9's abs() of a complex128 tensor returned complex)
    @staticmethod
    def _host(a):
        return a.detach().cpu().to(torch.complex128)

    def energy(self, uh) -> float:
        a = self._host(uh)
        return 0.5 * float((self.w * (a.real**2 + a.imag**2)).sum()) / self.norm

    def enstrophy(self, uh) -> float:
        a = self._host(uh)
        return 0.5 * float((self.w * self.k2 * (a.real**2 + a.imag**2)).sum()) / self.norm

    def transfer(self, uh, nh) -> float:
        """T = ⟨u · N(u)⟩, the energy the nonlinear term adds (zero in exact arithmetic)."""
        a, b = self._host(uh), self._host(nh)
        return float((self.w * (a.real * b.real + a.imag * b.imag)).sum()) / self.norm


def transfer_bound(u, w, cross, tol: float = FP32_TOL, u_round: float = U32) -> float:
    """Bound on |T| that the plans' rounding can cause, from their bar ``tol``.

    A plan meets ‖δy‖ ≤ tol·‖y‖ (relative L2 over its batch; RMS norms below). The c2r of the six
    fields gives ‖δu‖, ‖δω‖ ≤ tol·‖(u, ω)‖; the product u × ω then errs pointwise by at most
    |δu||ω| + |u||δω| plus two roundings of its terms; the r2c adds tol·‖u × ω‖. So
    ‖δF‖ ≤ tol·(‖(u, ω)‖·(max|u| + max|ω|) + ‖u × ω‖) + 2u·max|u|·‖ω‖, and by Cauchy–Schwarz
    |T| = |⟨u · δF⟩| ≤ ‖u‖·‖δF‖ (the projection and the mask cannot add to it: Pû = û).
    """
    # the norms only scale a bound: float32 reductions are accurate enough (relative ~1e-7)
    rms = lambda t: float(t.pow(2).sum(0).mean().sqrt())
    amax = lambda t: float(t.pow(2).sum(0).max().sqrt())
    uw = math.sqrt(rms(u) ** 2 + rms(w) ** 2)
    dF = tol * (uw * (amax(u) + amax(w)) + rms(cross)) + 2 * u_round * amax(u) * rms(w)
    return rms(u) * dF


def drift_bound(steps: int, tol: float = FP32_TOL) -> float:
    """Relative bound on how far a float32 run may drift from the float64 one after ``steps``.

    Growth factor, stated: each RK3 stage passes the state through one c2r and one r2c plan,
    each adding at most ``tol`` (relative), so a step injects ≤ 6·tol; injected errors add up
    (linear accumulation, the worst case for uncorrelated rounding) and are carried, not
    amplified, while the flow is laminar: the viscous factor only damps, and the advective
    growth of a perturbation is bounded by exp(t·max|∇u|) ≲ exp(t) for this flow before
    transition. Allow 6·tol per step, times the steps, times e^1 as margin for the advective
    growth over the checked window. Past transition (t ≳ 5 at Re = 1600) perturbations grow
    exponentially; the comparison window is chosen inside the laminar phase (``--compare-until``).
    """
    return 6.0 * tol * steps * math.e


# ------------------------------------------------------------------------------------- driver
def run(fft_cls, args, dtype, label, log=print, t_end=None):
    """Integrate to ``t_end`` (default args.t_end); return the solver, FFT, per-step history and
    the spectrum at args.compare_until (as complex128 on the host)."""
    fft = fft_cls(args.n, args.device, dtype)
    solver = TaylorGreen(fft, args.n, args.dt, dtype=dtype, device=args.device)
    uh = solver.initial()
    hist = {"t": [], "E": [], "eps": [], "T": [], "T_bound": [], "step_s": []}
    steps = round((args.t_end if t_end is None else t_end) / args.dt)
    snapshot = None
    for n in range(steps + 1):
        t = n * args.dt
        nh, u, w, cross = solver.nonlinear(uh, with_fields=True)
        E, Om = solver.energy(uh), solver.enstrophy(uh)
        T = solver.transfer(uh, nh)
        hist["t"].append(t), hist["E"].append(E), hist["eps"].append(2 * NU * Om)
        hist["T"].append(T), hist["T_bound"].append(transfer_bound(u, w, cross))
        if args.compare_until is not None and snapshot is None and t >= args.compare_until - 1e-9:
            snapshot = (n, solver._host(uh))
        if log and (n % args.print_every == 0 or n == steps):
            log(f"  {label:>8s} step {n:4d}  t={t:6.3f}  E={E:.6f}  eps=2nu*Omega={2 * NU * Om:.6e}  "
                f"|T|/eps={abs(T) / (2 * NU * Om):.1e}")
        if n == steps:
            break
        t0 = time.perf_counter()
        uh = solver.step(uh, first_rhs=nh)
        sync(args.device)
        hist["step_s"].append(time.perf_counter() - t0)
    if snapshot is None:
        snapshot = (steps, solver._host(uh))
    return solver, fft, hist, snapshot


def time_steps(fft_cls, args, steps: int) -> float:
    """Median seconds per RK3 step (warm: plans built and one step run first)."""
    fft = fft_cls(args.n, args.device, torch.float32)
    solver = TaylorGreen(fft, args.n, args.dt, dtype=torch.float32, device=args.device)
    uh = solver.step(solver.initial())
    sync(args.device)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        uh = solver.step(uh)
        sync(args.device)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def plot(path, hist32, hist64, args, overlays=()):
    """ε(t) of this run (float32 and float64), −dE/dt, the 512³ peak, and ``overlays``: other
    runs' ``--json`` files (e.g. a 64³ run) drawn as extra curves."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  plot skipped: matplotlib is not installed (pip install 'trnplan[plot]')")
        return None
    t = np.array(hist32["t"])
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    ax.plot(t, hist32["eps"], lw=2, label=f"2νΩ, trnplan float32, {args.n}³")
    ax.plot(hist64["t"], hist64["eps"], "k--", lw=1, label=f"2νΩ, numpy.fft float64, {args.n}³ (t ≤ {args.compare_until:g})")
    dEdt = -np.diff(hist32["E"]) / args.dt
    ax.plot(0.5 * (t[1:] + t[:-1]), dEdt, ":", lw=1.5, label="−dE/dt (finite difference), float32")
    for f in overlays:
        o = json.loads(pathlib.Path(f).read_text())
        ax.plot(o["history"]["t"], o["history"]["eps"], lw=1.5,
                label=f"2νΩ, trnplan float32, {o['n']}³ (Δt = {o['dt']:g}, from {pathlib.Path(f).name})")
    ax.plot(*REFERENCE_PEAK, "r*", ms=12, label="512³ DNS peak ≈ 0.0128 at t ≈ 9 (Brachet 1983; van Rees 2011)")
    ax.set_xlabel("t")
    ax.set_ylabel("dissipation rate ε")
    ax.set_title(f"Taylor–Green vortex, Re = 1600, {args.n}³, Δt = {args.dt:g}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    print(f"  wrote {path}")
    return str(path)


def rel(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=32, help="grid points per axis (default 32)")
    ap.add_argument("--dt", type=float, default=None,
                    help="time step (default 2/N: advective CFL max|u|·Δt/Δx ≈ 0.32 at |u| ≤ 1; RK3 is stable to "
                         "|λ|Δt ≤ √3 and |λ| ≤ Σ|u_i||k_i| ≲ √3·N/3 here, so |λ|Δt ≲ 1.2)")
    ap.add_argument("--t-end", type=float, default=10.0, help="final time (default 10: past the dissipation peak)")
    ap.add_argument("--compare-until", type=float, default=4.0,
                    help="compare float32 with float64 up to this time, inside the laminar phase (default 4)")
    ap.add_argument("--small", action="store_true", help="tiny run for tests: N=16, t_end=1")
    ap.add_argument("--device", default="cpu", help="torch device for the trnplan and torch.fft runs (default cpu)")
    ap.add_argument("--print-every", type=int, default=1, help="print every k-th step (default 1)")
    ap.add_argument("--timing-steps", type=int, default=5, help="steps timed per FFT back end (default 5; 0: skip)")
    ap.add_argument("--out", default="examples/out/taylor_green.png", help="PNG path for the dissipation plot")
    ap.add_argument("--json", default=None, help="also write the checks and timings here")
    ap.add_argument("--overlay", action="append", default=[],
                    help="another run's --json file whose dissipation curve is added to the plot (repeatable)")
    args = ap.parse_args(argv)
    args.device = use_device(args.device)
    if args.small:
        args.n, args.t_end, args.compare_until = 16, 1.0, 1.0
    if args.dt is None:
        args.dt = 2.0 / args.n
    args.compare_until = min(args.compare_until, args.t_end)
    torch.manual_seed(0)

    print(f"Taylor–Green vortex, Re = 1600, {args.n}³, dt = {args.dt:g}, t_end = {args.t_end:g}, device {args.device}")
    _, fft, h32, (n32, snap32) = run(TrnplanFFT, args, torch.float32, "float32")
    print(f"  plans: {fft.describe()}")
    # the float64 reference runs through the comparison window only (it is the slower run)
    _, _, h64, (_, snap64) = run(NumpyFFT, argparse.Namespace(**{**vars(args), "device": "cpu"}),
                                  torch.float64, "float64", log=None, t_end=args.compare_until)
    checks = []

    def check(name, value, bar, why):
        ok = bool(value <= bar)
        checks.append({"name": name, "value": value, "bar": bar, "ok": ok, "why": why})
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}: {value:.3e} <= {bar:.3e}  ({why})")

    # 1. t = 0 invariants. E and Ω are quadratic in û, so a relative error δ in û (≤ the r2c bar
    # plus the float32 rounding of the sampled field) moves them by ≤ 2δ + δ²
    bar0 = 2 * (FP32_TOL + U32) + (FP32_TOL + U32) ** 2
    print("checks:")
    check("E(0) vs 1/8, relative", abs(h32["E"][0] - E0) / E0, bar0, "2·(r2c bar + u32): E is quadratic in û")
    check("Omega(0) vs 3/8, relative", abs(h32["eps"][0] / (2 * NU) - OMEGA0) / OMEGA0, bar0,
          "2·(r2c bar + u32): Ω is quadratic in û")
    # 2. budget each step
    ratios = [abs(T) / b for T, b in zip(h32["T"], h32["T_bound"])]
    worst = int(np.argmax(ratios))
    check("energy budget |dE/dt + 2nu*Omega| / bound, worst step", ratios[worst], 1.0,
          f"transfer T={h32['T'][worst]:.2e} at t={h32['t'][worst]:.2f} vs the plans' rounding bound "
          f"{h32['T_bound'][worst]:.2e}; 2νΩ there {h32['eps'][worst]:.2e}")
    rel_budget = max(abs(T) / e for T, e in zip(h32["T"], h32["eps"]))
    print(f"  info: worst |T| / 2νΩ over all {len(h32['T'])} steps: {rel_budget:.2e}")
    # discrete-time budget (O(dt²) quadrature + O(dt³) RK3 error: reported only)
    E, eps = np.array(h32["E"]), np.array(h32["eps"])
    disc = np.abs(-(E[1:] - E[:-1]) / args.dt - 0.5 * (eps[1:] + eps[:-1])) / (0.5 * (eps[1:] + eps[:-1]))
    print(f"  info: -ΔE/Δt vs trapezoid mean of 2νΩ, worst relative difference {disc.max():.2e} (O(Δt²), not checked)")
    # 3. float32 vs float64, over the laminar window [0, compare_until]
    m = n32 + 1
    bar3 = drift_bound(n32)
    check(f"E(t) float32 vs float64, t <= {args.compare_until:g}, relative L2", rel(h32["E"][:m], h64["E"][:m]), bar3,
          f"6·tol per step × {n32} steps × e (drift_bound)")
    check(f"eps(t) float32 vs float64, t <= {args.compare_until:g}, relative L2", rel(h32["eps"][:m], h64["eps"][:m]),
          bar3, "same growth factor")
    field = float((snap32 - snap64).abs().pow(2).sum().sqrt() / snap64.abs().pow(2).sum().sqrt())
    check(f"velocity spectrum at t={n32 * args.dt:g} float32 vs float64, relative L2", field, bar3, "same growth factor")
    ipk = int(np.argmax(h32["eps"]))
    print(f"  dissipation peak at {args.n}³: eps = {h32['eps'][ipk]:.5f} at t = {h32['t'][ipk]:.2f} "
          f"(512³ DNS: ≈ {REFERENCE_PEAK[1]} at t ≈ {REFERENCE_PEAK[0]:g})")

    timing = {}
    if args.timing_steps:
        for cls in (TrnplanFFT, TorchFFT):
            timing[cls.name] = time_steps(cls, args, args.timing_steps)
        print(f"  time per RK3 step ({args.timing_steps} steps, median, this machine as loaded now): "
              + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in timing.items()))
    png = plot(args.out, h32, h64, args, args.overlay)
    result = {"example": "taylor_green", "n": args.n, "dt": args.dt, "t_end": args.t_end, "device": str(args.device),
              "checks": checks, "E0": h32["E"][0], "Omega0": h32["eps"][0] / (2 * NU),
              "peak_eps": h32["eps"][ipk], "peak_t": h32["t"][ipk], "timing_s_per_step": timing, "png": png,
              "history": {"t": h32["t"], "E": h32["E"], "eps": h32["eps"], "T": h32["T"], "T_bound": h32["T_bound"],
                          "E64": h64["E"], "eps64": h64["eps"]}}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1))
    failed = [c["name"] for c in checks if not c["ok"]]
    print("all checks passed" if not failed else f"FAILED: {failed}")
    result["ok"] = not failed
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
