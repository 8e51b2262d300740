"""The graph TorchNeuron's compiler would receive, checked without hardware (torch 2.13).

``torch.compile(backend="neuron")`` runs Dynamo, then AOTAutograd, then hands the ATen graph to
its StableHLO lowering (../shared/neuron/runtimes.md §2). A recording backend through the same
AOTAutograd (``aot_autograd(fw_compiler=recorder)``), with ``fullgraph=True`` and
``dynamic=False`` as trnplan compiles plans for TorchNeuron, captures that graph: for every GEMM
tree an accelerator plan can be, one graph (no graph break), only ATen ops on the Neuron
allowlist trnplan ships (``neuron_aten_allowlist.tsv``), and only real dtypes — no complex, no
float64, no int64 tensor computed in the graph. What this cannot show: whether TorchNeuron's
lowering of each op compiles (needs torch-neuronx), or its eager fallbacks.
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd

import trnplan
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.tools.audit import allowlist

TREES = [
    (64, "c2c", "fp32", "dft-gemm"),
    (256, "c2c", "fp32", "dft-gemm"),
    (1024, "c2c", "fp32", "stockham"),
    (1024, "c2c", "fp32", "butterfly"),
    (4096, "c2c", "fp32", "(four-step 4096=64x64 (dft-gemm) (dft-gemm))"),
    (97, "c2c", "fp32", "(bluestein 97 (stockham) (stockham))"),
    (1024, "r2c", "fp32", "(real 1024 method=half (stockham))"),
    (1024, "c2r", "fp32", "(real 1024 method=half (stockham))"),
    ((16, 32), "c2c", "fp32", "(nd method=rowcol (dft-gemm) (dft-gemm))"),
    (1024, "c2c", "bf16x3", "stockham"),
]
#: dtypes a tensor computed in the graph may have on a NeuronCore (data-types.rst); int64 only as
#: a graph input that is a constant index buffer (none left: butterfly's bit reversal is int32)
DEVICE_DTYPES = {torch.float32, torch.bfloat16, torch.int32, torch.bool}


def _record(module, inputs):
    """(forward graphs, backward graphs) AOTAutograd hands a backend for ``module(*inputs)``."""
    fw, bw = [], []

    def keep(graphs):
        def compiler(gm, example_inputs):
            graphs.append(gm)
            return gm.forward
        return compiler

    torch._dynamo.reset()
    compiled = torch.compile(module, backend=aot_autograd(fw_compiler=keep(fw), bw_compiler=keep(bw)),
                             fullgraph=True, dynamic=False)
    out = compiled(*inputs)
    if any(t.requires_grad for t in inputs):
        sum(o.square().sum() for o in out).backward()
    return fw, bw


def _aten_name(target) -> str:
    name = getattr(target, "_schema", None)
    return f"aten::{target._schema.name.split('::', 1)[1]}" if name is not None else str(target)


def _check(graph, tree):
    ops, bad_dtypes = set(), set()
    for node in graph.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.dtype not in DEVICE_DTYPES:
            bad_dtypes.add(f"{node.name}: {val.dtype}")
        if node.op == "call_function":
            ops.add(_aten_name(node.target))
    allowed = allowlist()
    assert ops <= set(allowed), f"{tree}: ATen ops off the Neuron allowlist: {sorted(ops - set(allowed))}"
    assert not bad_dtypes, f"{tree}: tensors TorchNeuron cannot hold: {sorted(bad_dtypes)}"
    return ops


@pytest.mark.parametrize("case", TREES, ids=lambda c: f"{c[1]}-{c[0]}-{c[2]}-{c[3]}")
def test_one_graph_allowlisted_ops_real_dtypes(case):
    shape, kind, precision, strategy = case
    plan = trnplan.plan_many(shape, 4, kind=kind, precision=precision, strategy=strategy,
                             tol=DEFAULT_TOL[precision], cache=None)
    n = plan.problem.in_shape
    count = 1 if plan.problem.real_input else 2
    inputs = [torch.randn(4, int(torch.tensor(n).prod())) for _ in range(count)]
    fw, bw = _record(plan.module, inputs)
    assert len(fw) == 1 and not bw, f"{plan.tree}: {len(fw)} forward graphs"
    ops = _check(fw[0], plan.tree)
    assert {"aten::mm", "aten::bmm"} & ops or plan.tree.solver == "butterfly"


def test_training_runs_the_adjoint_plan_as_another_forward_graph():
    """Training needs no backward graph of the module: the gradient of ``Plan.execute`` is the
    adjoint plan's forward (the design's "backward = another plan"), a graph of the same kind.

    (The module's own AOTAutograd backward would hold ``aten::select_backward``, which is off the
    allowlist; that is why the device path differentiates through the adjoint plan.)"""
    plan = trnplan.plan_many(1024, 4, strategy="stockham", cache=None)
    # the adjoint's problem, with the same tree forced (on the CPU the adjoint plans freely and
    # would pick torch.fft; on an accelerator it is a GEMM tree again)
    p = plan.adjoint().problem
    adjoint = trnplan.plan_many(p.shape, p.batch, inverse=p.inverse, norm=p.norm, strategy="stockham", cache=None)
    fw, bw = _record(adjoint.module, [torch.randn(4, 1024), torch.randn(4, 1024)])
    assert (len(fw), len(bw)) == (1, 0)
    _check(fw[0], adjoint.tree)
    x = torch.randn(4, 1024, dtype=torch.complex64, requires_grad=True)
    plan.execute(x).abs().square().sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape


def test_a_native_tree_is_refused():
    """The check can fail: a native leaf hands the backend complex tensors and aten::_fft_c2c."""
    plan = trnplan.plan_many(64, 4, strategy="native", cache=None)
    fw, _ = _record(plan.module, [torch.randn(4, 64), torch.randn(4, 64)])
    with pytest.raises(AssertionError, match="Neuron allowlist|cannot hold"):
        _check(fw[0], plan.tree)


def test_model_calling_trnplan_compiles_without_a_graph_break():
    """torch.compile(model, fullgraph=True) of a model calling trnplan.fft: one graph, no break
    (trnplan's transforms are custom ops there), and the result matches eager."""

    class Spectral(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(33, dtype=torch.complex64))

        def forward(self, x):
            return trnplan.fft.irfft(trnplan.fft.rfft(x) * self.weight, n=x.shape[-1])

    model, x = Spectral(), torch.randn(8, 64)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    assert torch.allclose(compiled(x), model(x), atol=1e-5)
