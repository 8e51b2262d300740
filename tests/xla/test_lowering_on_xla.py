"""Every GEMM tree trnplan can hand an accelerator, lowered and run on torch-xla (XLA:CPU).

For each tree (dft-gemm, stockham, butterfly, four-step, Bluestein over GEMM trees, real r2c/c2r,
2-D/3-D row-column, the bf16/bf16x3/bf16x6 modes; forward and inverse) the plan's lowered module
runs on the ``xla`` device and is checked:

* against numpy.fft in complex128 with the mode's bar (``DEFAULT_TOL``, imported);
* ``executed_fallback_ops()`` gains nothing (no ATen op ran on the host);
* its HLO and StableHLO (:mod:`trnplan.tools.xla_audit`): every op on neuronx-cc's list and inside the
  set trnplan's lowerings are known to produce, no c64/c128/f64/s64, static shapes;
* one XLA compile per shape: the same shape again compiles nothing (CachedCompile), a new batch
  compiles once.

The plans are made for the CPU with the tree forced (a CPU plan would otherwise pick a native
leaf); tests/xla/test_device_xla.py covers plans made for ``device="xla"`` themselves.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch_xla
from support import rel_l2

import trnplan
from trnplan.core import accuracy
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.tools import xla_audit

pytestmark = pytest.mark.xla

# (shape, kind, inverse, precision, strategy)
TREES = [
    (64, "c2c", False, "fp32", "dft-gemm"),
    (256, "c2c", True, "fp32", "dft-gemm"),  # n > 128: the k-chunked bmm contraction
    (1024, "c2c", False, "fp32", "stockham"),
    (1024, "c2c", True, "fp32", "stockham"),
    (1024, "c2c", False, "fp32", "butterfly"),
    (4096, "c2c", False, "fp32", "(four-step 4096=64x64 (dft-gemm) (dft-gemm))"),
    (1000, "c2c", True, "fp32", "(four-step 1000 (dft-gemm) (dft-gemm))"),
    (97, "c2c", False, "fp32", "(bluestein 97 (stockham) (stockham))"),
    (97, "c2c", True, "fp32", "(bluestein 97 (dft-gemm) (dft-gemm))"),
    (1024, "r2c", False, "fp32", "(real 1024 method=half (stockham))"),
    (1024, "c2r", True, "fp32", "(real 1024 method=half (stockham))"),
    (256, "r2c", False, "fp32", "(real 256 method=gemm)"),
    (100, "c2r", True, "fp32", "(real 100 method=full (dft-gemm))"),
    ((16, 32), "c2c", False, "fp32", "(nd method=rowcol (dft-gemm) (dft-gemm))"),
    ((8, 8, 8), "r2c", False, "fp32", "(nd method=rowcol (real method=gemm) (dft-gemm) (dft-gemm))"),
    (256, "c2c", False, "bf16", "dft-gemm"),
    (1024, "c2c", False, "bf16x3", "stockham"),
    (64, "c2c", True, "bf16x6", "dft-gemm"),
]
BATCH = 4


def _id(case):
    shape, kind, inverse, precision, strategy = case
    return f"{kind}-{'inv' if inverse else 'fwd'}-{shape}-{precision}-{strategy}"


def _plan(case, batch=BATCH):
    shape, kind, inverse, precision, strategy = case
    return trnplan.plan_many(shape, batch, kind=kind, inverse=inverse, precision=precision, strategy=strategy,
                             tol=DEFAULT_TOL[precision], cache=None)


def _reference(plan, inputs):
    """The float64 reference (core.accuracy.reference) of the module's flat inputs, flat like its outputs."""
    p = plan.problem
    if p.kind == "r2c":
        x = inputs[0].double().numpy().reshape(p.batch, *p.shape)
    else:
        x = (inputs[0].double().numpy() + 1j * inputs[1].double().numpy()).reshape(p.batch, *p.in_shape)
    return accuracy.reference(p, x).reshape(p.batch, -1)


def _c2r_input(plan, seed=0):
    """A Hermitian-consistent half spectrum (the rfftn of real data), so c2r has one right answer."""
    p = plan.problem
    g = np.random.default_rng(seed)
    spec = np.fft.rfftn(g.standard_normal((p.batch, *p.shape)), axes=tuple(range(1, p.rank + 1)))
    spec = spec.reshape(p.batch, -1)
    return (torch.from_numpy(spec.real).float(), torch.from_numpy(spec.imag).float())


@pytest.mark.parametrize("case", TREES, ids=map(_id, TREES))
def test_tree_on_xla_matches_numpy_and_passes_the_audit(case):
    plan = _plan(case)
    p = plan.problem
    inputs = _c2r_input(plan) if p.kind == "c2r" else xla_audit.example_inputs(p, seed=1)
    report = xla_audit.audit_module(plan.module, inputs, subject=str(plan.tree))
    out = plan.module(*(t.to(torch_xla.device()) for t in inputs))  # already compiled by the audit's run
    got = out[0].cpu().double().numpy() if p.kind == "c2r" else (out[0].cpu().double().numpy()
                                                                 + 1j * out[1].cpu().double().numpy())
    err = rel_l2(got, _reference(plan, inputs))
    assert err <= DEFAULT_TOL[p.precision], f"{plan.tree}: rel L2 {err:.3g} over the {p.precision} bar"
    assert report.fallback_ops == (), f"{plan.tree}: ran on the host: {report.fallback_ops}"
    assert report.findings == (), str(report)
    assert set(report.hlo_ops) <= xla_audit.PLAN_HLO_OPS, (
        f"{plan.tree}: HLO ops outside the known set: {set(report.hlo_ops) - xla_audit.PLAN_HLO_OPS}")
    assert set(report.stablehlo_ops) <= xla_audit.PLAN_STABLEHLO_OPS, (
        f"{plan.tree}: StableHLO ops outside the known set: {set(report.stablehlo_ops) - xla_audit.PLAN_STABLEHLO_OPS}")
    assert {"dot"} & set(report.hlo_ops) or plan.tree.solver == "butterfly", "a GEMM tree without a dot"
    assert report.types <= {"f32", "bf16", "s32", "u32", "pred"}, report.types
    print(f"XLA-LANE {plan.tree} precision={p.precision} err={err:.3g} hlo={sorted(report.hlo_ops)}")


def test_one_compile_per_shape():
    """Lazy execution compiles a module's graph once per shape: the same shape again hits
    torch-xla's compile cache, a second batch size compiles once more."""
    case = (512, "c2c", False, "fp32", "stockham")  # a shape no other test here compiles
    dev = torch_xla.device()
    plan = _plan(case)
    module = plan.module.to(dev)
    inputs = [t.to(dev) for t in xla_audit.example_inputs(plan.problem)]
    torch_xla.sync()
    with xla_audit.CompileCounter() as first:
        out = module(*inputs)  # kept alive: the block's closing sync runs the live tensors' graph
    with xla_audit.CompileCounter() as again:
        out = module(*inputs)
    other = _plan(case, batch=2 * BATCH)
    module2 = other.module.to(dev)
    inputs2 = [t.to(dev) for t in xla_audit.example_inputs(other.problem)]
    torch_xla.sync()
    with xla_audit.CompileCounter() as new_batch:
        out = module2(*inputs2)
    del out
    assert (first.uncached, again.uncached, again.cached, new_batch.uncached) == (1, 0, 1, 1)


def test_the_audit_sees_complex_and_fallback_in_a_native_tree():
    """The audit can fail: a CPU plan's native leaf (torch.fft) lowers to complex HLO on xla and
    torch-xla runs the FFT itself on the host (aten::_fft_c2c)."""
    plan = trnplan.plan_many(64, BATCH, strategy="native", cache=None)
    report = xla_audit.audit_module(plan.module, xla_audit.example_inputs(plan.problem), subject="native")
    assert not report.ok
    assert "aten::_fft_c2c" in report.fallback_ops
    assert any("c64" in f for f in report.findings), report.findings


def test_lane_versions():
    """The lane runs the Neuron DLAMI's PyTorch 2.9 pair."""
    assert torch.__version__.split("+")[0] == "2.9.0"
    assert torch_xla.__version__.split("+")[0] == "2.9.0"


def test_cli_audit_adds_the_hlo_audit(capsys):
    """`trnplan audit SHAPE` where torch-xla is installed: the ATen audit, then the same tree's
    HLO/StableHLO audit on the xla device; exit 0 when both pass."""
    from trnplan.tools import cli

    assert cli.main(["audit", "1024", "--batch", "4"]) == 0
    out = capsys.readouterr().out
    assert "neuron lowering audit" in out and "xla lowering audit" in out
    assert "OK: every op on neuronx-cc's list; no complex, f64 or 64-bit integer; static shapes" in out
