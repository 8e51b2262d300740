"""Issue 30's truncated and DCT/DST plans on the torch_neuronx.trace route (trn1/inf2, torch-neuronx 2.9),
against the trace stand-in of tests/test_neuron_standin.py (``trace`` is ``torch.jit.trace``: it proves
trnplan's integration, not neuronx-cc): each solver's methods planned for ``device="neuron"``, traced
(the probe and the plan), run on host tensors against numpy/scipy in float64 within the fp32 bar, and
its graph's ATen ops audited against the documented Neuron lists (:func:`trnplan.tools.audit.audit`).

Convolutions (``trnplan.conv.plan_conv``) have no trace route: a convolution is planned for its
bank's device, and this route's tensors are host tensors (docs/trainium.md).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft
import torch
from support import rel_l2
from test_neuron import _quiet, standin, standin_host  # noqa: F401 - the trace stand-in's fixtures

import trnplan
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.tools.audit import allowlist, audit

CASES = [(64, "dct2", None, "(r2r method=gemm)"), (40, "dst3", None, "(r2r method=fft)"),
         (256, "r2c", (16,), "(truncated method=gemm)"), (256, "r2c", (16,), "(truncated method=full)"),
         ((16, 12), "c2r", (3, 4), "(truncated method=gemm)"), ((16, 12), "c2r", (3, 4), "(truncated method=full)")]


def _reference(x, shape, kind, modes):
    axes = tuple(range(1, x.ndim))
    if kind[:3] in ("dct", "dst"):
        with scipy.fft.set_backend("scipy", only=True):
            return getattr(scipy.fft, kind[:3])(x, type=int(kind[3]), norm="backward", axis=-1)
    rows = [np.r_[0:m, n - m:n] for m, n in zip(modes[:-1], shape[:-1])]
    index = (Ellipsis, *np.ix_(*rows, np.arange(modes[-1])))
    if kind == "r2c":
        return np.fft.rfftn(x, axes=axes)[index]
    full = np.zeros((x.shape[0], *shape[:-1], shape[-1] // 2 + 1), complex)
    full[index] = x
    return np.fft.irfftn(full, s=shape, axes=axes)


@pytest.mark.parametrize("shape,kind,modes,strategy", CASES, ids=lambda v: str(v))
def test_spectral_plan_on_the_trace_route(standin, shape, kind, modes, strategy):  # noqa: F811 - the fixture
    traced = len(standin.CALLS)
    plan = trnplan.plan_many(shape, batch=4, kind=kind, modes=modes, strategy=strategy, device="neuron", cache=None)
    assert plan.provenance.artifact == "compiled now" and len(standin.CALLS) > traced, plan.provenance
    assert strategy.split()[1][:-1] in str(plan.tree), plan.tree
    g = np.random.default_rng(0)
    x = g.standard_normal((4, *plan.problem.in_shape))
    if not plan.problem.real_input:
        x = x + 1j * g.standard_normal(x.shape)
    y = plan.execute(torch.from_numpy(x).to(torch.complex64 if np.iscomplexobj(x) else torch.float32))
    assert rel_l2(y, _reference(x, (shape,) if isinstance(shape, int) else shape, kind, modes)) <= DEFAULT_TOL["fp32"]
    report = audit(plan)
    assert report.ok and report.host_only is None, str(report)
    assert {op for op, _ in report.ops} <= set(allowlist()), report.ops
