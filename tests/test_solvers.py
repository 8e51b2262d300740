"""Every solver × size × direction × norm × precision against numpy.fft in complex128.

A forced solver either meets the accuracy bar (and its own predicted bound) or refuses with a
PlanningError that names the solvers that do apply.
"""

from __future__ import annotations

import pytest
import torch

import trnplan
from conftest import BAR, DTYPES, random_complex, reference, rel_l2

SIZES = [1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 64, 97, 100, 127, 128, 256, 500, 512, 997, 1000, 1024,
         4096, 4097, 8192, 65536]
SOLVERS = list(trnplan.solver_names())
BATCH = 3


def _plan_or_refusal(n, solver, precision, inverse, norm):
    try:
        return trnplan.plan_many(n, batch=BATCH, strategy=solver, dtype=DTYPES[precision],
                                 inverse=inverse, norm=norm)
    except trnplan.PlanningError as exc:
        msg = str(exc)
        assert "Solvers that apply here:" in msg and solver in msg, msg
        applicable = msg.rsplit("Solvers that apply here:", 1)[1]
        assert "native" in applicable or "bluestein" in applicable, msg  # every n has a solver
        return None


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("inverse", [False, True], ids=["fwd", "inv"])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("solver", SOLVERS)
def test_solver_matches_float64_reference(solver, n, inverse, norm, precision):
    plan = _plan_or_refusal(n, solver, precision, inverse, norm)
    if plan is None:
        return
    assert plan.tree.solver == solver
    x = random_complex((BATCH, n), seed=n)
    y = plan.execute(torch.from_numpy(x).to(DTYPES[precision]))
    assert y.dtype == DTYPES[precision] and y.shape == (BATCH, n)
    err = rel_l2(y, reference(x, inverse, norm))
    assert err <= BAR[precision], f"{plan.tree}: rel L2 {err:.2e} > {BAR[precision]:.0e}"
    # the accuracy model's prediction is a bound on what is measured
    assert err <= plan.tree.error, f"{plan.tree}: measured {err:.2e} above predicted {plan.tree.error:.2e}"


# solvers that always apply to these sizes: every solver is exercised on the round trip
ROUNDTRIP = [(s, n) for s in SOLVERS for n in (1, 16, 97, 1000, 4096, 65536)]


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("solver,n", ROUNDTRIP)
def test_inverse_of_forward_is_identity(solver, n, precision):
    fwd = _plan_or_refusal(n, solver, precision, False, "backward")
    inv = _plan_or_refusal(n, solver, precision, True, "backward")
    if fwd is None or inv is None:
        return
    x = random_complex((BATCH, n), seed=7)
    back = inv(fwd(torch.from_numpy(x).to(DTYPES[precision])))
    assert rel_l2(back, x) <= BAR[precision]


@pytest.mark.parametrize("n", [64, 4097, 65537])
def test_estimate_choice_meets_the_bar_and_primes_work(n):
    plan = trnplan.plan_many(n, batch=2)
    x = random_complex((2, n), seed=3)
    assert rel_l2(plan(torch.from_numpy(x).to(torch.complex64)), reference(x, False)) <= BAR["fp32"]


def test_large_prime_through_bluestein_with_gemm_children():
    """65537 = 2^16 + 1 (prime): Bluestein over a Stockham inner transform, no native anywhere."""
    plan = trnplan.plan_many(65537, strategy="(bluestein _ stockham stockham)".replace("_", "65537"))
    assert "native" not in str(plan.tree)
    x = random_complex((1, 65537), seed=11)
    assert rel_l2(plan(torch.from_numpy(x).to(torch.complex64)), reference(x, False)) <= BAR["fp32"]


@pytest.mark.parametrize("spec,n", [
    ("(four-step 4096=64x64 (dft-gemm) (dft-gemm))", 4096),
    ("(four-step 4097=17x241 (dft-gemm) (bluestein (stockham) (butterfly)))", 4097),
    ("(four-step 8192 (four-step (stockham) (butterfly)) (dft-gemm))", 8192),
    ("(bluestein 997 m=2187 (four-step 2187=27x81 (dft-gemm) (dft-gemm)) (four-step 2187=27x81 (dft-gemm) (dft-gemm)))", 997),
    ("(stockham 1024=2x8x8x8)", 1024),
])
def test_forced_trees_without_native(spec, n):
    # tol = the bar checked below: the planner's default fp32 bound is now 5e-7 (the precision
    # issue's bar), which the model cannot certify for the deepest of these forced GEMM trees
    # (Bluestein over four-step over dft-gemm: predicted 5.2e-7)
    plan = trnplan.plan_many(n, batch=2, strategy=spec, tol=BAR["fp32"])
    assert "native" not in str(plan.tree)
    for inverse in (False, True):
        p = trnplan.plan_many(n, batch=2, strategy=spec, inverse=inverse, tol=BAR["fp32"])
        x = random_complex((2, n), seed=5)
        assert rel_l2(p(torch.from_numpy(x).to(torch.complex64)), reference(x, inverse)) <= BAR["fp32"]
