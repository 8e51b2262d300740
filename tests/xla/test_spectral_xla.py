"""DCT/DST and truncated (FNO) plans made for ``device="xla"`` (torch-xla on XLA:CPU): GEMM or DFT trees.

Each plan is the accelerator profile's own pick (or a forced method), run on the ``xla`` device and
checked against scipy.fft in float64 with the fp32 bar (``DEFAULT_TOL``, imported); nothing runs on
the host (``executed_fallback_ops``); its HLO passes trnplan's audit (no c64/c128/f64, the ops its
lowerings are known to produce); one graph per plan: a second call compiles nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft
import torch
import torch_xla
from support import rel_l2

import trnplan
import trnplan.nn
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.tools import xla_audit

pytestmark = pytest.mark.xla
DEV = torch_xla.device()
BATCH = 4

# (shape, kind, inverse, norm, strategy or None for the profile's pick)
CASES = [
    (64, "dct2", False, "backward", None),
    (1024, "dct2", False, "ortho", None),
    (512, "dst4", True, "forward", "(r2r method=fft)"),
    (257, "dct1", True, "ortho", None),
    (100, "dst1", False, "backward", "(r2r method=fft)"),
    (1000, "dct3", False, "backward", "(r2r method=fft)"),
    ((16, 32), "dst2", False, "ortho", None),
]


def _id(c):
    return f"{c[1]}-{'inv' if c[2] else 'fwd'}-{c[0]}-{c[3]}-{c[4] or 'picked'}"


@pytest.mark.parametrize("case", CASES, ids=map(_id, CASES))
def test_r2r_plan_on_xla(case):
    shape, kind, inverse, norm, strategy = case
    shape_t = shape if isinstance(shape, tuple) else (shape,)
    plan = trnplan.plan_many(shape, BATCH, kind=kind, inverse=inverse, norm=norm, strategy=strategy,
                             device="xla", cache=None)
    assert not {"native", "scipy", "pyfftw", "mkl-fft"} & {n.solver for _, n in plan.tree.walk()}
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((BATCH, *shape_t))).float()
    name = ("i" if inverse else "") + kind[:3] + "n"
    with scipy.fft.set_backend("scipy", only=True):
        ref = getattr(scipy.fft, name)(x.double().numpy(), type=int(kind[3]), norm=norm,
                                       axes=tuple(range(1, len(shape_t) + 1)))
    xd = x.to(DEV)
    torch_xla.sync()
    before = xla_audit._fallback_counts()
    y = plan.execute(xd)
    assert y.device == xd.device and y.dtype == torch.float32
    err = rel_l2(y, ref)
    fallback = sorted(op for op, n in xla_audit._fallback_counts().items() if n > before.get(op, 0))
    assert err <= DEFAULT_TOL["fp32"], f"{plan.tree}: rel L2 {err:.3g} over the fp32 bar"
    assert err <= plan.tree.error, f"{plan.tree}: rel L2 {err:.3g} over its prediction {plan.tree.error:.3g}"
    assert fallback == [], f"{plan.tree}: ran on the host: {fallback}"
    report = xla_audit.audit_plan(plan)
    assert report.ok, str(report)
    assert set(report.hlo_ops) <= xla_audit.PLAN_HLO_OPS, set(report.hlo_ops) - xla_audit.PLAN_HLO_OPS
    with xla_audit.CompileCounter() as again:
        y = plan.execute(xd).cpu()
    assert (again.dynamo, again.uncached) == (0, 0)
    print(f"XLA-LANE r2r {plan.tree} err={err:.3g} hlo={','.join(sorted(report.hlo_ops))}")


def test_dct_gradient_on_xla_matches_the_adjoint():
    """trnplan.fft.dct's backward on the xla device (the partner type's plan with weights)."""
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((BATCH, 48))).float()
    g = torch.from_numpy(np.random.default_rng(2).standard_normal((BATCH, 48))).float()
    xd = x.to(DEV).requires_grad_()
    y = trnplan.fft.dct(xd, type=2, norm="ortho")
    (y * g.to(DEV)).sum().backward()
    ref = scipy.fft.idct(g.double().numpy(), type=2, norm="ortho")  # orthonormal: the adjoint is the inverse
    got = xd.grad.cpu().double().numpy()
    assert rel_l2(got, ref) <= DEFAULT_TOL["fp32"]


@pytest.mark.parametrize("shape,modes,strategy", [((64, 48), (8, 6), None), ((256,), (16,), None),
                                                  ((16, 12, 10), (3, 4, 2), "(truncated method=full)")])
def test_truncated_plans_on_xla(shape, modes, strategy):
    """Truncated r2c and c2r plans made for xla: real-typed graphs, no host fallback, the fp32 bar."""
    axes = tuple(range(1, len(shape) + 1))
    x = np.random.default_rng(3).standard_normal((BATCH, *shape))
    rows = [np.r_[0:m, n - m:n] for m, n in zip(modes[:-1], shape[:-1])]
    index = (Ellipsis, *np.ix_(*rows, np.arange(modes[-1])))
    ref = np.fft.rfftn(x, axes=axes)[index]
    fwd = trnplan.plan_many(shape, BATCH, kind="r2c", modes=modes, strategy=strategy, device="xla", cache=None)
    inv = trnplan.plan_many(shape, BATCH, kind="c2r", modes=modes, strategy=strategy, device="xla", cache=None)
    xd = torch.from_numpy(x).float().to(DEV)
    torch_xla.sync()
    before = xla_audit._fallback_counts()
    got = fwd.execute(xd)
    back = inv.execute(got)
    fallback = sorted(op for op, n in xla_audit._fallback_counts().items() if n > before.get(op, 0))
    err = rel_l2(got, ref)
    full = np.zeros((BATCH, *shape[:-1], shape[-1] // 2 + 1), complex)
    full[index] = ref
    zref = np.fft.irfftn(full, s=shape, axes=axes)
    err2 = float(np.linalg.norm(back.cpu().double().numpy() - zref) / np.linalg.norm(zref))
    assert err <= DEFAULT_TOL["fp32"] and err <= fwd.tree.error, (fwd.tree, err)
    assert err2 <= 2 * DEFAULT_TOL["fp32"], (inv.tree, err2)  # two fp32 plans in a row
    assert fallback == [], fallback
    for plan in (fwd, inv):
        report = xla_audit.audit_plan(plan)
        assert report.ok, str(report)
        assert set(report.hlo_ops) <= xla_audit.PLAN_HLO_OPS, set(report.hlo_ops) - xla_audit.PLAN_HLO_OPS
    print(f"XLA-LANE truncated {fwd.tree} err={err:.3g}; {inv.tree} err={err2:.3g}")


def test_spectral_conv_trains_on_xla():
    """trnplan.nn.SpectralConv on xla: forward and backward match the torch.fft layer on the CPU."""
    torch.manual_seed(0)
    layer = trnplan.nn.SpectralConv(4, 4, (6, 5))
    ref_layer = trnplan.nn.SpectralConv(4, 4, (6, 5), backend="torch")
    ref_layer.weight = torch.nn.Parameter(layer.weight.detach().clone())
    x = torch.randn(2, 4, 24, 20)
    y_ref = ref_layer(x)
    y_ref.square().sum().backward()
    layer = layer.to(DEV)
    y = layer(x.to(DEV))
    y.square().sum().backward()
    err = rel_l2(y, y_ref)
    gerr = rel_l2(layer.weight.grad, ref_layer.weight.grad)
    assert err <= 2 * DEFAULT_TOL["fp32"] and gerr <= 4 * DEFAULT_TOL["fp32"], (err, gerr)


def test_long_convolution_on_xla():
    """trnplan.conv on xla: the planned transforms and the product stay on the device (no host
    fallback); the result and the signal's gradient match the float64 convolution on the CPU."""
    from trnplan.conv import plan_conv

    h = torch.randn(4, 64)
    x = torch.randn(2, 4, 256)
    xr = x.double().requires_grad_()
    ref = plan_conv(h.double(), 256, "causal")(xr)
    ref.square().sum().backward()
    conv = plan_conv(h.to(DEV), 256, "causal")
    xd = x.to(DEV).requires_grad_()
    torch_xla.sync()
    before = xla_audit._fallback_counts()
    y = conv(xd)
    y.square().sum().backward()
    fallback = sorted(op for op, n in xla_audit._fallback_counts().items() if n > before.get(op, 0))
    err = float((y.detach().cpu().double() - ref.detach()).norm() / ref.detach().norm())
    gerr = float((xd.grad.cpu().double() - xr.grad).norm() / xr.grad.norm())
    assert fallback == [], fallback
    assert err <= 2 * DEFAULT_TOL["fp32"] and gerr <= 4 * DEFAULT_TOL["fp32"], (err, gerr)  # two fp32 plans


def _dynamo_runs() -> int:
    """Graphs torch.compile(backend="openxla") has run (recorded as each is called, on this thread)."""
    import torch_xla.debug.metrics as met

    data = met.metric_data("RunCachedGraphOutputData")
    return int(data[0]) if data else 0


@pytest.mark.parametrize("length,kernel,mode,lead", [(256, 64, "causal", (2,)), (200, 33, "linear", (3,)),
                                                      (128, 128, "circular", ()), ((12, 10), (3, 4), "linear", (2,))],
                         ids=["causal-1d", "linear-1d", "circular-1d", "linear-2d"])
def test_long_convolution_is_one_graph_per_call_on_xla(length, kernel, mode, lead):
    """Without a gradient, a convolution on xla runs as one compiled graph (ConvPlan.fused: pad, both
    plans' modules, the product, the crop; or the planner's GEMM route, its pick here for the 1-D rows:
    four-step GEMMs for causal and linear, the direct DFT GEMMs for the circular one): once compiled, a call runs one torch.compile graph and no
    lazy graph (no compile-cache lookup), where the planned route ran two compiled graphs (its plans)
    and three lazy ones (pad, product, crop: three cached compiles per call, measured); nothing on the host, and within two
    fp32 plans' bar of the float64 convolution on the CPU."""
    from trnplan.conv import plan_conv

    shape = (length,) if isinstance(length, int) else length
    h = torch.randn(4, *((kernel,) if isinstance(kernel, int) else kernel))
    conv, ref = plan_conv(h.to(DEV), length, mode), plan_conv(h.double(), length, mode)
    xs = [torch.randn(*lead, 4, *shape) for _ in range(3)]
    xd = [x.to(DEV) for x in xs]
    torch_xla.sync()
    before = xla_audit._fallback_counts()
    for i, (x, xdev) in enumerate(zip(xs, xd)):
        assert conv.fusable(xdev)
        start = _dynamo_runs()
        with torch.no_grad(), xla_audit.CompileCounter() as lazy:
            y = conv(xdev)
        if i:  # the first call also compiles (and runs) the plans' own graphs
            assert (_dynamo_runs() - start, lazy.uncached, lazy.cached) == (1, 0, 0)
        assert rel_l2(y.cpu(), ref(x.double())) <= 2 * DEFAULT_TOL["fp32"]
    assert conv.method == ("library" if len(shape) == 2 else "direct" if mode == "circular" else "gemm"), conv.tree
    assert sorted(op for op, n in xla_audit._fallback_counts().items() if n > before.get(op, 0)) == []
    assert not conv.fusable(xd[0].requires_grad_())  # a gradient to record: the planned route (its adjoints)
