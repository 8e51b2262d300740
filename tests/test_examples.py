"""The examples under examples/, each run at a small size: the numbers they report are checked
here against their references (analytic values and float64 numpy.fft runs) with trnplan's own
fp32 bar, not only their exit status."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from support import rel_l2

from trnplan.core.accuracy import DEFAULT_TOL, UNIT_ROUNDOFF  # the engine's bars

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOL, U32 = DEFAULT_TOL["fp32"], UNIT_ROUNDOFF["fp32"]


def load(name):
    """Import examples/<name>.py as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def has_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def by_name(result, prefix):
    found = [c for c in result["checks"] if c["name"].startswith(prefix)]
    assert len(found) == 1, f"expected one check starting {prefix!r}, got {[c['name'] for c in result['checks']]}"
    return found[0]


def assert_png(result, path):
    if has_matplotlib():
        assert result["png"] == str(path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert result["png"] is None and not path.exists()


def test_taylor_green_small(tmp_path):
    tg = load("taylor_green")
    png = tmp_path / "tg.png"
    r = tg.main(["--small", "--print-every", "100", "--timing-steps", "1", "--out", str(png)])
    assert r["ok"] and all(c["ok"] for c in r["checks"])
    # t = 0 invariants against their analytic values: E and Ω are quadratic in û, whose r2c
    # error is within the plan's bar plus the float32 rounding of the sampled field
    bar0 = 2 * (TOL + U32) + (TOL + U32) ** 2
    assert abs(r["E0"] - 1 / 8) <= bar0 * (1 / 8)
    assert abs(r["Omega0"] - 3 / 8) <= bar0 * (3 / 8)
    h = r["history"]
    # the budget every step: the nonlinear term's energy transfer within the plans' rounding bound
    assert len(h["T"]) == round(1.0 / r["dt"]) + 1
    assert all(abs(t) <= b for t, b in zip(h["T"], h["T_bound"]))
    # and the bound is tight enough to mean something: far below the dissipation it is compared with
    assert max(b / e for b, e in zip(h["T_bound"], h["eps"])) < 0.01
    # float32 trnplan vs float64 numpy.fft, the same scheme, within the stated growth factor
    steps = len(h["E64"]) - 1
    bar = tg.drift_bound(steps, TOL)
    for key, ref in (("E", "E64"), ("eps", "eps64")):
        a, b = np.array(h[key][: steps + 1]), np.array(h[ref])
        assert rel_l2(a, b) <= bar
    assert by_name(r, "velocity spectrum")["value"] <= bar
    # energy decays and dissipation rises over t ∈ [0, 1] at Re = 1600 (vortex stretching)
    assert h["E"][-1] < h["E"][0] and h["eps"][-1] > h["eps"][0]
    assert set(r["timing_s_per_step"]) == {"trnplan", "torch.fft"}
    assert_png(r, png)


def test_taylor_green_budget_bound_catches_a_non_conservative_term():
    """The budget check can fail: a nonlinear term with a spurious energy source breaks it."""
    import torch

    tg = load("taylor_green")
    fft = tg.NumpyFFT(16, "cpu")
    solver = tg.TaylorGreen(fft, 16, 0.1, dtype=torch.float64)
    uh = solver.initial()
    nh, u, w, cross = solver.nonlinear(uh, with_fields=True)
    bound = tg.transfer_bound(u, w, cross)
    assert abs(solver.transfer(uh, nh)) <= bound
    # a forcing of 1e-3·û (energy injection 2e-3·E): what a sign or projection bug looks like
    assert abs(solver.transfer(uh, nh + 1e-3 * uh)) > bound


def test_spectrogram_small(tmp_path):
    sp = load("spectrogram")
    png = tmp_path / "spec.png"
    r = sp.main(["--small", "--out", str(png)])
    assert r["ok"] and all(c["ok"] for c in r["checks"])
    stft, rt, pipe = (by_name(r, p) for p in ("STFT", "round trip", "masked pipeline"))
    assert stft["value"] <= TOL + 2 * U32 == stft["bar"]
    # a periodic Hann window at hop n_fft/4: the overlap-added squared window is constant (1.5),
    # so the round trip's bar is the sum of the two plans' bars and the inverse's few roundings
    assert rt["value"] <= rt["bar"] <= (TOL + 2 * U32 + TOL + (2 + 4) * U32) * (1 + 1e-9)
    assert pipe["value"] <= pipe["bar"]
    assert r["snr_gain_db"] > 0
    assert set(r["timing_s"]) == {"trnplan", "torch.stft"}
    assert_png(r, png)


def test_spectrogram_runs_without_matplotlib(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    sp = load("spectrogram")
    png = tmp_path / "spec.png"
    r = sp.main(["--small", "--repeats", "0", "--out", str(png)])
    assert r["ok"] and r["png"] is None and not png.exists()
    assert "plot skipped: matplotlib is not installed" in capsys.readouterr().out


def test_spectrogram_command_line(tmp_path):
    """`python examples/spectrogram.py` as a user runs it: exit 0 and the checks it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRNPLAN_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.run([sys.executable, "examples/spectrogram.py", "--small", "--repeats", "0", "--out",
                        str(tmp_path / "s.png")], check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("[PASS]") == 4 and "[FAIL]" not in p.stdout and "all checks passed" in p.stdout


def _check_fno(r, png):
    assert r["ok"] and all(c["ok"] for c in r["checks"])
    for dims in ("1", "2"):
        layer = by_name(r, f"{dims}-D spectral conv")
        assert layer["value"] <= layer["bar"]
        # the bar is the plans' bar scaled by a conditioning factor, not a free constant
        assert TOL < layer["bar"] < 100 * TOL
        run = r["runs"][dims]
        assert run["trnplan"]["test"] < run["identity"]
        losses = run["trnplan"]["losses"]
        assert np.mean(losses[-5:]) < np.mean(losses[:5])  # the training loss went down
    assert_png(r, png)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_fno_spectral_conv_layer(dims):
    """The FNO's spectral convolution (trnplan.nn.SpectralConv: truncated plans) vs the same layer
    in float64 numpy.fft."""
    import torch

    fno = load("fno")
    torch.manual_seed(0)
    n, width, modes = {1: (64, 16, 8), 2: (16, 8, 4), 3: (12, 4, 3)}[dims]
    layer = fno.SpectralConv(width, width, modes, dims=dims)
    x = torch.randn(4, width, *([n] * dims))
    with torch.no_grad():
        y = layer(x)
    ref, xh, yh, mats = fno.layer_reference(layer, x)
    bar, kappa = fno.layer_bound(xh, yh, mats, width, TOL, U32)
    assert 1 <= kappa < 100 and bar == TOL + kappa * (TOL + np.sqrt(2 * width) * U32)
    assert rel_l2(y, ref) <= bar
    # gradients flow through the plans (the adjoint transform) to the complex weights
    layer(x).square().sum().backward()
    grads = [p.grad for p in layer.parameters()]
    assert all(g is not None and torch.isfinite(torch.view_as_real(g)).all() and g.abs().sum() > 0 for g in grads)


@pytest.mark.slow
def test_fno_small_eager(tmp_path):
    """Training, eager (~20 s of CPU here)."""
    fno = load("fno")
    png = tmp_path / "fno.png"
    _check_fno(fno.main(["--small", "--no-compile", "--baseline-steps", "0", "--out", str(png)]), png)


@pytest.mark.slow
def test_fno_small_compiled(tmp_path):
    """The same with the models under torch.compile(fullgraph=True) (two compiles: ~30 s here),
    and the torch.fft baseline on the same seed and batch. Only the baseline's first loss is held
    (below), so it runs one step, not fno's 50; and no eager steps after training (they only time
    the model for fno's table): together ~1/4 of this test's time on the loaded 2-core machine."""
    fno = load("fno")
    png = tmp_path / "fno.png"
    r = fno.main(["--small", "--baseline-steps", "1", "--eager-steps", "0", "--out", str(png)])
    _check_fno(r, png)
    assert r["compiled"]
    for dims in ("1", "2"):
        a, b = r["runs"][dims]["trnplan"]["losses"], r["runs"][dims]["torch.fft"]["losses"]
        # the same model in float32 on two FFT libraries: the first loss is the same function of the
        # same weights and batch, so it agrees to the plans' bar (relative, a few ulps of slack for the
        # loss's own reductions); later steps drift apart by rounding, so only the first is held
        assert abs(a[0] - b[0]) <= 10 * TOL * abs(b[0])
