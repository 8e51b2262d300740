"""MKL's single c2c transform (native.mkl_single).

torch.fft on the CPU (MKL) and mkl_fft take another path for one transform (howmany 1) of a
composite length over 4096, whose error grows linearly in its prime factors ≥ 17 (complex64
19816 = 8·2477 measured 1.4e-5 against numpy.fft in complex128, 27× fp32's bar) and with its
factors 5…13 (13^5 = 371293: 2.9 u·√log2 n, 7.6e-7, 1.5× the bar). The accuracy model bounds it, so a
default plan there is not torch.fft's call and meets the bar; with a batch of two, a prime
length, or n ≤ 4096 the path and the plan are the usual ones.
"""

from __future__ import annotations

import pytest
import torch
from support import BAR, DTYPES, random_complex, reference, rel_l2

import trnplan
from trnplan.core.errors import PlanningError
from trnplan.core.problem import Problem
from trnplan.planner import native

pytestmark = pytest.mark.skipif(not native.cpu_fft_is_mkl(), reason="torch.fft on this CPU is not MKL")

#: composite lengths over 4096 whose single transform takes MKL's inaccurate path (measured
#: 2026-11-27 in complex64: 3.6, 13.6 and 60× u·√log2 n; 11^5 and 13^5: 2.5 and 2.9×)
BAD = (4097, 17357, 19816, 11**5, 13**5)
#: those over fp32's bar by torch.fft itself (4097's 7.4e-7 and 11^5's 6.2e-7 too, but closer to it)
OVER_BAR = (17357, 19816, 13**5)


@pytest.mark.parametrize("n", BAD)
@pytest.mark.parametrize("precision", ["fp32", "fp64"])
def test_the_model_bounds_mkl_single_transform(n, precision):
    """torch.fft's measured error on one transform is at most the native leaf's prediction."""
    x = torch.from_numpy(random_complex((1, n), seed=n)).to(DTYPES[precision])
    measured = rel_l2(torch.fft.fft(x), reference(x))
    problem = Problem.create((n,), batch=1, dtype=DTYPES[precision], precision=precision)
    predicted = trnplan.plan_many((n,), batch=1, dtype=DTYPES[precision], strategy="native", tol=1.0).tree.error
    assert measured <= predicted, (n, precision, measured, predicted)
    assert native.mkl_single(problem, 1e-7) > 1e-7
    if precision == "fp32" and n in OVER_BAR:  # the path this module is about: over the bar by torch.fft itself
        assert measured > BAR["fp32"]


@pytest.mark.parametrize("n", BAD)
@pytest.mark.parametrize("inverse", [False, True])
def test_default_plan_of_one_transform_meets_the_bar(n, inverse):
    """The default (estimate) plan of one transform meets fp32's bar, in both directions."""
    x = torch.from_numpy(random_complex((1, n), seed=n + 1)).to(torch.complex64)
    plan = trnplan.plan_many((n,), batch=1, inverse=inverse)
    assert plan.tree.solver != "native" and "mkl-fft" not in str(plan.tree)
    assert rel_l2(plan.execute(x), reference(x, inverse=inverse)) <= BAR["fp32"]


def test_forced_native_on_one_transform_is_refused_with_the_accuracy_reason():
    with pytest.raises(PlanningError, match=r"native: predicted error .* exceeds the bound 5e-07"):
        trnplan.plan_many((19816,), batch=1, strategy="native")


@pytest.mark.parametrize("shape_batch", [((19816,), 2), ((13**5,), 2), ((4099,), 1), ((65537,), 1), ((4096,), 1), ((2 * 2039,), 1)])
def test_no_widening_where_mkl_takes_its_usual_path(shape_batch):
    """A batch of two, a prime length, and n ≤ 4096: the smooth model as it is, and torch.fft's
    measured error within it (and the bar)."""
    shape, batch = shape_batch
    assert native.mkl_single(Problem.create(shape, batch=batch, dtype=torch.complex64), 1e-7) == 1e-7
    x = torch.from_numpy(random_complex((batch, *shape), seed=7)).to(torch.complex64)
    measured = rel_l2(torch.fft.fft(x), reference(x))
    assert measured <= BAR["fp32"]
    plan = trnplan.plan_many(shape, batch=batch, strategy="native")
    assert measured <= plan.tree.error


def test_real_kinds_are_left_alone():
    """r2c and c2r single transforms take MKL's real path, within the smooth model."""
    assert native.mkl_single(Problem.create((19816,), kind="r2c", dtype=torch.float32), 1e-7) == 1e-7
    assert native.mkl_single(Problem.create((19816,), kind="c2r", inverse=True, dtype=torch.complex64), 1e-7) == 1e-7
