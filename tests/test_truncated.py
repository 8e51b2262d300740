"""Truncated (pruned) real transforms (``modes=``), trnplan.fft.rfftn_truncated / irfftn_truncated and
trnplan.nn.SpectralConv, against numpy.fft in float64 (rfftn then the kept block cut out; the block
zero-filled then irfftn) with the mode's bar and each plan's own predicted error."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from support import rel_l2

import trnplan
from trnplan import fft as tfft
from trnplan.core.accuracy import DEFAULT_TOL, measure_error
from trnplan.core.errors import PlanningError
from trnplan.core.problem import Problem
from trnplan.nn import SpectralConv

CASES = [((64,), (16,)), ((64,), (33,)), ((30, 24), (5, 7)), ((16, 12, 10), (3, 4, 6))]


@pytest.mark.parametrize("shape,modes", CASES, ids=lambda v: "x".join(map(str, v)))
@pytest.mark.parametrize("method", ["gemm", "full"])
def test_forced_methods_match_numpy(shape, modes, method):
    for kind in ("r2c", "c2r"):
        for dtype, norm in ((torch.complex64, "backward"), (torch.complex64, "ortho"), (torch.complex128, "forward")):
            plan = trnplan.plan_many(shape, batch=3, kind=kind, modes=modes, norm=norm, dtype=dtype,
                                     strategy=f"(truncated method={method})")
            err = measure_error(plan)
            bar = DEFAULT_TOL["fp64" if dtype == torch.complex128 else "fp32"]
            where = f"{kind} {shape} {modes} {norm} {dtype}: {err:.3g} vs predicted {plan.tree.error:.3g}"
            assert err <= bar and err <= plan.tree.error, where
            assert plan.problem.out_shape if kind == "r2c" else plan.problem.in_shape == plan.problem.kept_shape


def test_free_planning_compares_both_methods():
    plan = trnplan.plan_many((64, 64), batch=8, kind="r2c", modes=(8, 8))
    assert plan.tree.solver == "truncated"
    text = plan.explain()
    assert "truncated" in text and measure_error(plan) <= plan.tree.error
    # every other solver declines a truncated problem, saying which one plans it
    with pytest.raises(PlanningError, match="a truncated transform .* is planned by the truncated solver"):
        trnplan.plan_many(64, kind="r2c", modes=8, strategy="real")


def test_refusals_say_which():
    with pytest.raises(ValueError, match="modes= .* is for kind='r2c'"):
        Problem.create(64, modes=8)
    with pytest.raises(ValueError, match="keeps more than the 33 bins"):
        Problem.create(64, kind="r2c", modes=34)
    with pytest.raises(ValueError, match=r"2·9 > 16"):
        Problem.create((16, 16), kind="r2c", modes=(9, 4))
    with pytest.raises(ValueError, match="one positive int per transformed axis"):
        Problem.create((16, 16), kind="r2c", modes=(4,))
    with pytest.raises(PlanningError, match="method=gemm is for axes ≤ 4096"):
        trnplan.plan_many(8192, kind="r2c", modes=16, strategy="(truncated method=gemm)")
    with pytest.raises(ValueError, match="keeps \\[8, 4\\]"):
        tfft.irfftn_truncated(torch.randn(2, 6, 4, dtype=torch.complex64), s=(16, 16), modes=(4, 4))
    with pytest.raises(RuntimeError, match="s .* is required"):
        tfft.irfftn_truncated(torch.randn(2, 8, 4, dtype=torch.complex64), s=None)
    with pytest.raises(ValueError, match="backend must be 'trnplan' or 'torch'"):
        SpectralConv(2, 2, 4, backend="jax")


def test_untruncated_digests_are_unchanged():
    """modes= is left out of an untruncated problem's dict, so stored wisdom keeps its keys."""
    assert "modes" not in Problem.create(64).to_dict()
    assert Problem.create(64, kind="r2c", modes=4).digest() != Problem.create(64, kind="r2c").digest()


def test_functions_and_autograd():
    x = torch.randn(2, 20, 3, 18, dtype=torch.float64)
    y = tfft.rfftn_truncated(x, modes=(4, 5), dim=(1, 3))  # non-adjacent dims, a batch dim between them
    full = np.fft.rfftn(x.numpy(), axes=(1, 3))
    ref = np.concatenate([full[:, :4], full[:, -4:]], axis=1)[..., :5]
    assert y.shape == (2, 8, 3, 5) and rel_l2(y, ref) <= DEFAULT_TOL["fp64"]
    z = tfft.irfftn_truncated(y, s=(20, 18), dim=(1, 3))
    fill = np.zeros((2, 20, 3, 10), complex)
    fill[:, :4, :, :5], fill[:, -4:, :, :5] = y.numpy()[:, :4], y.numpy()[:, 4:]
    assert rel_l2(z, np.fft.irfftn(fill, s=(20, 18), axes=(1, 3))) <= DEFAULT_TOL["fp64"]
    xg = torch.randn(2, 12, 10, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: tfft.rfftn_truncated(t, (3, 4), norm="ortho"), (xg,))
    yg = torch.randn(2, 6, 4, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: tfft.irfftn_truncated(t, s=(12, 10)), (yg,))


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_spectral_conv_matches_the_torch_fft_layer(dims):
    grid, modes = {1: ((64,), (12,)), 2: ((24, 20), (5, 6)), 3: ((12, 10, 8), (3, 2, 4))}[dims]
    torch.manual_seed(0)
    a = SpectralConv(4, 3, modes)
    b = SpectralConv(4, 3, modes, backend="torch")
    b.weight = a.weight
    x = torch.randn(2, 4, *grid, requires_grad=True)
    ya, yb = a(x), b(x)
    assert ya.shape == (2, 3, *grid) and rel_l2(ya, yb.detach()) <= 2 * DEFAULT_TOL["fp32"]  # two fp32 layers
    ga = torch.autograd.grad(ya.square().sum(), (x, a.weight))
    gb = torch.autograd.grad(yb.square().sum(), (x, b.weight))
    for g, h in zip(ga, gb):
        assert rel_l2(g, h) <= 4 * DEFAULT_TOL["fp32"]


def test_wisdom_and_pickle(tmp_path):
    cache = trnplan.PlanCache(tmp_path / "c")
    first = trnplan.plan_many((32, 24), batch=3, kind="c2r", modes=(5, 7), cache=cache)
    trnplan.clear_plan_cache()
    again = trnplan.plan_many((32, 24), batch=3, kind="c2r", modes=(5, 7), cache=cache)
    assert again.provenance.origin == "wisdom hit" and str(again.tree) == str(first.tree)
    restored = pickle.loads(pickle.dumps(again))
    assert restored.problem == again.problem and str(restored.tree) == str(again.tree)


@pytest.mark.parametrize("precision", ["bf16", "bf16x3"])
def test_pruned_gemms_in_the_reduced_modes(precision):
    for kind in ("r2c", "c2r"):
        plan = trnplan.plan_many((32, 64), batch=8, kind=kind, modes=(4, 8), precision=precision,
                                 strategy="(truncated method=gemm)")
        err = measure_error(plan)
        assert err <= DEFAULT_TOL[precision] and err <= plan.tree.error, (kind, err, plan.tree.error)
