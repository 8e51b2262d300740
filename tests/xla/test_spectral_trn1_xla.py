"""Issue 30's spectral plans on ``xla`` as a trn1/inf2 sees it (the ``trn1`` fixture: a fake torch-neuronx
2.9 distribution, XLA:CPU underneath), with every graph a test compiled audited against neuronx-cc's
documented limits (no c64/c128/f64/s64, only listed HLO ops) by the fixture — the filter spectrum's
graph, the plans' own graphs, each call's graph and the gradient's, not only a plan's module.

* ``plan_conv`` with ``method="library"``, ``"gemm"`` and ``"direct"``: lazy XLA (torch-neuronx 2.9 has no
  torch.compile; no openxla graph is made), one graph per call (a repeated call compiles nothing and
  replays one) and per training step (forward, backward, sync), nothing on the host, within the convolution's own bound of the float64 convolution
  on the CPU, and a gradient within two convolutions' bound; a complex bank is refused.
* truncated r2c/c2r (``method=gemm`` and the cut ``method=full``) and DCT/DST (``method=gemm`` and
  ``fft``) through ``execute_split``: one graph per call, the fp32 bar.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft
import torch
import torch_xla
from support import rel_l2

import trnplan
from trnplan.conv import plan_conv
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.core.errors import ComplexOnDevice
from trnplan.tools import xla_audit

pytestmark = pytest.mark.xla
DEV = torch_xla.device()


def _new_fallback(before):
    return sorted(op for op, n in xla_audit._fallback_counts().items() if n > before.get(op, 0))


@pytest.mark.parametrize("method,mode,length,kernel", [("library", "causal", 128, 40), ("library", "linear", 80, 24),
                                                       ("gemm", "circular", 96, 17), ("gemm", "causal", 128, 40),
                                                       ("direct", "linear", 80, 24), ("direct", "causal", 128, 40)])
def test_conv_routes_on_trn1_are_one_lazy_graph_per_call(trn1, method, mode, length, kernel):
    g = np.random.default_rng(0)
    h, x = g.standard_normal((3, kernel)), g.standard_normal((2, 3, length))
    ref = plan_conv(torch.from_numpy(h), length, mode)  # float64 on the CPU
    conv = plan_conv(torch.from_numpy(h).float().to(DEV), length, mode, method=method)
    assert conv.method == method and conv.graph_mode == "lazy" and conv.split
    assert "runs:    every call one graph on xla:0 by lazy XLA, cut at syncs" in conv.explain()
    xd = torch.from_numpy(x).float().to(DEV)
    torch_xla.sync()
    before = xla_audit._fallback_counts()
    for i in range(2):
        with xla_audit.CompileCounter() as count:
            y = conv(xd)
            got = y.cpu()
        if i:  # the first call also compiles the call's graph (and the library route its plans' graphs)
            assert (count.dynamo, count.uncached, count.cached) == (0, 0, 1), vars(count)
        assert rel_l2(got, ref(torch.from_numpy(x)).numpy()) <= conv.bound
    for i in range(2):  # a training step (forward, backward, the user's sync): one lazy graph, replayed after
        xg = xd.detach().requires_grad_(True)
        with xla_audit.CompileCounter() as count:
            conv(xg).square().sum().backward()
        assert (count.dynamo, count.uncached, count.cached) == (0, 1 - i, i), vars(count)
    xr = torch.from_numpy(x).requires_grad_(True)
    ref(xr).square().sum().backward()
    # sum(y²)'s gradient is the adjoint convolution of 2y: two convolutions in a row, each within the bound
    assert rel_l2(xg.grad.cpu(), xr.grad.numpy()) <= 2 * conv.bound
    assert _new_fallback(before) == []


def test_complex_conv_on_trn1_is_refused(trn1):
    with pytest.raises(ComplexOnDevice, match="holds no complex data.*plan_conv\\(h.real\\)"):
        plan_conv(torch.randn(3, 8, dtype=torch.complex64).to(DEV), 64, "causal")
    conv = plan_conv(torch.randn(3, 8).to(DEV), 64, "causal")
    with pytest.raises(ComplexOnDevice, match="takes real float32 signals"):
        conv(torch.randn(2, 3, 64, dtype=torch.complex64).to(DEV))


def _once(plan, inputs):
    """execute_split twice: the second call's compile counts, and the host result."""
    for _ in range(2):
        with xla_audit.CompileCounter() as count:
            y = plan.execute_split(inputs)
            ys = tuple(t.cpu().double().numpy() for t in (y if isinstance(y, tuple) else (y,)))
    return (ys[0] if len(ys) == 1 else ys[0] + 1j * ys[1]), count


@pytest.mark.parametrize("method", ["gemm", "full"])
def test_truncated_plans_on_trn1(trn1, method):
    shape, modes = (16, 12), (3, 4)
    rows = [np.r_[0:m, n - m:n] for m, n in zip(modes[:-1], shape[:-1])]
    index = (Ellipsis, *np.ix_(*rows, np.arange(modes[-1])))
    x = np.random.default_rng(1).standard_normal((4, *shape))
    ref = np.fft.rfftn(x, axes=(1, 2))[index]
    strategy = f"(truncated method={method})"
    fwd = trnplan.plan_many(shape, 4, kind="r2c", modes=modes, strategy=strategy, device="xla", cache=None)
    inv = trnplan.plan_many(shape, 4, kind="c2r", modes=modes, strategy=strategy, device="xla", cache=None)
    before = xla_audit._fallback_counts()
    got, count = _once(fwd, torch.from_numpy(x).float().to(DEV))
    assert rel_l2(got, ref) <= DEFAULT_TOL["fp32"] and (count.uncached, count.cached) == (0, 1), vars(count)
    full = np.zeros((4, 16, 7), complex)
    full[index] = ref
    back, count = _once(inv, tuple(torch.from_numpy(p).float().to(DEV) for p in (ref.real, ref.imag)))
    assert rel_l2(back, np.fft.irfftn(full, s=shape, axes=(1, 2))) <= DEFAULT_TOL["fp32"]
    assert (count.uncached, count.cached) == (0, 1) and _new_fallback(before) == []
    # the gradient through the adjoint plan, against torch.fft's autograd (rfftn then the cut) in float64
    w = np.random.default_rng(7).standard_normal((2, *ref.shape))
    xg = torch.from_numpy(x).float().to(DEV).requires_grad_(True)
    yr, yi = fwd.execute_split(xg)
    (yr * torch.from_numpy(w[0]).float().to(DEV) + yi * torch.from_numpy(w[1]).float().to(DEV)).sum().backward()
    t = torch.from_numpy(x).requires_grad_(True)
    y = torch.fft.rfftn(t, dim=(1, 2))[index]
    (y.real * torch.from_numpy(w[0]) + y.imag * torch.from_numpy(w[1])).sum().backward()
    assert rel_l2(xg.grad.cpu().double().numpy(), t.grad.numpy()) <= DEFAULT_TOL["fp32"]


@pytest.mark.parametrize("kind,method", [("dct2", "gemm"), ("dst1", "fft"), ("dct4", "fft"), ("dst3", "gemm")])
def test_r2r_plans_on_trn1(trn1, kind, method):
    n = 48
    x = np.random.default_rng(2).standard_normal((4, n))
    plan = trnplan.plan_many(n, 4, kind=kind, norm="ortho", strategy=f"(r2r method={method})", device="xla",
                             cache=None)
    before = xla_audit._fallback_counts()
    got, count = _once(plan, torch.from_numpy(x).float().to(DEV))
    with scipy.fft.set_backend("scipy", only=True):
        ref = getattr(scipy.fft, kind[:3])(x, type=int(kind[3]), norm="ortho")
    assert rel_l2(got, ref) <= DEFAULT_TOL["fp32"], plan.tree
    assert (count.uncached, count.cached) == (0, 1) and _new_fallback(before) == []
    xg = torch.from_numpy(x).float().to(DEV).requires_grad_(True)
    w = np.random.default_rng(3).standard_normal((4, n))
    (plan.execute_split(xg) * torch.from_numpy(w).float().to(DEV)).sum().backward()
    with scipy.fft.set_backend("scipy", only=True):  # orthonormal: the adjoint is the inverse
        want = getattr(scipy.fft, "i" + kind[:3])(w, type=int(kind[3]), norm="ortho")
    assert rel_l2(xg.grad.cpu().double().numpy(), want) <= DEFAULT_TOL["fp32"]


def test_an_ordinary_plan_on_trn1_is_one_graph_per_call(trn1):
    """The lazy runner's outputs leave without their views' bases: before, a base kept alive ran the
    whole plan again as a second graph at the user's next sync (two graphs per call, measured)."""
    plan = trnplan.plan_many(64, 4, device="xla", cache=None)
    x = np.random.default_rng(4).standard_normal((4, 64)) + 1j * np.random.default_rng(5).standard_normal((4, 64))
    got, count = _once(plan, tuple(torch.from_numpy(p).float().to(DEV) for p in (x.real, x.imag)))
    assert rel_l2(got, np.fft.fft(x)) <= DEFAULT_TOL["fp32"]
    assert (count.uncached, count.cached) == (0, 1), vars(count)


def test_spectral_conv_layer_on_trn1_needs_split_weights(trn1):
    """trnplan.nn.SpectralConv: complex weights on a trn1's xla are refused at the call, naming the split
    weights; with dtype=torch.float32 the layer's output and weights' gradient match the complex layer in
    float64 on the CPU (two fp32 plans and the mixing in a row), every graph audited by the fixture."""
    import trnplan.nn

    torch.manual_seed(0)
    x = torch.randn(2, 3, 16, 12)
    with pytest.raises(ComplexOnDevice, match=r"SpectralConv\(\.\.\., dtype=torch\.float32\)"):
        trnplan.nn.SpectralConv(3, 2, (4, 5)).to(DEV)(x.to(DEV))
    layer = trnplan.nn.SpectralConv(3, 2, (4, 5), dtype=torch.float32)
    ref = trnplan.nn.SpectralConv(3, 2, (4, 5), backend="torch", dtype=torch.complex128)
    ref.weight = torch.nn.Parameter(torch.view_as_complex(layer.weight.detach().double().clone()))
    want = ref(x.double())
    want.square().sum().backward()
    layer = layer.to(DEV)
    before = xla_audit._fallback_counts()
    got = layer(x.to(DEV))
    got.square().sum().backward()
    assert rel_l2(got.detach().cpu(), want.detach().numpy()) <= 2 * DEFAULT_TOL["fp32"]
    grad = torch.view_as_complex(layer.weight.grad.cpu().double().contiguous())
    assert rel_l2(grad, ref.weight.grad.numpy()) <= 4 * DEFAULT_TOL["fp32"]
    assert _new_fallback(before) == []


def test_conv_on_trn1_compiles_one_graph_per_batch_bucket(trn1):
    """Batches 1..8 of one convolution on a trn1: at most one XLA compile per batch bucket (the pad
    and the crop on the host), each result within the convolution's bound."""
    from trnplan.backends.accel import bucket_batch

    g = np.random.default_rng(6)
    h = g.standard_normal((3, 40))
    conv = plan_conv(torch.from_numpy(h).float().to(DEV), 128, "causal", method="direct")
    ref = plan_conv(torch.from_numpy(h), 128, "causal")
    with xla_audit.CompileCounter() as count:
        for b in range(1, 9):
            x = g.standard_normal((b, 3, 128))
            got = conv(torch.from_numpy(x).float().to(DEV)).cpu()
            assert rel_l2(got, ref(torch.from_numpy(x)).numpy()) <= conv.bound
    buckets = {bucket_batch(b) for b in range(1, 9)}
    assert count.uncached <= len(buckets) and count.dynamo == 0, (vars(count), sorted(buckets))
