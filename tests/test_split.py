"""Plan.execute_split: FFTW's split interface (``fftw_execute_split_dft``, ``_split_dft_r2c``,
``_split_dft_c2r``) for c2c, r2c and c2r, ranks 1-3, against float64 numpy with the mode's bar,
with autograd (gradcheck in float64, and the same gradients as the complex interface)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support import reference, rel_l2

import trnplan
from trnplan.core.accuracy import DEFAULT_TOL

CASES = [("c2c", (64,)), ("c2c", (12, 10)), ("c2c", (4, 6, 8)), ("r2c", (100,)), ("r2c", (8, 6)),
         ("r2c", (3, 4, 6)), ("c2r", (64,)), ("c2r", (6, 10)), ("c2r", (4, 6, 8)), ("c2c", (97,))]


def _input(plan, lead, seed=0):
    g = np.random.default_rng(seed)
    shape = (*lead, *plan.problem.in_shape)
    x = g.standard_normal(shape)
    return x if plan.problem.real_input else x + 1j * g.standard_normal(shape)


@pytest.mark.parametrize("kind,shape", CASES, ids=lambda v: str(v))
def test_execute_split_matches_float64_numpy(kind, shape):
    plan = trnplan.plan_many(shape, 6, kind=kind, cache=None)
    x = _input(plan, (2, 3))
    f32 = plan.problem.real_dtype
    arg = (torch.from_numpy(x).to(f32) if plan.problem.real_input
           else (torch.from_numpy(x.real).to(f32), torch.from_numpy(x.imag).to(f32)))
    y = plan.execute_split(arg)
    ref = reference(x, plan.problem.inverse, kind=kind, shape=shape)
    if kind == "c2r":
        assert isinstance(y, torch.Tensor) and not y.is_complex() and y.shape == ref.shape
        got = y.double().numpy()
    else:
        assert isinstance(y, tuple) and len(y) == 2 and not y[0].is_complex() and y[0].shape == ref.shape
        got = y[0].double().numpy() + 1j * y[1].double().numpy()
    assert rel_l2(got, ref) <= DEFAULT_TOL["fp32"]


@pytest.mark.parametrize("kind,shape,twice", [("c2c", (8,), True), ("r2c", (4, 2), False), ("c2r", (8,), True),
                                              ("c2r", (2, 4), False), ("r2c", (2, 2, 4), False), ("c2c", (3, 2), False)],
                         ids=lambda v: str(v))
def test_execute_split_is_differentiable(kind, shape, twice):
    plan = trnplan.plan_many(shape, 1, kind=kind, dtype=torch.complex128, cache=None)
    x = _input(plan, (1,), 1)
    if plan.problem.real_input:
        inputs = (torch.from_numpy(x).requires_grad_(),)
        fn = plan.execute_split
    else:
        inputs = (torch.from_numpy(x.real).requires_grad_(), torch.from_numpy(x.imag).requires_grad_())

        def fn(re, im):
            return plan.execute_split((re, im))
    assert torch.autograd.gradcheck(fn, inputs)
    if twice:  # double backward: the adjoint plan's split interface is differentiable again
        assert torch.autograd.gradgradcheck(fn, inputs)


@pytest.mark.parametrize("kind", ["c2c", "r2c", "c2r"])
def test_split_gradients_equal_the_complex_interface(kind):
    plan = trnplan.plan_many((6, 8), 3, kind=kind, cache=None)
    x = _input(plan, (3,), 2)
    w = np.random.default_rng(3).standard_normal((3, *plan.problem.out_shape))
    if plan.problem.real_input:
        xs = torch.from_numpy(x).float().requires_grad_()
        yr, yi = plan.execute_split(xs)
        ((yr + 2 * yi) * torch.from_numpy(w).float()).sum().backward()
        xc = torch.from_numpy(x).float().requires_grad_()
        yc = plan.execute(xc)
        ((yc.real + 2 * yc.imag) * torch.from_numpy(w).float()).sum().backward()
        got, want = xs.grad.double().numpy(), xc.grad.double().numpy()
    else:
        re = torch.from_numpy(x.real).float().requires_grad_()
        im = torch.from_numpy(x.imag).float().requires_grad_()
        y = plan.execute_split((re, im))
        y = y if isinstance(y, tuple) else (y, torch.zeros_like(y))
        ((y[0] + 2 * y[1]) * torch.from_numpy(w).float()).sum().backward()
        xc = torch.from_numpy(x).to(torch.complex64).requires_grad_()
        yc = plan.execute(xc)
        yc = yc if yc.is_complex() else torch.complex(yc, torch.zeros_like(yc))
        ((yc.real + 2 * yc.imag) * torch.from_numpy(w).float()).sum().backward()
        got = re.grad.double().numpy() + 1j * im.grad.double().numpy()
        want = xc.grad.to(torch.complex128).numpy()
    assert rel_l2(got, want) <= DEFAULT_TOL["fp32"]


def test_execute_split_refuses_the_wrong_form():
    c2c = trnplan.plan_many(16, 2, cache=None)
    r2c = trnplan.plan_many(16, 2, kind="r2c", cache=None)
    with pytest.raises(TypeError, match=r"takes a pair \(re, im\) of float32 tensors; got a Tensor \(for a complex "
                                        r"tensor use execute\(\)\)"):
        c2c.execute_split(torch.zeros(2, 16, dtype=torch.complex64))
    with pytest.raises(TypeError, match="pair input re must be float32"):
        c2c.execute_split((torch.zeros(2, 16, dtype=torch.complex64), torch.zeros(2, 16)))
    with pytest.raises(TypeError, match="execute_split\\(\\) of this r2c plan takes one real float32 tensor; got a tuple"):
        r2c.execute_split((torch.zeros(2, 16), torch.zeros(2, 16)))
