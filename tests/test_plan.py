"""Plan.execute's contract, the in-process plan cache, explain(), and autograd through plans."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from support import BAR, random_complex, reference, rel_l2

import trnplan
from trnplan.core.node import PlanNode


def c64(x):
    return torch.from_numpy(x).to(torch.complex64)


def test_quickstart_shape_and_call_forms():
    plan = trnplan.plan_many((4096,), batch=64)
    x = random_complex((64, 4096))
    y1, y2 = plan.execute(c64(x)), plan(c64(x))
    assert torch.equal(y1, y2)
    assert rel_l2(y1, reference(x, False)) <= BAR["fp32"]
    inv = trnplan.plan_many(4096, batch=64, inverse=True)
    assert rel_l2(inv(y1), x) <= BAR["fp32"]


@pytest.mark.parametrize("strategy", [None, "dft-gemm", "stockham", "four-step"])
@pytest.mark.parametrize("leading", [(8, 8), (64,), (2, 4, 8)])
def test_leading_dimensions_multiply_to_batch(leading, strategy):
    plan = trnplan.plan_many(64, batch=64, strategy=strategy)
    x = random_complex((*leading, 64))
    y = plan(c64(x))
    assert y.shape == x.shape
    assert rel_l2(y, reference(x, False)) <= BAR["fp32"]


def test_one_dimensional_input_for_batch_one_and_n_one():
    x = random_complex((17,))
    assert rel_l2(trnplan.plan_many(17)(c64(x)), np.fft.fft(x)) <= BAR["fp32"]
    for strategy in trnplan.solver_names():
        try:
            plan = trnplan.plan_many(1, batch=5, strategy=strategy)
        except trnplan.PlanningError:
            continue  # four-step needs a composite n
        x1 = random_complex((5, 1))
        assert rel_l2(plan(c64(x1)), x1) <= BAR["fp32"]  # a length-1 DFT is the identity


@pytest.mark.parametrize("strategy", [None, "dft-gemm", "stockham", "butterfly", "four-step", "bluestein"])
def test_non_contiguous_input(strategy):
    plan = trnplan.plan_many(256, batch=4, strategy=strategy)
    base = random_complex((256, 4))
    xt = c64(base).t()  # (4, 256) transposed view
    assert not xt.is_contiguous()
    assert rel_l2(plan(xt), reference(base.T, False)) <= BAR["fp32"]
    wide = c64(random_complex((4, 512)))
    strided = wide[:, ::2]
    assert rel_l2(plan(strided), reference(strided.numpy(), False)) <= BAR["fp32"]


@pytest.mark.parametrize("strategy", [None, "dft-gemm", "stockham", "butterfly", "four-step", "bluestein"])
def test_pair_input_returns_pair(strategy):
    plan = trnplan.plan_many(64, batch=3, strategy=strategy, norm="ortho")
    x = random_complex((3, 64))
    re = torch.from_numpy(x.real).float()
    im = torch.from_numpy(x.imag).float()
    yr, yi = plan((re, im))
    assert yr.dtype == torch.float32 and yr.shape == (3, 64)
    ref = reference(x, False, "ortho")
    assert rel_l2(yr.numpy() + 1j * yi.numpy(), ref) <= BAR["fp32"]


@pytest.mark.parametrize("strategy", ["native", "dft-gemm", "stockham", "butterfly", "four-step", "bluestein"])
def test_nan_and_inf_propagate_only_within_their_transform(strategy):
    n = 64
    plan = trnplan.plan_many(n, batch=3, strategy=strategy)
    x = random_complex((3, n))
    x[0, 5] = np.nan
    x[1, 7] = np.inf
    y = plan(c64(x)).numpy()
    assert not np.isfinite(y[0]).any()        # a NaN input reaches every output of its transform
    assert not np.isfinite(y[1]).all()        # Inf: Inf or NaN (Inf - Inf) downstream
    assert rel_l2(y[2], np.fft.fft(x[2])) <= BAR["fp32"]  # other transforms untouched


def test_norms_match_torch_fft():
    x = c64(random_complex((2, 100)))
    for norm in ("backward", "ortho", "forward"):
        for inverse in (False, True):
            plan = trnplan.plan_many(100, batch=2, norm=norm, inverse=inverse, strategy="four-step")
            want = (torch.fft.ifft if inverse else torch.fft.fft)(x.to(torch.complex128), norm=norm)
            assert rel_l2(plan(x), want.numpy()) <= BAR["fp32"]


def test_complex128_plan():
    plan = trnplan.plan_many(1000, batch=2, dtype=torch.complex128)
    assert plan.problem.precision == "fp64"
    x = random_complex((2, 1000))
    assert rel_l2(plan(torch.from_numpy(x)), np.fft.fft(x)) <= BAR["fp64"]


def test_in_process_cache_returns_the_same_plan():
    a = trnplan.plan_many(4096, batch=8)
    b = trnplan.plan_many((4096,), batch=8)
    assert a is b
    assert a.cache_hits == 1
    assert "returned from the in-process plan cache 1 time(s)" in a.explain(full=True)
    assert trnplan.plan_many(4096, batch=8, inverse=True) is not a
    assert trnplan.plan_cache_info()["size"] == 2
    trnplan.clear_plan_cache()
    assert trnplan.plan_many(4096, batch=8) is not a


def test_cache_is_bounded(monkeypatch):
    monkeypatch.setenv("TRNPLAN_PLAN_LRU_SIZE", "3")
    plans = [trnplan.plan_many(n) for n in (8, 16, 32, 64)]
    assert trnplan.plan_cache_info() == {"size": 3, "maxsize": 3}
    assert trnplan.plan_many(64) is plans[-1]       # most recent kept
    assert trnplan.plan_many(8) is not plans[0]     # least recent evicted and re-planned


def test_explain_tells_the_story():
    plan = trnplan.plan_many(4096, batch=64)
    text = plan.explain(full=True)
    for needle in ("c2c forward (4096,) × batch 64", "planned now in", "plan tree", "flop", "B ",
                   "predicted", "candidates at the top level", "chosen", "more expensive", "not applicable",
                   "bluestein", str(plan.tree)):
        assert needle in text, needle
    # every solver appears among the candidates with a verdict
    for name in trnplan.solver_names():
        assert any(line.strip().startswith(name) for line in text.splitlines()), name
    tree_text = trnplan.plan_many(4096, strategy="(four-step 4096=64x64 (dft-gemm) (stockham))").explain(full=True)
    assert "four-step n=4096" in tree_text and "    dft-gemm n=64" in tree_text and "strategy forced" in tree_text


SHORT_CASES = [
    ((4096,), {}),
    ((97,), {"strategy": "bluestein"}),
    ((64, 64, 64), {"kind": "r2c"}),
    ((1000,), {"precision": "auto", "tol": 1e-3}),
    ((4096,), {"strategy": "(four-step 4096=64x64 (four-step 64=8x8 (dft-gemm 8) (dft-gemm 8)) "
                           "(four-step 64=8x8 (dft-gemm 8) (butterfly 8)))"}),
    ((256,), {"cores": 2, "strategy": "multicore"}),
]


@pytest.mark.parametrize("shape, options", SHORT_CASES)
def test_short_explain_fits_a_screen(shape, options):
    """explain()'s default: at most 15 lines of at most 100 columns, with the tree, the predicted
    time, the error bound, why and where the plan came from; full=True has the detail."""
    from trnplan.plan.explain import SHORT_LINES, SHORT_WIDTH

    plan = trnplan.plan_many(shape, batch=4, **options)
    text = plan.explain()
    lines = text.splitlines()
    assert len(lines) <= SHORT_LINES and max(map(len, lines)) <= SHORT_WIDTH, text
    assert lines[0] == f"trnplan plan — {plan.problem.describe()}"
    labels = [line.split()[0] for line in lines[1:] if line.startswith("  ") and not line.startswith("   ")]
    assert labels == ["tree", "time", "error", "why", "from", "runs"], text
    assert f"bound {plan.tol:.0e}" in text and "predicted" in text
    assert lines[-1].startswith("explain(full=True)")
    full = plan.explain(full=True)
    assert "candidates at the top level" in full and "candidates at the top level" not in text
    if len(str(plan.tree)) <= SHORT_WIDTH - 12:
        assert str(plan.tree) in text
    if "strategy" in options:
        assert "the strategy was forced" in text


def test_short_explain_says_why_the_default_was_kept():
    plan = trnplan.plan_many(4096, batch=64, cache=None)
    kept = [c for c in plan.candidates if c.verdict == "within the model's error"]
    text = " ".join(plan.explain().split())  # unwrapped
    if kept:
        assert f"the cheapest other tree, {kept[0].node}, is predicted at" in text
    else:
        assert "the cheapest predicted of" in text


def test_over_bound_candidate_is_reported():
    plan = trnplan.plan_many(1024, batch=1)
    text = plan.explain(full=True)
    assert "dft-gemm" in text
    verdicts = {c.solver: c.verdict for c in plan.candidates}
    # fp32 dft-gemm at n=1024 is predicted under the bound; a tight tol pushes it over
    tight = trnplan.plan_many(1024, batch=1, tol=3e-7)
    assert {c.solver: c.verdict for c in tight.candidates}["dft-gemm"] == "over the accuracy bound"
    assert "exceeds the bound" in tight.explain(full=True)
    assert verdicts["native"] in ("chosen", "more expensive")


def test_tree_prints_and_replays_as_strategy():
    plan = trnplan.plan_many(4097, batch=2, strategy="four-step")
    text = str(plan.tree)
    assert text.startswith("(four-step 4097=")
    again = trnplan.plan_many(4097, batch=2, strategy=text)
    assert str(again.tree) == text
    assert again.tree.digest() == plan.tree.digest()


def test_tree_json_round_trip():
    plan = trnplan.plan_many(997, strategy="(bluestein (four-step) (stockham))")
    back = PlanNode.from_json(plan.tree.to_json())
    assert back == plan.tree and str(back) == str(plan.tree)


def test_concurrent_execute_from_threads():
    plan = trnplan.plan_many(1024, batch=4, strategy="stockham")
    xs = [c64(random_complex((4, 1024), seed=s)) for s in range(8)]
    want = [plan(x) for x in xs]
    got = [None] * len(xs)

    def run(i):
        for _ in range(5):
            got[i] = plan(xs[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(torch.equal(g, w) for g, w in zip(got, want))


def test_concurrent_planning_returns_one_plan():
    results = []
    barrier = threading.Barrier(4)

    def run():
        barrier.wait()
        results.append(trnplan.plan_many(8192, batch=3))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r is results[0] for r in results)


@pytest.mark.parametrize("strategy", ["native", "dft-gemm", "stockham", "butterfly", "four-step", "bluestein"])
def test_gradients_flow_and_match_torch_fft(strategy):
    x = c64(random_complex((2, 64))).requires_grad_(True)
    plan = trnplan.plan_many(64, batch=2, strategy=strategy)
    (plan(x).abs() ** 2).sum().backward()
    x_ref = x.detach().to(torch.complex128).requires_grad_(True)
    (torch.fft.fft(x_ref).abs() ** 2).sum().backward()
    assert rel_l2(x.grad, x_ref.grad.numpy()) <= 10 * BAR["fp32"]  # one forward + one adjoint pass


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("strategy", [None, "dft-gemm", "stockham", "four-step", "bluestein"])
def test_cuda_matches_reference(strategy):
    plan = trnplan.plan_many(1024, batch=8, device="cuda", strategy=strategy)
    x = random_complex((8, 1024))
    y = plan(c64(x).cuda())
    assert y.device.type == "cuda"
    assert rel_l2(y, reference(x, False)) <= BAR["fp32"]
