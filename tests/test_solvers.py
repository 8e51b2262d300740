"""Every solver against numpy.fft in complex128 where it applies, and its refusal where it does not.

The applicability table is tests/applicability.py (:func:`expected_refusal`): for each registered
solver and each problem of the grid, ``None`` (the solver applies: its forced plan must execute
and meet the engine's bar for the mode, and its own predicted bound) or the reason it must refuse
with. A regression that makes a solver refuse everywhere, or accept where it cannot compute,
fails; a solver added to the registry without a row fails
:func:`test_every_registered_solver_has_a_row`.

Sizes follow DESIGN.md: 1, 2, 3, primes, powers of two and mixed radices. Each correctness case
runs both directions (the sign of the exponent is each solver's own work); the norm scaling is
applied once at the plan's root, so norms × directions are a small grid over the root kinds
(:func:`test_root_scaling_norms_and_directions`), not multiplied into every case.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from applicability import HOSTS, OVER, ROWS, Case, applying, expected_refusal
from support import BAR, DTYPES, random_complex, reference, rel_l2

import trnplan
from trnplan.backends import get_backend
from trnplan.core.errors import OverBoundError
from trnplan.core.spec import Spec
from trnplan.planner import Planner
from trnplan.planner.registry import solvers

BATCH = 3
#: 1, 2, 3, small primes, powers of two (65536: the large one), mixed radices (12 = 2²·3,
#: 100 = 2²·5², 1000 = 2³·5³), large primes (997, a Bluestein size; 4097 = 17·241, composite
#: with a prime factor past the direct solvers' reach); 1448/2048: dft-gemm's matrix cap in fp64/fp32
SIZES = [1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 31, 64, 97, 100, 128, 997, 1000, 1024, 1448, 2048, 4096, 4097,
         65536]


CASES = [
    *(Case((n,), precision=p) for p in ("fp32", "fp64") for n in SIZES),
    # the real kinds, 1-D: the real solver (its methods × sizes are tests/test_real_nd.py's)
    *(Case((n,), kind, p) for kind in ("r2c", "c2r") for n, p in ((1, "fp32"), (16, "fp32"), (97, "fp32"),
                                                                   (100, "fp64"))),
    # rank ≥ 2: the nd solver
    Case((4, 6), batch=2), Case((6, 10), "r2c", batch=2), Case((3, 4, 5), "c2r", batch=2),
    Case((8, 8), precision="fp64", batch=2),
    # cores > 1: the multicore solver
    Case((64,), cores=2), Case((97,), precision="fp64", cores=2), Case((16,), "r2c", cores=2),
    Case((4, 6), cores=2, batch=2),
    # precision="auto": the precision solver
    Case((64,), precision="auto"), Case((97,), precision="auto"), Case((6, 10), "r2c", precision="auto", batch=2),
]


def test_every_registered_solver_has_a_row():
    missing = [s.name for s in solvers() if s.name not in ROWS]
    assert not missing, f"solvers without an applicability row in tests/applicability.py: {missing}"
    # the table is no tautology: on plain 1-D c2c fp32 it rules some solvers in and some out
    assert "native" in applying(Case((97,))) and "stockham" not in applying(Case((97,)))


# ---------------------------------------------------------------------------- the table, both sides
@pytest.mark.parametrize("case", CASES, ids=str)
def test_each_solver_applies_exactly_where_the_table_says(case):
    """For every registered solver, a forced search of ``case`` plans (rooted at that solver)
    where the table says it applies, and refuses with the table's reason where it does not. One
    planner per case: the "Solvers that apply here" listing each refusal builds is memoised."""
    planner = Planner(get_backend("cpu"))
    problem = case.problem()
    wrong = []
    for solver in solvers():
        want = expected_refusal(solver, case)
        try:
            node, _ = planner.search(problem, Spec(name=solver.name))
        except trnplan.PlanningError as exc:
            message = str(exc)
            if want is None or f"{solver.name}: " not in message or want not in message:
                wrong.append(f"{solver.name} refused ({message}); the table says {want or 'it applies'}")
            elif isinstance(exc, OverBoundError) != (want == OVER):
                wrong.append(f"{solver.name} refused with {type(exc).__name__} ({message}); the table says {want}")
            continue
        if want is not None:
            wrong.append(f"{solver.name} planned {node}; the table says it refuses: {want}")
        elif node.solver != solver.name:
            wrong.append(f"{solver.name} was forced but the root is {node}")
    assert not wrong, "\n".join(wrong)


# ---------------------------------------------------------------------------- correctness where it applies
def _input(case: Case, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if case.kind == "r2c":
        return rng.standard_normal((case.batch, *case.shape))
    shape = (*case.shape[:-1], case.n // 2 + 1) if case.kind == "c2r" else case.shape
    return rng.standard_normal((case.batch, *shape)) + 1j * rng.standard_normal((case.batch, *shape))


def _bar(case: Case) -> float:
    return BAR["fp64" if case.precision == "fp64" else "fp32"]


#: sizes in the grid for one solver's limit: dft-gemm's 2n×2n matrix cap (fp64: n ≤ 1448; fp32:
#: n = 2048 fits but is predicted over the bar). Every solver's applicability is checked there; only
#: that solver is executed there (the others run the same code at 1024 and 4096).
BOUNDARY = {1448: "dft-gemm", 2048: "dft-gemm"}
#: applicable but not executed here: forced Bluestein at 65536 = 2^16 pads to m = 131072 and its
#: first run plans two FFTW_MEASURE leaves of that length per precision (~25 s of CPU, half this
#: module's); a power of two is no Bluestein problem. That it applies there is checked by
#: test_each_solver_applies_exactly_where_the_table_says; its numerics at large n by
#: test_large_prime_through_bluestein_with_gemm_children (65537) and the 4097 and 997 cases here.
NOT_EXECUTED = {("bluestein", 65536)}


#: the host libraries' FFT is the library's own algorithm, not trnplan's: what trnplan adds around
#: it (the call on the user's tensor, the norm, split input) does not depend on n past 1, 2, odd,
#: prime, mixed and a power of two, so they run on these sizes only. Each new size costs pyFFTW an
#: FFTW_MEASURE plan per direction and precision: at 65536, 3.6 s of the 7.7 s pyFFTW took over the
#: whole grid. That they apply on every size is checked by the table test.
HOST_SIZES = {1, 2, 3, 12, 97, 1000, 4096}


def _executed(solver: str, case: Case) -> bool:
    if solver in HOSTS and len(case.shape) == 1 and case.n not in HOST_SIZES:
        return False
    return (solver, case.n) not in NOT_EXECUTED and BOUNDARY.get(case.n, solver) == solver


APPLIES = [(s.name, c) for c in CASES for s in solvers() if expected_refusal(s, c) is None and _executed(s.name, c)]


@pytest.mark.parametrize("solver,case", APPLIES, ids=[f"{s}-{c}" for s, c in APPLIES])
def test_forced_solver_matches_float64_reference(solver, case):
    """The forced plan rooted at ``solver`` meets the mode's bar and its own predicted bound, in
    both directions of a c2c transform (the real kinds have one direction each)."""
    for inverse in ((False, True) if case.kind == "c2c" else (None,)):
        plan = trnplan.plan_many(case.shape, batch=case.batch, kind=case.kind, dtype=case.dtype,
                                 precision=case.precision, cores=case.cores, strategy=solver, inverse=inverse)
        assert plan.tree.solver == solver, plan.tree
        x = _input(case, seed=sum(case.shape))
        p = plan.problem
        y = plan.execute(torch.from_numpy(x).to(p.real_dtype if p.real_input else p.torch_dtype))
        want = reference(x, bool(inverse), kind=case.kind, shape=case.shape)
        assert tuple(y.shape) == want.shape and y.is_complex() == np.iscomplexobj(want)
        err = rel_l2(y, want)
        assert err <= _bar(case), f"{plan.tree}: rel L2 {err:.2e} > {_bar(case):.0e}"
        # the accuracy model's prediction is a bound on what is measured
        assert err <= plan.tree.error, f"{plan.tree}: measured {err:.2e} above predicted {plan.tree.error:.2e}"


# ---------------------------------------------------------------------------- refusals through the API
#: (solver, problem, the reason it gives): a representative refusal of each kind — size rules,
#: the matrix cap, the accuracy bound, kind, rank, cores and precision='auto' — through
#: plan_many, with the "Solvers that apply here" listing checked against the table
REFUSALS = [
    ("stockham", Case((97,), batch=1), "stockham: n=97 is not a power of two"),
    ("butterfly", Case((97,), batch=1), "butterfly: n=97 is not a power of two"),
    ("four-step", Case((97,), batch=1), "four-step: n=97 is not composite (1 or prime)"),
    ("four-step", Case((1,), batch=1), "four-step: n=1 is not composite (1 or prime)"),
    ("dft-gemm", Case((65536,), batch=1), "dft-gemm: n=65536 needs a 65536.0 MiB DFT matrix, over the 64 MiB cap"),
    ("stockham", Case((1000,), precision="fp64"), "stockham: n=1000 is not a power of two"),
    ("butterfly", Case((12,)), "butterfly: n=12 is not a power of two"),
    ("four-step", Case((997,)), "four-step: n=997 is not composite (1 or prime)"),
    ("dft-gemm", Case((4096,)), "dft-gemm: n=4096 needs a 256.0 MiB DFT matrix, over the 64 MiB cap"),
    ("dft-gemm", Case((2048,), precision="fp64"), "dft-gemm: n=2048 needs a 128.0 MiB DFT matrix, over the 64 MiB cap"),
    ("dft-gemm", Case((2048,)), "dft-gemm: predicted error 5.1e-07 exceeds the bound 5e-07"),
    ("real", Case((16,)), "real: real plans r2c/c2r transforms, not c2c"),
    ("nd", Case((64,)), "nd: nd plans transforms of rank ≥ 2; shape (64,) has rank 1"),
    ("stockham", Case((4, 6)), "stockham: stockham plans 1-D transforms; shape (4, 6) has rank 2 (the nd solver plans it)"),
    ("stockham", Case((16,), "r2c"), "stockham: stockham plans c2c transforms, not r2c (the real solver plans it)"),
    ("multicore", Case((64,)), "multicore: cores=1: nothing to split over"),
    ("precision", Case((64,)), "precision: the precision solver plans precision='auto' only (this problem is 'fp32')"),
]


@pytest.mark.parametrize("solver,case,reason", REFUSALS, ids=[f"{s}-{c}" for s, c, _ in REFUSALS])
def test_forced_solver_refuses_with_its_reason(solver, case, reason):
    want = expected_refusal(next(s for s in solvers() if s.name == solver), case)
    assert want is not None and want in reason  # the table agrees
    with pytest.raises(trnplan.PlanningError) as info:
        trnplan.plan_many(case.shape, batch=case.batch, kind=case.kind, dtype=case.dtype, precision=case.precision,
                          cores=case.cores, strategy=solver)
    # which refusal: over the bound is an OverBoundError, every other refusal a plain PlanningError;
    # the forced solver's candidate carries the verdict and the reason
    assert type(info.value) is (OverBoundError if want == OVER else trnplan.PlanningError), repr(info.value)
    (candidate,) = [c for c in info.value.candidates if c.solver == solver]
    assert candidate.verdict == ("over the accuracy bound" if want == OVER else "not applicable"), candidate
    assert reason.split(": ", 1)[1] in candidate.reason, candidate
    message, p = str(info.value), case.problem()
    assert (f"strategy {solver!r} does not apply to the sub-problem n={p.n} ({'inverse' if p.inverse else 'forward'}, "
            f"batch {p.batch}, {p.precision}): ") in message, message
    assert reason in message, message
    # the listing is the table's: every solver that applies here, and no other
    assert message.rsplit("Solvers that apply here: ", 1)[1].rstrip(")").split(", ") == applying(case), message


def test_multicore_refuses_a_batch_of_one():
    with pytest.raises(trnplan.PlanningError, match="multicore: batch 1: one transform is not split into shards"):
        trnplan.plan_many(64, batch=1, cores=2, strategy="multicore")


# ---------------------------------------------------------------------------- the root's scaling
#: one solver of each root kind: a library called on the user's tensor with the user's norm
#: (native, the host libraries), and split-tensor trees scaled by the plan module
ROOTS = ["native", *HOSTS, "dft-gemm", "stockham", "four-step", "bluestein"]


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("inverse", [False, True], ids=["fwd", "inv"])
@pytest.mark.parametrize("solver", ROOTS)
def test_root_scaling_norms_and_directions(solver, inverse, norm, precision):
    n = 12 if solver != "stockham" else 16
    plan = trnplan.plan_many(n, batch=BATCH, strategy=solver, dtype=DTYPES[precision], inverse=inverse, norm=norm)
    x = random_complex((BATCH, n), seed=n)
    assert rel_l2(plan(torch.from_numpy(x).to(DTYPES[precision])), reference(x, inverse, norm)) <= BAR[precision]


# ---------------------------------------------------------------------------- round trips, chosen plans, forced trees
@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("n", [16, 97, 4096])
def test_inverse_of_forward_is_identity(n, precision):
    fwd = trnplan.plan_many(n, batch=BATCH, dtype=DTYPES[precision])
    inv = trnplan.plan_many(n, batch=BATCH, dtype=DTYPES[precision], inverse=True)
    x = random_complex((BATCH, n), seed=7)
    assert rel_l2(inv(fwd(torch.from_numpy(x).to(DTYPES[precision]))), x) <= BAR[precision]


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


#: deep forced GEMM trees: the model predicts up to 5.2e-7 for the deepest (Bluestein over
#: four-step over dft-gemm), just over fp32's default bar, so they are planned with tol=TREE_TOL
#: and each measured error is checked against that plan's own bound and its prediction
TREE_TOL = 2 * BAR["fp32"]


@pytest.mark.parametrize("spec,n", [
    ("(four-step 4096=64x64 (dft-gemm) (dft-gemm))", 4096),
    ("(four-step 4097=17x241 (dft-gemm) (bluestein (stockham) (butterfly)))", 4097),
    ("(four-step 8192 (four-step (stockham) (butterfly)) (dft-gemm))", 8192),
    ("(bluestein 997 m=2187 (four-step 2187=27x81 (dft-gemm) (dft-gemm)) (four-step 2187=27x81 (dft-gemm) (dft-gemm)))", 997),
    ("(stockham 1024=2x8x8x8)", 1024),
])
def test_forced_trees_without_native(spec, n):
    for inverse in (False, True):
        p = trnplan.plan_many(n, batch=2, strategy=spec, inverse=inverse, tol=TREE_TOL)
        assert "native" not in str(p.tree)
        x = random_complex((2, n), seed=5)
        err = rel_l2(p(torch.from_numpy(x).to(torch.complex64)), reference(x, inverse))
        assert err <= p.tol and err <= p.tree.error, f"{p.tree}: {err:.2e}"
