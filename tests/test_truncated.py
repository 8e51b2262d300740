"""Truncated (pruned) real transforms (``modes=``), trnplan.fft.rfftn_truncated / irfftn_truncated and
trnplan.nn.SpectralConv, against numpy.fft in float64 (rfftn then the kept block cut out; the block
zero-filled then irfftn) with the mode's bar and each plan's own predicted error."""

from __future__ import annotations

import pickle
import threading

import attrs
import numpy as np
import pytest
import torch
from support import rel_l2

import trnplan
from trnplan import fft as tfft
from trnplan.backends import get_backend
from trnplan.backends.cpu import CPU_PROFILE
from trnplan.core.accuracy import DEFAULT_TOL, measure_error
from trnplan.core.errors import PlanningError
from trnplan.core.problem import Problem
from trnplan.core.spec import parse_strategy
from trnplan.fft import _truncated
from trnplan.nn import SpectralConv
from trnplan.plan.memo import PLANS
from trnplan.planner import registry
from trnplan.planner.planner import Planner
from trnplan.planner.truncated import Truncated

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


@pytest.mark.parametrize("norm", ["backward", "ortho"])
def test_the_pruned_inverse_folds_the_norm_into_its_last_gemm(norm):
    """The pruned c2r's last pass is a constant GEMM: the plan's norm scale is folded into its matrix
    (no separate pass over the whole real output), and the result stays within the bar of float64."""
    plan = trnplan.plan_many((32, 64), batch=4, kind="c2r", modes=(4, 8), norm=norm, cache=None,
                             strategy="(truncated method=gemm)")
    assert plan.problem.scale != 1.0 and plan.module.scale == 1.0
    err = measure_error(plan)
    assert err <= DEFAULT_TOL["fp32"] and err <= plan.tree.error, err
    forward = trnplan.plan_many((32, 64), batch=4, kind="r2c", modes=(4, 8), norm="forward", cache=None,
                                strategy="(truncated method=gemm)")
    assert forward.module.scale == forward.problem.scale != 1.0  # the forward's last pass is not the real GEMM


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


# ------------------------------------------------------------------ the estimate's pick (issue 30 item 1)
# the FNO shapes of issue 30 (batch × channels 32 × 64 = 2048): planned only (no data), so planning
# them whole costs nothing; executed at a small batch below
FNO = [((1024,), (16,)), ((1024,), (64,)), ((128, 128), (16, 16)), ((64, 64, 64), (12, 12, 12))]


def _library_leaf(shape) -> str:
    return "real" if len(shape) == 1 else "nd"


#: the estimate's pick per FNO shape and kind: the pruned GEMMs for the N-D inverses (measured
#: 0.08–0.59× the library's zero-fill + irfftn on 15 shapes, docs/benchmarks.md), the library
#: transform and the cut elsewhere (where the GEMMs measured 0.8–3.6× it or were predicted too close).
#: At 2 threads the library is priced 1.74× faster (leafcost.THREAD_EXPONENT) and the GEMM rate is
#: the one-thread median: the 3-D inverse (predicted 0.54×) keeps the library there
FNO_PICKS = {((1024,), "r2c"): "full", ((1024,), "c2r"): "full", ((128, 128), "r2c"): "full",
             ((128, 128), "c2r"): "gemm", ((64, 64, 64), "r2c"): "full", ((64, 64, 64), "c2r"): "gemm"}
FNO_PICKS_2_THREADS = {**FNO_PICKS, ((64, 64, 64), "c2r"): "full"}


@pytest.mark.parametrize("shape,modes", FNO, ids=lambda v: "x".join(map(str, v)))
@pytest.mark.parametrize("kind", ["r2c", "c2r"])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_estimate_picks_the_pruned_gemms_only_for_the_nd_inverses(shape, modes, kind, threads):
    """The estimate's margin rule holds for truncated problems too: its default is the library's
    whole transform then the cut (what the user writes with torch.fft); the pruned GEMMs replace it
    where predicted below exp(−2σ) of its time, σ the truncated solver's own, measured for that
    comparison on the CPU (Truncated.MARGIN_SIGMAS): the N-D inverses, which skip torch.fft's slow
    N-D c2r (nd.C2R_ND_FACTOR); the 1-D transforms and the forwards keep the library."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        plan = trnplan.plan_many(shape, batch=2048, kind=kind, modes=modes, cache=None)
    finally:
        torch.set_num_threads(before)
    tree = plan.tree
    method = (FNO_PICKS if threads == 1 else FNO_PICKS_2_THREADS)[(shape, kind)]
    assert (tree.solver, tree.param("method")) == ("truncated", method), [c.reason for c in plan.candidates if c.reason]
    if method == "full":
        (child,) = tree.children
        assert (child.solver, child.param("method")) == (_library_leaf(shape), "lib")
    chosen = next(c for c in plan.candidates if c.solver == "truncated")  # its row says why: the margin rule
    assert str(chosen.node) == str(tree) and "margin rule" in chosen.reason
    if method == "gemm":
        assert f"sigma {Truncated.MARGIN_SIGMAS['cpu']:.2f}, truncated's methods compared" in chosen.reason


def test_a_forced_full_over_another_library_keeps_the_profiles_margin():
    """The truncated solver's own sigma is for method=gemm against method=full only: the full
    transform over another library (pyFFTW, its leaf priced from fewer measurements) is held to the
    CPU profile's sigma, like that library's plain transform."""
    planner = Planner(get_backend("cpu"))
    problem = Problem.create((64, 64, 64), 8, kind="c2r", modes=(12, 12, 12))
    gemm, full, other = (planner.plan(problem, parse_strategy(text, [s.name for s in planner.solvers])) for text in (
        "(truncated method=gemm)", "(truncated method=full (nd method=lib))", "(truncated method=full (pyfftw))"))
    assert planner.margin_sigma(gemm, full)[0] == Truncated.MARGIN_SIGMAS["cpu"]
    assert planner.margin_sigma(other, full)[0] == CPU_PROFILE.sigma


@pytest.mark.parametrize("shape,modes,batch", [((1024,), (16,), 8), ((128, 128), (16, 16), 2), ((64, 64, 64), (12, 12, 12), 1)],
                         ids=["1d", "2d", "3d"])
def test_the_estimate_pick_runs_the_library_call_on_the_user_tensor(shape, modes, batch):
    """At the root, method=full over a library leaf is torch.fft's own call and the cut (or the fill
    and the call): the same bits as rfftn + slice (zero-fill + irfftn) written by hand, and within the
    fp32 bar of float64."""
    dims = tuple(range(-len(shape), 0))
    fwd = trnplan.plan_many(shape, batch=batch, kind="r2c", modes=modes, cache=None)
    inv = trnplan.plan_many(shape, batch=batch, kind="c2r", modes=modes, cache=None)
    for plan in (fwd, inv):
        assert str(plan.tree.children[0]).startswith(f"({_library_leaf(shape)} ")
        err = measure_error(plan)
        assert err <= DEFAULT_TOL["fp32"] and err <= plan.tree.error, (plan.tree, err)
    x = torch.randn(batch, *shape)
    full = torch.fft.rfftn(x, dim=dims)[..., : modes[-1]]
    for axis, m in enumerate(modes[:-1]):
        full = torch.cat([full.narrow(axis + 1, 0, m), full.narrow(axis + 1, shape[axis] - m, m)], axis + 1)
    y = fwd.execute(x)
    assert torch.equal(y, full)
    z = torch.zeros(batch, *shape[:-1], shape[-1] // 2 + 1, dtype=y.dtype)  # the zero-fill, by hand
    rows = [np.r_[0:m, n - m:n] for n, m in zip(shape[:-1], modes[:-1])]  # low then high rows per non-last axis
    z[(slice(None), *(torch.as_tensor(i) for i in np.ix_(*rows)), slice(0, modes[-1]))] = y
    assert torch.equal(inv.execute(y), torch.fft.irfftn(z, s=shape, dim=dims))


@pytest.fixture
def profile_threads():
    """torch at the CPU profile's thread count, where its library leaves are priced as measured."""
    before = torch.get_num_threads()
    torch.set_num_threads(CPU_PROFILE.threads)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("shape,modes,kind,method", [
    ((128, 128), (16, 16), "c2r", "gemm"), ((64, 64, 64), (12, 12, 12), "c2r", "gemm"),
    ((1024,), (64,), "r2c", "full"), ((1024,), (64,), "c2r", "full")], ids=["2d-c2r", "3d-c2r", "1d64-r2c", "1d64-c2r"])
def test_the_gemm_price_ranks_the_methods_as_measured(profile_threads, shape, modes, kind, method):
    """The cost model alone (margin off, torch.fft the only library) ranks the pruned GEMMs below the
    library transform where bench/spectral.py measured them faster (the N-D inverses: 0.4–0.8× the
    library's zero-fill + irfftn at 128² and 64³) and above it where the GEMM does more work than an
    FFT (64 of 513 bins of n=1024: 2·n·2m multiply-adds per row, measured 3× rfft's time). Under the
    CPU profile's first GEMM rate (50 GFLOP/s, 3.2× below what sgemm runs here) the N-D inverses
    ranked the other way (8.9 ms predicted for the GEMMs against 5.0 ms for the library at 128²)."""
    libraries = {"pyfftw", "scipy", "mkl-fft"}
    planner = Planner(get_backend("cpu"), solvers=[s for s in registry.solvers() if s.name not in libraries],
                      profile=attrs.evolve(CPU_PROFILE, sigma=0.0))
    planner.MARGIN_SIGMAS = 0.0  # the margin off (the truncated solver states its own sigma): the model's ranking alone
    node = planner.plan(Problem.create(shape, 2048, kind=kind, modes=modes))
    assert (node.solver, node.param("method")) == ("truncated", method)


# ------------------------------------------------------------------ the lowest modes only on non-last axes (low=)
LOW_CASES = [((30, 24), (5, 7), (0,)), ((16, 12, 10), (3, 4, 6), (1,)), ((16, 12, 10), (16, 12, 6), (0, 1))]


@pytest.mark.parametrize("shape,modes,low", LOW_CASES, ids=lambda v: "x".join(map(str, v)))
@pytest.mark.parametrize("method", ["gemm", "full"])
def test_low_axes_forced_methods_match_numpy(shape, modes, low, method):
    for kind in ("r2c", "c2r"):
        for dtype in (torch.complex64, torch.complex128):
            plan = trnplan.plan_many(shape, batch=3, kind=kind, modes=modes, low=low, dtype=dtype,
                                     strategy=f"(truncated method={method})")
            kept = tuple(m if a in low or a == len(shape) - 1 else 2 * m for a, m in enumerate(modes))
            assert (plan.problem.out_shape if kind == "r2c" else plan.problem.in_shape) == kept
            err = measure_error(plan)
            bar = DEFAULT_TOL["fp64" if dtype == torch.complex128 else "fp32"]
            assert err <= bar and err <= plan.tree.error, (kind, dtype, err, plan.tree.error)


def test_low_axes_through_the_functions_against_numpy_by_hand():
    x = torch.randn(2, 20, 3, 18, dtype=torch.float64)
    y = tfft.rfftn_truncated(x, modes=(4, 5), dim=(1, 3), low=(1,))  # dim 1 keeps frequencies 0..3 only
    full = np.fft.rfftn(x.numpy(), axes=(1, 3))
    assert y.shape == (2, 4, 3, 5) and rel_l2(y, full[:, :4, :, :5]) <= DEFAULT_TOL["fp64"]
    fill = np.zeros((2, 20, 3, 10), complex)
    fill[:, :4, :, :5] = y.numpy()
    z = tfft.irfftn_truncated(y, s=(20, 18), dim=(1, 3), low=True)  # modes read from the sizes: (4, 5)
    assert rel_l2(z, np.fft.irfftn(fill, s=(20, 18), axes=(1, 3))) <= DEFAULT_TOL["fp64"]
    x3 = torch.randn(2, 8, 12, 10)
    y3 = tfft.rfftn_truncated(x3, modes=(3, 2, 4), low=(-2,))  # the middle axis low, the first FNO
    f3 = np.fft.rfftn(x3.double().numpy(), axes=(1, 2, 3))
    ref = np.concatenate([f3[:, :3], f3[:, -3:]], axis=1)[:, :, :2, :4]
    assert y3.shape == (2, 6, 2, 4) and rel_l2(y3, ref) <= DEFAULT_TOL["fp32"]
    xg = torch.randn(2, 12, 10, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: tfft.rfftn_truncated(t, (3, 4), low=True), (xg,))
    yg = torch.randn(2, 3, 4, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: tfft.irfftn_truncated(t, s=(12, 10), low=True), (yg,))


def test_low_axes_refusals_say_which():
    with pytest.raises(ValueError, match="pass modes= too"):
        Problem.create((16, 16), kind="r2c", low=(0,))
    with pytest.raises(ValueError, match="distinct non-last axes"):
        Problem.create((16, 16), kind="r2c", modes=(4, 4), low=(1,))
    with pytest.raises(ValueError, match=r"modes\[0\]=17 keeps the lowest 17 frequencies of an axis of length 16"):
        Problem.create((16, 16), kind="r2c", modes=(17, 4), low=(0,))
    with pytest.raises(RuntimeError, match="other than the last"):
        tfft.rfftn_truncated(torch.randn(2, 16, 16), modes=(4, 4), low=(-1,))
    with pytest.raises(PlanningError, match="keeps the lowest modes only on axes 1 but the problem on 0"):
        trnplan.plan_many((16, 12, 10), kind="r2c", modes=(3, 4, 6), low=(0,), strategy="(truncated low=1)")
    fno = Problem.create((16, 16), kind="r2c", modes=(4, 4))
    assert "low" not in fno.to_dict() and fno.digest() != Problem.create((16, 16), kind="r2c", modes=(4, 4),
                                                                          low=(0,)).digest()


def test_low_axes_wisdom_and_pickle(tmp_path):
    cache = trnplan.PlanCache(tmp_path / "c")
    first = trnplan.plan_many((32, 24), batch=3, kind="c2r", modes=(5, 7), low=(0,), cache=cache)
    assert "low=0" in str(first.tree)
    trnplan.clear_plan_cache()
    again = trnplan.plan_many((32, 24), batch=3, kind="c2r", modes=(5, 7), low=(0,), cache=cache)
    assert again.provenance.origin == "wisdom hit" and str(again.tree) == str(first.tree)
    restored = pickle.loads(pickle.dumps(again))
    assert restored.problem == again.problem and str(restored.tree) == str(again.tree)


def test_a_repeated_truncated_call_goes_straight_to_its_plan():
    """rfftn_truncated / irfftn_truncated remember the plan their full path ran on the tensor as given
    (as rfftn does): the next call with the same arguments runs it directly, with the same result;
    a call whose tensor the full path had to resize (``s``) is not remembered."""
    x = torch.randn(4, 16, 12)
    first = tfft.rfftn_truncated(x, (3, 4), low=True)
    key = _truncated._truncated_key("rfftn_truncated", x, (3, 4), None, None, None, True)
    plan = PLANS.by_alias(key)
    assert plan is not None and plan.problem.low == (0,) and plan.problem.modes == (3, 4)
    assert torch.equal(tfft.rfftn_truncated(x, (3, 4), low=True), first)
    back = tfft.irfftn_truncated(first, s=(16, 12), low=True)
    assert PLANS.by_alias(_truncated._truncated_key("irfftn_truncated", first, None, (16, 12), None, None, True)) is not None
    assert torch.equal(tfft.irfftn_truncated(first, s=(16, 12), low=True), back)
    tfft.rfftn_truncated(x, (3, 4), s=(16, 14))
    assert PLANS.by_alias(_truncated._truncated_key("rfftn_truncated", x, (3, 4), (16, 14), None, None, None)) is None


# ------------------------------------------------------------------ method=full's c2r: the kept zero spectrum
def _zero_filled(y: np.ndarray, shape, modes, low) -> np.ndarray:
    """The kept spectrum ``y`` (batch, *kept) zero-filled by hand in complex128: low then high rows."""
    whole = np.zeros((y.shape[0], *shape[:-1], shape[-1] // 2 + 1), complex)
    rows = [np.r_[0:m] if a in low else np.r_[0:m, n - m:n] for a, (n, m) in enumerate(zip(shape[:-1], modes[:-1]))]
    whole[(slice(None), *np.ix_(*rows, np.r_[0:modes[-1]]))] = y
    return whole


@pytest.mark.parametrize("shape,modes,low", [((64,), (16,), ()), ((30, 24), (5, 7), ()), ((16, 12, 10), (3, 4, 6), (1,))],
                         ids=["1d", "2d", "3d-low"])
def test_the_full_inverse_fills_one_kept_spectrum_per_thread(shape, modes, low):
    """method=full's c2r at the root (torch.fft's irfft/irfftn on the user's tensor) writes the kept
    bins into the calling thread's zero spectrum, made once, instead of a new zero-filled one per
    call: every call (new data each time, another thread's, the first one in inference mode, under
    vmap) within the fp32 bar of numpy's irfftn of the zero-filled spectrum, and each result the
    call's own (the next call does not overwrite it)."""
    plan = trnplan.plan_many(shape, batch=3, kind="c2r", modes=modes, low=low, strategy="(truncated method=full)")
    root = plan.module.root
    root._scratch.clear()
    kept = plan.input_shape
    ys = [torch.randn(kept, dtype=torch.complex128).to(torch.complex64) for _ in range(4)]

    def check(y, z):
        ref = np.fft.irfftn(_zero_filled(y.numpy().astype(complex), shape, modes, low), s=shape,
                            axes=tuple(range(1, len(shape) + 1)))
        assert rel_l2(z, ref) <= DEFAULT_TOL["fp32"], rel_l2(z, ref)

    with torch.inference_mode():  # the kept spectrum made here must take a write outside inference mode
        first = plan.execute(ys[0])
    whole = root._scratch.mine()[0]
    results = [first] + [plan.execute(y) for y in ys[1:]]
    assert root._scratch.mine()[0] is whole  # reused, not made again
    for y, z in zip(ys, results):
        check(y, z)
    other: list = []
    worker = threading.Thread(target=lambda: other.append(plan.execute(ys[1])))
    worker.start()
    worker.join()
    check(ys[1], other[0])
    assert len(root._scratch) == 2 and root._scratch.mine()[0] is whole
    if len(shape) == 1:  # torch.fft's leaf (mkl-fft's, the N-D ones here, takes no vmap): the new-tensor fill
        batched = torch.func.vmap(plan.execute)(torch.stack(ys[:2]))
        check(ys[0], batched[0])
        check(ys[1], batched[1])
