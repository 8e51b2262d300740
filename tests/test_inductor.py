"""compile="inductor": a plan compiled by torch.compile in the running process (issue 9).

The fused path for devices where AOTInductor packages cannot be loaded (CUDA on torch 2.11,
docs/gpu.md). Here it runs on the CPU, where Inductor generates C++ kernels; each real compile
takes seconds, so few plans are compiled.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support import BAR, random_complex, reference, rel_l2

import trnplan
from trnplan.backends import artifacts, get_backend
from trnplan.cache import PlanCache
from trnplan.tools.precompile import ManifestError, validate_entry


@pytest.mark.slow
def test_a_compiled_gemm_tree_matches_numpy_and_says_how_it_runs(tmp_path):
    cache = PlanCache(tmp_path / "c")
    strategy = "(four-step 4096=64x64 (dft-gemm) (dft-gemm))"
    plan = trnplan.plan_many(4096, batch=3, strategy=strategy, compile="inductor", cache=cache)
    assert isinstance(plan._runner, artifacts.InductorRunner)
    assert plan.provenance.compile_mode == "inductor" and plan.provenance.compile_s > 0
    text = plan.explain(full=True)
    assert "inductor: torch.compile'd in this process in" in text and "kept in no plan cache" in text
    x = random_complex((3, 4096), seed=1)
    y = plan(torch.from_numpy(x.astype(np.complex64)))
    assert rel_l2(y, reference(x, False)) <= BAR["fp32"]
    eager = trnplan.plan_many(4096, batch=3, strategy=strategy, compile="eager", cache=None)
    assert rel_l2(y, eager(torch.from_numpy(x.astype(np.complex64))).numpy()) <= BAR["fp32"]
    # a pair and a non-contiguous input take the same compiled code (made contiguous first)
    xt = torch.from_numpy(np.ascontiguousarray(x.T).astype(np.complex64)).T
    assert not xt.is_contiguous()
    assert rel_l2(plan(xt), reference(x, False)) <= BAR["fp32"]
    re, im = plan((xt.real, xt.imag))
    assert rel_l2(torch.complex(re, im), reference(x, False)) <= BAR["fp32"]
    # nothing of it is kept on disk: no artifact, and the wisdom entry names none
    assert not cache.keys("artifact:")
    assert cache.get_wisdom(plan.provenance.wisdom_key)["artifacts"] == {}


@pytest.mark.slow
def test_a_compiled_bf16x3_real_plan_meets_its_bar_and_keeps_autograd():
    plan = trnplan.plan_many(256, batch=2, kind="r2c", precision="bf16x3", compile="inductor", cache=None)
    assert isinstance(plan._runner, artifacts.InductorRunner)
    x = torch.randn(2, 256, dtype=torch.float32)
    y = plan(x)
    assert rel_l2(y, np.fft.rfft(x.double().numpy())) <= 1e-5  # bf16x3's bar
    # a gradient bypasses the compiled runner (which carries no autograd) and runs the eager module
    xg = x.clone().requires_grad_(True)
    plan(xg).abs().pow(2).sum().backward()
    xd = x.double().requires_grad_(True)
    torch.fft.rfft(xd).abs().pow(2).sum().backward()
    assert rel_l2(xg.grad, xd.grad.numpy()) <= 1e-4


def test_wisdom_only_refuses_to_compile_in_process(monkeypatch):
    monkeypatch.setenv("TRNPLAN_WISDOM_ONLY", "1")
    with pytest.raises(trnplan.WisdomMiss, match=r"never compiles, and compile='inductor' compiles in the running "
                                                 r"process .* use compile='aot'"):
        trnplan.plan_many(64, compile="inductor")


def test_wisdom_only_refuses_inductor_even_for_a_stored_plan(tmp_path, monkeypatch):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(64, batch=2, compile="eager", cache=cache)
    trnplan.clear_plan_cache()
    with pytest.raises(trnplan.WisdomMiss, match="compiles in the running process"):
        trnplan.plan_many(64, batch=2, compile="inductor", cache=cache, effort="wisdom_only")


def test_a_failed_compile_runs_eagerly_with_a_warning(monkeypatch):
    def broken(self, module, example, mode):
        raise RuntimeError("inductor is broken here")

    monkeypatch.setattr(type(get_backend("cpu")), "jit_compile", broken)
    with pytest.warns(UserWarning, match=r"could not compile .* with inductor \(RuntimeError: inductor is broken here\)"):
        plan = trnplan.plan_many(64, batch=2, compile="inductor", cache=None)
    assert plan._runner is None and plan.provenance.compile_mode == "eager"
    assert "inductor failed to compile (RuntimeError); eager instead" in plan.explain(full=True)
    x = random_complex((2, 64), seed=3)
    assert rel_l2(plan(torch.from_numpy(x.astype(np.complex64))), reference(x, False)) <= BAR["fp32"]


def test_the_manifest_refuses_inductor():
    with pytest.raises(ManifestError, match="compile = 'inductor' compiles in the running process .* nothing to "
                                            "precompile; use compile = 'aot'"):
        validate_entry({"shape": [64], "compile": "inductor"})


def test_neuron_has_no_inductor_mode():
    with pytest.raises(ValueError, match=r"compile='inductor' is not available on neuron; use one of auto, eager, neuron"):
        get_backend("neuron").resolve_compile("inductor")


def test_the_inductor_mode_setting_is_checked(monkeypatch):
    from trnplan.core import config

    monkeypatch.setenv("TRNPLAN_INDUCTOR_MODE", "max-autotune-no-cudagraphs")
    assert config.inductor_mode() == "max-autotune-no-cudagraphs"
    monkeypatch.setenv("TRNPLAN_INDUCTOR_MODE", "default")
    assert config.inductor_mode() is None
    monkeypatch.setenv("TRNPLAN_INDUCTOR_MODE", "fastest")
    with pytest.raises(ValueError, match=r"TRNPLAN_INDUCTOR_MODE='fastest' must be one of default, reduce-overhead"):
        config.inductor_mode()


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "bf16x3"])
def test_compiled_bf16_modes_round_as_eager_does(precision):
    """Inductor keeps a fused kernel's values in fp32 across .to(bfloat16) unless told to emulate
    the casts; then the bf16 slices are not rounded (bf16x3's residual is zero) and the plan does
    not compute in the mode asked for. Compiled and eager must give the same error, at the mode's level."""
    strategy = "(four-step 4096=64x64 (dft-gemm) (dft-gemm))"
    x = random_complex((2, 4096), seed=11)
    xt = torch.from_numpy(x.astype(np.complex64))
    errs = {}
    for mode in ("eager", "inductor"):
        plan = trnplan.plan_many(4096, batch=2, precision=precision, strategy=strategy, compile=mode, cache=None)
        assert (plan._runner is not None) == (mode == "inductor")
        errs[mode] = rel_l2(plan(xt), reference(x, False))
    assert errs["inductor"] == pytest.approx(errs["eager"], rel=0.02)
    assert errs["eager"] > {"bf16": 1e-3, "bf16x3": 1e-6}[precision]  # the mode's own rounding, not fp32's


@pytest.mark.slow
def test_each_plan_compiles_apart_past_dynamos_recompile_limit():
    """Dynamo allows a code object `recompile_limit` compiled graphs; every plan gets its own code
    object, so a process may hold more compiled plans than that (here the limit is lowered to 2).

    The limit is lowered with dynamo's own ``config.patch``: pytest's monkeypatch deletes a
    dynamo config entry when it undoes, and every later compile in the process then failed."""
    with torch._dynamo.config.patch(recompile_limit=2):
        plans = [trnplan.plan_many(n, batch=2, strategy="dft-gemm", compile="inductor", cache=None)
                 for n in (8, 12, 16)]
    assert all(isinstance(p._runner, artifacts.InductorRunner) for p in plans)
    for p in plans:
        x = random_complex((2, p.problem.n), seed=p.problem.n)
        assert rel_l2(p(torch.from_numpy(x.astype(np.complex64))), reference(x, False)) <= BAR["fp32"]


def test_cuda_graph_modes_copy_each_calls_outputs_out(monkeypatch):
    """Under CUDA graphs (TRNPLAN_INDUCTOR_MODE reduce-overhead or max-autotune on CUDA) every replay
    writes the same output memory, so the runner copies each call's outputs out: a result held by
    the caller must not change at the next call. The CUDA-graph switch is forced on here (the CPU
    has no CUDA graphs); what is checked is that the runner hands out copies, and marks each call a
    new step."""
    monkeypatch.setenv("TRNPLAN_INDUCTOR_MODE", "reduce-overhead")
    plan = trnplan.plan_many(64, batch=4, strategy="(dft-gemm)", compile="inductor", cache=None)
    runner = plan._runner
    assert isinstance(runner, artifacts.InductorRunner) and runner._cudagraphs is False  # the CPU: none
    runner._cudagraphs = True
    compiled, produced, steps = runner._fn, [], []

    def spy(*args):
        out = compiled(*args)
        produced.extend(t.data_ptr() for t in out)
        return out

    runner._fn = spy
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: steps.append(1))
    x = random_complex((4, 64), seed=4)
    re, im = plan((torch.from_numpy(x.real.astype(np.float32)), torch.from_numpy(x.imag.astype(np.float32))))
    assert len(steps) == 1 and produced and not {re.data_ptr(), im.data_ptr()} & set(produced)
    assert rel_l2(torch.complex(re, im), reference(x, False)) <= BAR["fp32"]
