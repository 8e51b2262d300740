"""The planner, PlanNode, strategy specs, and the cost/accuracy models' basic properties."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
import torch
from support import BAR, random_complex, reference, rel_l2

import trnplan
from trnplan.backends import get_backend
from trnplan.core.problem import Problem
from trnplan.core.spec import Spec, parse_strategy
from trnplan.planner import Planner, solver_names
from trnplan.planner.stockham import default_radices


def test_registry_is_ordered_and_named():
    assert solver_names() == ("native", "scipy", "pyfftw", "mkl-fft", "dft-gemm", "stockham", "butterfly",
                              "four-step", "bluestein", "real", "r2r", "truncated", "conv", "nd", "multicore", "precision")
    assert len(trnplan.planner.registry_digest()) == 16


@pytest.mark.parametrize("n,radices", [(2, (2,)), (4, (4,)), (8, (8,)), (16, (4, 4)), (32, (8, 4)),
                                       (64, (8, 8)), (1024, (8, 8, 4, 4)), (4096, (8, 8, 8, 8)),
                                       (65536, (8, 8, 8, 8, 4, 4))])
def test_stockham_uses_fewest_radix_8_4_2_stages(n, radices):
    assert default_radices(n) == radices
    assert len(radices) == -(-n.bit_length() + 1) // -3 or len(radices) == -(-(n.bit_length() - 1) // 3)


def test_children_come_through_the_planner_and_are_memoised():
    planner = Planner(get_backend("cpu"))
    problem = Problem.create(65536, 1)
    node, _ = planner.search(problem, Spec(name="four-step"))
    first = planner.searches
    planner.search(problem, Spec(name="four-step"))
    assert planner.searches == first  # memo hit
    assert node.solver == "four-step" and len(node.children) == 2
    n1, n2 = node.param("factors")
    assert n1 * n2 == 65536
    assert node.children[0].n == n1 and node.children[0].batch == n2
    assert node.children[1].n == n2 and node.children[1].batch == n1


def test_a_forced_roots_failure_message_is_made_when_read_as_it_would_have_been():
    """The solvers that apply at a failed forced root cost a search each; the message is made when
    read (the drop-in drops most such failures unread), from the planner as it was at the failure."""
    planner = Planner(get_backend("cpu"))
    problem = Problem.create(64, 2, kind="r2c")
    with pytest.raises(trnplan.PlanningError) as info:
        planner.plan(problem, Spec(name="native"))
    searches = planner.searches
    assert searches == 1  # the failed search alone: no search per solver for a message not read yet
    planner.plan(Problem.create(48, 3))  # the planner moves on: the message is still the failure's
    assert planner.searches > searches
    text = str(info.value)
    others = Planner(get_backend("cpu")).applicable(problem)
    assert "real" in others
    assert text.startswith("strategy 'native' does not apply to the sub-problem n=64 (forward, batch 2, fp32)")
    assert text.endswith(f"Solvers that apply here: {', '.join(others)}")
    assert pickle.loads(pickle.dumps(info.value)).args == (text,) == info.value.args


def test_cost_grows_with_batch_and_subtree_totals_add_up():
    planner = Planner(get_backend("cpu"))
    small = planner.plan(Problem.create(1024, 1), Spec(name="stockham"))
    big = planner.plan(Problem.create(1024, 128), Spec(name="stockham"))
    assert big.time_us > small.time_us and big.flops == pytest.approx(128 * small.flops)
    tree = planner.plan(Problem.create(4096, 4), Spec(name="four-step"))
    assert tree.flops > sum(c.flops for c in tree.children)  # own twiddle work on top
    assert tree.time_us > sum(c.time_us for c in tree.children)


def test_neuron_planner_never_uses_a_native_fft_and_its_tree_is_correct_on_the_host():
    """Stand-in for Trainium: plan with the Neuron profile, lower on the CPU, check the numbers."""
    planner = Planner(get_backend("neuron"))
    for n in (64, 1000, 4096, 4097):
        problem = Problem.create(n, 4, device="neuron")
        tree = planner.plan(problem)
        assert "native" not in str(tree)
        module = planner.lower(tree, problem, torch.device("cpu"))
        x = random_complex((4, n), seed=n)
        xt = torch.from_numpy(x).to(torch.complex64)
        yr, yi = module(xt.real.contiguous(), xt.imag.contiguous())
        assert rel_l2(torch.complex(yr, yi), reference(x, False)) <= BAR["fp32"]


def test_tighter_tol_rejects_less_accurate_candidates():
    loose = trnplan.plan_many(997, tol=1e-3)
    tight_candidates = trnplan.plan_many(997, tol=4e-7).candidates
    verdicts = {c.solver: c.verdict for c in tight_candidates}
    assert verdicts["dft-gemm"] == "over the accuracy bound"
    assert loose.tol == 1e-3
    with pytest.raises(trnplan.PlanningError, match="exceeds the bound"):
        trnplan.plan_many(997, tol=1e-9)


def test_spec_round_trip_and_constraints():
    known = solver_names()
    spec = parse_strategy("(four-step 4096=64x64 (dft-gemm 64) _)", known)
    assert spec.name == "four-step" and spec.size == 4096 and spec.factors == (64, 64)
    assert spec.child(0).name == "dft-gemm" and spec.child(1) is None
    assert parse_strategy(str(spec), known) == spec
    plan = trnplan.plan_many(4096, strategy=str(spec))
    assert str(plan.tree).startswith("(four-step 4096=64x64 (dft-gemm 64) (")


def test_bluestein_padded_length_can_be_forced():
    plan = trnplan.plan_many(97, strategy="(bluestein m=256 stockham stockham)")
    assert plan.tree.param("m") == 256
    assert [c.solver for c in plan.tree.children] == ["stockham", "stockham"]
    with pytest.raises(trnplan.PlanningError):
        trnplan.plan_many(97, strategy="(bluestein m=100)")  # m < 2n - 1


def test_leaf_with_child_specs_is_rejected():
    with pytest.raises(trnplan.PlanningError, match="child spec"):
        trnplan.plan_many(64, strategy="(dft-gemm (stockham))")


@pytest.mark.slow
def test_digest_is_stable_across_processes():
    here = Problem.create(4096, 64).digest()
    code = "import trnplan; print(trnplan.Problem.create(4096, 64).digest())"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert here == there


def test_problem_scale_follows_torch_norms():
    cases = {("backward", False): 1.0, ("backward", True): 1 / 64, ("forward", False): 1 / 64,
             ("forward", True): 1.0, ("ortho", False): 1 / 8, ("ortho", True): 1 / 8}
    for (norm, inverse), scale in cases.items():
        assert Problem.create(64, norm=norm, inverse=inverse).scale == pytest.approx(scale)
    child = Problem.create(64, norm="ortho", inverse=True).unscaled(8, 8, True)
    assert child.scale == 1.0 and child.shape == (8,) and child.batch == 8


def test_problem_normalises_user_arguments():
    p = Problem.create([16], 2, dtype=torch.complex128, device=torch.device("cpu"))
    assert p.shape == (16,) and p.precision == "fp64" and p.dtype == "complex128" and p.device == "cpu"
    assert Problem.create(16, device="cuda:1").device == "cuda"
    assert p.describe().startswith("c2c forward (16,) × batch 2, complex128 fp64")


# ---------------------------------------------------------------------------- the root's I/O
def test_a_library_leaf_at_the_root_is_not_charged_for_packing():
    """Plan.execute calls a root library leaf on the user's tensor (no split, no pack); inside a
    tree the same leaf packs split input first. A split-tensor root pays one complex pack."""
    from trnplan.planner import registry
    from trnplan.planner.solver import root_output

    solvers = {s.name: s for s in registry.solvers()}
    problem = Problem.create(4096, 8)
    here, elsewhere = Planner(get_backend("cpu")), Planner(get_backend("cpu"))
    here.root, elsewhere.root = problem, Problem.create(7, 1)  # elsewhere: a sub-problem of another plan
    at_root, inner = solvers["native"].plan(problem, here, None), solvers["native"].plan(problem, elsewhere, None)
    assert (at_root.launches, at_root.bytes) == (0, 0)
    assert (inner.launches, inner.bytes) == (2, 4 * 4096 * 8 * 4)  # read re and im, write complex
    assert at_root.time_us < inner.time_us
    split_root, split_inner = (solvers["stockham"].plan(problem, p, None) for p in (here, elsewhere))
    assert split_root.bytes - split_inner.bytes == root_output(problem).bytes == 4 * 4096 * 8 * 4
    assert split_root.launches - split_inner.launches == 1
    # r2c: its complex output is packed; c2r: a real output needs no pack
    assert root_output(Problem.create(64, 2, kind="r2c")).bytes == 4 * 33 * 2 * 4
    assert root_output(Problem.create(64, 2, kind="c2r")).bytes == 0


def test_auto_modes_at_the_root_are_priced_as_the_root():
    planner = Planner(get_backend("cpu"))
    auto = Problem.create(1024, 4, precision="auto")
    node = planner.plan(auto)
    assert planner.at_root(auto) and planner.at_root(Problem.create(1024, 4, precision="fp32"))
    assert not planner.at_root(Problem.create(1024, 8, precision="fp32"))
    assert node.solver == "precision"


#: the race against cuFFT on an H200 (docs/gpu.md, bench/gpu_check.sh, torch 2.11.0+cu130): µs per
#: batched c2c complex64 transform of 2^24 points; cuFFT through torch.fft, and the tf32 (dft-gemm 64)
#: tree the uncalibrated model picked for auto tol 1e-2 at n = 64
H200_CUFFT_US = {64: 85, 256: 86, 1024: 82, 4096: 89, 16384: 131, 65536: 182}
H200_TF32_DFT_GEMM_64_US = 315


@pytest.mark.parametrize("n", sorted(H200_CUFFT_US))
def test_cuda_profile_prices_cufft_at_the_root_as_the_h200_measured_it(n):
    """The CUDA cost model against the one GPU run on record: cuFFT at the root within 1.5× of its
    measured time (within 2×: one rate for a library that is memory-bound at small n; it priced four passes where cuFFT makes one: 344 µs for 85 at n = 64), and the
    auto planner at tol 1e-2 picks cuFFT, the measured winner, at every size, n = 64 included
    (where it picked the tf32 GEMM, 3.7× slower). Planned for CUDA without a GPU (no probe run)."""
    from trnplan.backends.base import PrecisionProbe
    from trnplan.backends.cuda import CUDABackend

    exact = PrecisionProbe(True, "fp32", "recorded on the H200 (docs/gpu.md)")
    b = 2**24 // n
    planner = Planner(CUDABackend(), probe=exact)
    cufft = planner.plan(Problem.create(n, b, device="cuda"), Spec(name="native"))
    assert 1 / 2 <= cufft.time_us / H200_CUFFT_US[n] <= 2
    pick = Planner(CUDABackend(), probe=exact, tol=1e-2).plan(Problem.create(n, b, device="cuda", precision="auto"))
    assert str(pick) == f"(precision {n} mode=fp32 (native {n}))"
    if n == 64:
        tf32 = Planner(CUDABackend(), probe=exact).plan(Problem.create(n, b, device="cuda", precision="tf32"),
                                                        Spec(name="dft-gemm"))
        assert 1 / 1.5 <= tf32.time_us / H200_TF32_DFT_GEMM_64_US <= 1.5


@pytest.mark.parametrize("problem, expected", [
    (Problem((1024,), 4), "(native 1024)"),
    (Problem((1024,), 4, kind="r2c"), "(real 1024 method=lib)"),
    (Problem((64, 64), 2, kind="c2r", inverse=True), "(nd 4096=64x64 kind=c2r method=lib inv)"),
    (Problem((8, 8, 8), 1, dtype="complex128", precision="fp64"), "(nd 512=8x8x8 method=lib)"),
])
def test_default_node_is_the_devices_own_fft(problem, expected):
    """The default every measured plan is timed against: torch.fft's own call for the problem."""
    assert str(Planner(get_backend("cpu")).default_node(problem)) == expected


@pytest.mark.parametrize("problem", [Problem((997,), 1, precision="bf16"), Problem((1024,), 4, device="meta")])
def test_default_node_is_none_where_the_device_has_no_fft(problem):
    """bf16 has no torch.fft mode; a meta/xla/neuron tensor has no FFT at all (GEMM trees only)."""
    assert Planner(get_backend(problem.device)).default_node(problem) is None
