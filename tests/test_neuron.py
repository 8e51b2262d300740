"""The Trainium backend, tested on the CPU: the lowering audit, and the Neuron path with a stand-in.

THE STAND-IN TESTS OUR INTEGRATION, NOT THE COMPILER. ``torch_neuronx`` cannot be installed here
(PyPI has placeholders only), so :data:`STANDIN_SOURCE` is a test-only module of that name —
``trace`` is ``torch.jit.trace``, ``DataParallel`` a shard loop, ``neuron_cores_context`` records
the core — injected through a ``sys.meta_path`` finder, so that ``importlib.util.find_spec`` and
``import torch_neuronx`` see it exactly as they would the real one. What these tests prove: trnplan
plans for the Neuron profile, hands ``trace`` a module and the documented arguments, stores the
TorchScript bytes in the plan cache, loads them in a fresh process once per core, pads and crops
the bucketed batch, shards it across cores, picks the host fallback by its cost model, and gets
the transform right. What they cannot prove: that neuronx-cc compiles these graphs, or how they
run on a NeuronCore. The lowering audit checks the graphs against the documented operator limits;
the ``neuron``-marked test at the end runs on a trn1 with torch-neuronx installed:

    python -m pytest tests/test_neuron.py -m neuron -q -s
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import trnplan
from conftest import BAR, random_complex, reference, rel_l2
from trnplan.backends import get_backend
from trnplan.backends import neuron
from trnplan.backends.base import clear_probe_cache
from trnplan.audit import GRID_PRECISIONS, audit, audit_grid
from trnplan.cache import PlanCache, fingerprint
from trnplan.core.errors import BackendUnavailable, PlanningError
from trnplan.planner import Planner
from trnplan.planner.library import HOST_LIBRARIES
from trnplan.planner.registry import solver_names
from trnplan.core.spec import Spec
from trnplan.core.problem import Problem

HOST_LEAVES = {s.name for s in HOST_LIBRARIES} | {"native"}
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
#: the bar per precision mode for the stand-in (the CPU runs fp32 GEMMs exactly: split modes meet theirs)
MODE_BAR = {"fp32": BAR["fp32"], "bf16": 4e-3, "bf16x3": 1e-5, "bf16x6": 1e-6}

# ---------------------------------------------------------------------- the stand-in
STANDIN_SOURCE = '''
"""TEST-ONLY stand-in for torch_neuronx (trnplan tests/test_neuron.py). It tests trnplan's
integration, NOT the Neuron compiler: trace is torch.jit.trace, nothing is compiled."""
import contextlib
import types

import torch

__version__ = "0+trnplan.test.standin"
STANDIN = True
CALLS = []       # (compiler_args, cpu_backend) of each trace() call
PLACEMENTS = []  # start_nc of each neuron_cores_context() entered


def trace(func, example_inputs, *_, input_output_aliases=None, compiler_workdir=None, compiler_args=None,
          partitioner_config=None, inline_weights_to_neff=True, cpu_backend=False):
    CALLS.append((list(compiler_args or ()), cpu_backend))
    return torch.jit.trace(func, tuple(example_inputs), check_trace=False)


class DataParallel(torch.nn.Module):
    """A shard loop over dim 0 (the real one runs each shard on its own NeuronCore)."""

    def __init__(self, traced, device_ids=None, dim=0, set_dynamic_batching=True):
        super().__init__()
        self.traced, self.n = traced, len(device_ids or [0, 1])

    def forward(self, *inputs):
        outs = [self.traced(*piece) for piece in zip(*(t.chunk(self.n) for t in inputs))]
        return tuple(torch.cat(parts) for parts in zip(*outs))


@contextlib.contextmanager
def _neuron_cores_context(start_nc=-1, nc_count=-1):
    PLACEMENTS.append(start_nc)
    yield


experimental = types.SimpleNamespace(neuron_cores_context=_neuron_cores_context)
'''


class _StandInLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(compile(STANDIN_SOURCE, "<torch_neuronx test stand-in>", "exec"), module.__dict__)


class StandInFinder(importlib.abc.MetaPathFinder):
    """Finds the stand-in as ``torch_neuronx`` (and nothing else)."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch_neuronx":
            return importlib.util.spec_from_loader(name, _StandInLoader())
        return None


def install_standin():
    """Put the stand-in finder first on sys.meta_path and return the imported stand-in module."""
    sys.modules.pop("torch_neuronx", None)
    sys.meta_path.insert(0, StandInFinder())
    import torch_neuronx

    return torch_neuronx


def real_neuron_sdk() -> bool:
    spec = importlib.util.find_spec("torch_neuronx")
    return spec is not None and not isinstance(spec.loader, _StandInLoader)


@pytest.fixture
def standin():
    if real_neuron_sdk():
        pytest.skip("the real torch-neuronx is installed: the stand-in would shadow it")
    clear_probe_cache()  # the probe runs through the stand-in (the CPU: exact), not the assumed one
    module = install_standin()
    try:
        yield module
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, StandInFinder)]
        sys.modules.pop("torch_neuronx", None)
        trnplan.clear_plan_cache()
        clear_probe_cache()


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _complex_input(shape, seed=0):
    x = random_complex(shape, seed)
    return x, torch.from_numpy(x).to(torch.complex64)


# ---------------------------------------------------------------------- the audit: every solver passes
TEST_SIZES = (("64", {"shape": 64}), ("256", {"shape": 256}), ("1000", {"shape": 1000}),
              ("4096", {"shape": 4096}), ("4097", {"shape": 4097}), ("r2c 256", {"shape": 256, "kind": "r2c"}),
              ("nd 32x32", {"shape": (32, 32)}))


@pytest.mark.parametrize("solver", solver_names())
def test_audit_every_solver_precision_and_size_passes(solver):
    audited = host = 0
    for _solver, precision, label, outcome in audit_grid([solver], GRID_PRECISIONS, TEST_SIZES):
        if isinstance(outcome, str):  # the forced solver declines this problem: not a failure
            assert "not applicable" in outcome
            continue
        if precision == "fp64" or solver in HOST_LEAVES:
            assert outcome.ok and outcome.host_only, f"{solver} {precision} {label}: {outcome}"
            host += 1
            continue
        assert outcome.ok, f"{solver} {precision} {label}:\n{outcome}"
        assert outcome.host_only is None and outcome.ops
        audited += 1
    if solver in HOST_LEAVES or solver in ("multicore", "precision"):
        assert audited == 0  # host-only leaves; multicore and precision do not apply at cores=1 / fixed modes
    else:
        assert audited > 0, f"{solver}: no size was audited"


def test_audit_reports_host_library_leaves_and_fp64_as_host_only():
    report = audit(Problem.create(256, 1, device="neuron"), strategy="pyfftw")
    assert report.ok and "host" in report.host_only and "pyfftw" in report.host_only
    report = audit(Problem.create(256, 1, dtype=torch.complex128))
    assert report.ok and "fp64" in report.host_only and "FP64" in str(report)


# ---------------------------------------------------------------------- the audit: negative cases
class _Complex(torch.nn.Module):
    def forward(self, re, im):
        return torch.complex(re, im) * torch.complex(im, re)  # LINE-COMPLEX


class _FFT(torch.nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).real  # LINE-FFT


class _Unfold(torch.nn.Module):
    def forward(self, x):
        return x.unfold(-1, 4, 2)  # LINE-UNFOLD


class _Float64(torch.nn.Module):
    def forward(self, x):
        return x.double() * 2  # LINE-FLOAT64


class _NonZero(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x)  # LINE-NONZERO


def _line_of(tag: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# {tag}"))


@pytest.mark.parametrize("module, n_inputs, tag, op, words", [
    (_Complex(), 2, "LINE-COMPLEX", "aten::complex", "complex"),
    (_FFT(), 1, "LINE-FFT", "aten::fft_fft", "fft"),
    (_Unfold(), 1, "LINE-UNFOLD", "aten::unfold", "unfold"),
    (_Float64(), 1, "LINE-FLOAT64", "aten::to", "float64"),
    (_NonZero(), 1, "LINE-NONZERO", "aten::nonzero", "data-dependent"),
])
def test_audit_names_the_offending_op_and_its_source_line(module, n_inputs, tag, op, words):
    report = audit(module, example_inputs=tuple(torch.randn(4, 16) for _ in range(n_inputs)))
    assert not report.ok and op in report.offending_ops, str(report)
    hit = next(f for f in report.findings if f.op == op)
    assert words in hit.reason.lower()
    assert hit.location.startswith(f"{__file__}:{_line_of(tag)}:"), hit.location
    assert hit.solver is None and type(module).__name__ in hit.module
    assert op in str(report) and "FAILED" in str(report)


def test_audit_of_a_cpu_plan_names_the_solver_of_the_offending_ops():
    plan = trnplan.plan_many((64,), batch=2, strategy="native", cache=None)
    report = audit(plan)
    assert not report.ok
    assert {f.solver for f in report.findings} == {"native"}
    assert any(f.op.startswith("aten::fft") or "complex" in f.reason for f in report.findings)
    assert all("trnplan/planner/native.py" in f.location for f in report.findings)


def test_audit_of_a_problem_audits_the_device_plan_and_notes_the_host_fallback():
    report = audit(Problem.create(256, 2))
    assert report.ok and report.host_only is None and "dft-gemm" in report.tree
    assert "host fallback" in report.note and "note" in str(report)


def test_audit_module_needs_example_inputs():
    with pytest.raises(TypeError, match="example_inputs"):
        audit(_FFT())


def test_audit_command_line(capsys):
    from trnplan.cli import main

    assert main(["audit", "256", "--precision", "bf16", "--strategy", "dft-gemm"]) == 0
    out = capsys.readouterr().out
    assert "OK" in out and "dft-gemm" in out
    assert main(["audit", "64", "--precision", "fp64"]) == 0
    assert "HOST ONLY" in capsys.readouterr().out


def test_allowlist_ships_as_package_data_with_sources():
    from trnplan.audit import allowlist

    ops = allowlist()
    assert ops["aten::mm"] == "listed" and ops["aten::cat"].startswith("hlo:")
    assert not any("fft" in op or "unfold" in op for op in ops)


# ---------------------------------------------------------------------- without torch-neuronx
def test_device_neuron_without_torch_neuronx_says_how_to_get_it():
    if importlib.util.find_spec("torch_neuronx") is not None:
        pytest.skip("torch-neuronx is importable here")
    with pytest.raises(BackendUnavailable) as info:
        trnplan.plan_many((256,), batch=4, device="neuron")
    msg = str(info.value)
    assert "torch-neuronx" in msg and "DLAMI" in msg and "pip.repos.neuron.amazonaws.com" in msg
    assert "device='cpu'" in msg


def test_fp64_on_neuron_is_refused_as_host_only(standin):
    with pytest.raises(PlanningError, match="no device path.*device='cpu'"):
        trnplan.plan_many((256,), batch=4, dtype=torch.complex128, device="neuron")


def test_fingerprint_names_versions_target_and_compiler_args(monkeypatch):
    monkeypatch.setenv("TRNPLAN_NEURON_TARGET", "trn2")
    fp = fingerprint("neuron")
    assert fp["neuron_target"] == "trn2"
    assert fp["neuron_compiler_args"] == "--auto-cast none --target trn2"
    assert {"neuronx-cc", "torch-neuronx", "torch"} <= set(fp)
    monkeypatch.setenv("TRNPLAN_NEURON_CPU_BACKEND", "1")
    assert fingerprint("neuron")["neuron_compiler_args"].endswith("cpu_backend")
    monkeypatch.delenv("TRNPLAN_NEURON_TARGET")
    monkeypatch.setattr(neuron, "target", lambda: None)  # a build host that is no Neuron instance
    with pytest.raises(ValueError, match="TRNPLAN_NEURON_TARGET"):
        neuron.compiler_args()


def test_cpu_backend_build_passes_cpu_backend_to_trace(standin, monkeypatch, tmp_path):
    monkeypatch.setenv("TRNPLAN_NEURON_TARGET", "trn2")
    monkeypatch.setenv("TRNPLAN_NEURON_CPU_BACKEND", "1")
    plan = trnplan.plan_many((64,), batch=4, device="neuron", strategy="dft-gemm", cache=PlanCache(tmp_path / "c"))
    assert standin.CALLS == [(["--auto-cast", "none", "--target", "trn2"], True)]  # no probe without a NeuronCore
    assert "assumed" in plan.provenance.probe


# ---------------------------------------------------------------------- buckets
def test_bucket_rule():
    assert [neuron.bucket_batch(b) for b in range(1, 18)] == [2, 2, 3, 4, 6, 6, 8, 8, 12, 12, 12, 12, 16, 16, 16,
                                                              16, 24]
    assert neuron.bucket_batch(1000) == 1024 and neuron.bucket_batch(700) == 768
    assert neuron.bucket_batch(10, cores=2) == 6  # per core: ⌈10/2⌉ = 5 → 6
    assert len({neuron.bucket_batch(b) for b in range(1, 1001)}) == 19
    for b in range(1, 3000):
        assert b <= neuron.bucket_batch(b) <= max(2, 3 * b / 2)  # padding is at most a third of the bucket


def test_many_batch_sizes_compile_few_artifacts_padded_and_cropped(standin, tmp_path):
    cache = PlanCache(tmp_path / "c")
    batches = range(1, 13)
    for b in batches:
        plan = trnplan.plan_many((64,), batch=b, device="neuron", strategy="dft-gemm", cache=cache)
        x64, x = _complex_input((b, 64), seed=b)
        assert rel_l2(plan.execute(x), reference(x64, False)) <= BAR["fp32"]
        assert plan.provenance.compile_mode == "neuron"
        assert f"bucket     batch {b} over 1 NeuronCore(s)" in plan.explain()
    assert len(standin.CALLS) == 1 + len({neuron.bucket_batch(b) for b in batches}) == 7  # the probe, 6 buckets
    assert all(args == neuron.compiler_args() and args[:2] == ["--auto-cast", "none"] and not cpu
               for args, cpu in standin.CALLS)


# ---------------------------------------------------------------------- end to end, fresh process
_CHILD = textwrap.dedent('''
    import json, sys, warnings
    warnings.simplefilter("ignore")
    sys.path.insert(0, {tests!r})
    from test_neuron import install_standin
    standin = install_standin()
    import numpy as np, torch, trnplan
    from trnplan.cache import PlanCache
    plan = trnplan.plan_many((256,), batch=7, device="neuron", cores=2, precision={precision!r},
                             strategy="dft-gemm", cache=PlanCache({cache!r}), effort="wisdom_only")
    x = np.load({data!r})
    y = plan.execute(torch.from_numpy(x).to(torch.complex64))
    print(json.dumps({{"traces": len(standin.CALLS), "placements": standin.PLACEMENTS,
                      "artifact": plan.provenance.artifact, "y": y.numpy().view(np.float32).tolist()}}))
''')


@pytest.mark.parametrize("precision", ["fp32", "bf16x3"])
def test_plan_trace_cache_fresh_process_load_sharded_execute(standin, tmp_path, precision):
    cache = PlanCache(tmp_path / "c")
    plan = trnplan.plan_many((256,), batch=7, device="neuron", cores=2, precision=precision, strategy="dft-gemm",
                             cache=cache)
    # the probe ran through trace (the stand-in's CPU: exact products), so bf16x3 plans at its own bar
    assert "probed on a NeuronCore" in plan.provenance.probe and "products into the fp32 accumulator: exact" in (
        plan.provenance.probe)
    assert plan.provenance.artifact == "compiled now" and len(standin.CALLS) == 2  # the probe, the plan
    assert "bucket     batch 7 over 2 NeuronCore(s): 2 call(s) of the compiled batch 4" in plan.explain()
    x64, x = _complex_input((7, 256), seed=3)
    assert rel_l2(plan.execute(x), reference(x64, False)) <= MODE_BAR[precision]
    np.save(tmp_path / "x.npy", x.numpy())
    # a fresh process: only the plan cache carries the plan and the traced bytes
    script = _CHILD.format(tests=TESTS_DIR, precision=precision, cache=str(tmp_path / "c"),
                           data=str(tmp_path / "x.npy"))
    env = {**os.environ, "TRNPLAN_CACHE_DIR": str(tmp_path / "default")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["traces"] == 0 and got["artifact"] == "artifact hit"  # loaded (the probe too), never re-traced
    assert sorted(p for p in got["placements"] if p is not None and p >= 0) == [0, 1]  # one copy per core
    y = np.asarray(got["y"], dtype=np.float32).view(np.complex64).reshape(7, 256)
    assert rel_l2(y, reference(x64, False)) <= MODE_BAR[precision]


def test_sharded_executor_matches_the_unsharded_module(standin):
    problem = Problem.create(64, 4, device="neuron")
    planner = Planner(get_backend("neuron"), exportable=True)
    tree = planner.plan(problem, Spec(name="dft-gemm"))
    module = planner.lower_plan(tree, problem, torch.device("cpu"))
    backend = get_backend("neuron")
    from trnplan.backends.artifacts import example_inputs

    data, _ = backend.build_artifact(module, example_inputs(4, 64, torch.float32, torch.device("cpu")), "neuron")
    run = neuron.NeuronExecutor(backend.load_artifact(data, "neuron", torch.device("cpu")), 4, 3, backend)
    re, im = torch.randn(11, 64), torch.randn(11, 64)  # 3 shards of 4 (the last padded), over 3 cores
    want = module(re, im)
    got = run(re, im)
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(got, want))
    assert sorted(p for p in standin.PLACEMENTS if p >= 0) == [0, 1, 2]


# ---------------------------------------------------------------------- host fallback
def _neuron_plan(n, batch):
    return Planner(get_backend("neuron"), exportable=True).search(Problem.create(n, batch, device="neuron"))


def test_cost_model_keeps_small_problems_on_the_host_and_large_batches_on_the_device():
    small, candidates = _neuron_plan(256, 2)
    assert small.solver in HOST_LEAVES, small
    device = min((c.node for c in candidates if c.node is not None and c.solver not in HOST_LEAVES),
                 key=lambda node: node.time_us)
    assert device.time_us > 10 * small.time_us  # ~0.7 ms per dispatch against a few µs on the host
    large, _ = _neuron_plan(256, 16384)
    assert large.solver not in HOST_LEAVES, large
    # the host leaf is a root-only fallback: never a leaf inside a device graph
    assert all(node.solver not in HOST_LEAVES for _, node in large.walk())


def test_host_fallback_runs_on_the_host_without_compiling(standin):
    plan = trnplan.plan_many((256,), batch=2, device="neuron", cache=None)
    assert plan.tree.solver in HOST_LEAVES and plan.provenance.compile_mode == "eager"
    assert "host fallback" in plan.explain() and plan.provenance.artifact is None
    assert len(standin.CALLS) == 1  # the precision probe's trace only: nothing compiled for the plan
    x64, x = _complex_input((2, 256))
    assert rel_l2(plan.execute(x), reference(x64, False)) <= BAR["fp32"]


# ---------------------------------------------------------------------- real hardware
@pytest.mark.neuron
@pytest.mark.skipif(not real_neuron_sdk(), reason="needs torch-neuronx on a trn1/trn2 (docs/trainium.md)")
@pytest.mark.parametrize("n, batch, strategy, precision", [
    (256, 64, "dft-gemm", "fp32"), (4096, 16, "four-step", "fp32"), (4097, 4, "bluestein", "fp32"),
    (256, 64, "dft-gemm", "bf16"), (1000, 6, "four-step", "fp32")])
def test_on_a_neuroncore(tmp_path, n, batch, strategy, precision):
    # forced device strategies: at these sizes the cost model would otherwise pick the host fallback
    plan = trnplan.plan_many((n,), batch=batch, device="neuron", strategy=strategy, precision=precision,
                             cores=2, cache=PlanCache(tmp_path / "c"))
    assert plan.provenance.compile_mode == "neuron"
    x64, x = _complex_input((batch, n))
    err = rel_l2(plan.execute(x), reference(x64, False))
    print(plan.explain(), f"\nmeasured relative L2 error {err:.2e}")
    assert err <= plan.tol


@pytest.mark.neuron
@pytest.mark.skipif(not real_neuron_sdk(), reason="needs torch-neuronx on a trn1/trn2 (docs/trainium.md)")
def test_precision_probe_on_a_neuroncore():
    clear_probe_cache()
    probe = get_backend("neuron").precision_probe()
    print(probe.describe())  # the seed project's finding, checked: are bf16 products rounded on the Tensor Engine?
    assert "probed on a NeuronCore" in probe.source and probe.fp32_matmul == "fp32"
