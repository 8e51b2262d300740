"""Accelerator device kinds on stock torch (no torch-xla, no TorchNeuron): meta tensors end to end,
device resolution, the refusals, and a PrivateUse1 "neuron" registration stood in.

What runs where (docs/trainium.md):
* ``meta``: the whole path — planning on the accelerator profile, lowering with every constant
  placed on meta, Plan.execute and trnplan.fft returning meta tensors of the right shape and dtype;
* a PrivateUse1 backend renamed ``"neuron"`` (``torch.utils.rename_privateuse1_backend``, in a
  child process: the rename cannot be undone): trnplan resolves ``device="neuron"`` to the
  accelerator backend with TorchNeuron's compile backend. Plans running on tensors of that
  device are tested with a stand-in device in tests/test_neuron_device_standin.py;
* ``xla``: everything, on torch-xla 2.9 (XLA:CPU) in the lane (tests/xla/, .ci/xla_lane.sh).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch

import trnplan
from trnplan.backends import accel, get_backend, neuron_runtime
from trnplan.core.errors import BackendUnavailable, PlanningError
from trnplan.core.problem import Problem, device_kind

META = torch.device("meta")


def test_fft_functions_on_meta_keep_device_shape_and_dtype():
    x = torch.empty(3, 5, 64, dtype=torch.complex64, device=META)
    r = torch.empty(3, 5, 64, device=META)
    for y, shape, dtype in [
        (trnplan.fft.fft(x), (3, 5, 64), torch.complex64),
        (trnplan.fft.ifft(x, n=100), (3, 5, 100), torch.complex64),
        (trnplan.fft.fft2(x), (3, 5, 64), torch.complex64),
        (trnplan.fft.rfft(r), (3, 5, 33), torch.complex64),
        (trnplan.fft.irfft(trnplan.fft.rfft(r), n=64), (3, 5, 64), torch.float32),
        (trnplan.fft.rfftn(r), (3, 5, 33), torch.complex64),
        (trnplan.fft.fft(x.to(torch.complex128)), (3, 5, 64), torch.complex128),  # fp64: meta computes nothing
    ]:
        assert (y.device, tuple(y.shape), y.dtype) == (META, shape, dtype)


def test_a_meta_plan_is_a_gemm_tree_with_its_constants_on_meta():
    plan = trnplan.plan_many(1000, 4, device="meta", cache=None)
    assert plan.device == META and plan.problem.device == "meta"
    solvers = {node.solver for _, node in plan.tree.walk()}
    assert not solvers & {"native", "scipy", "pyfftw", "mkl-fft"}, plan.tree
    assert {t.device for t in plan.module.buffers()} == {META}
    assert plan.provenance.compile_mode == "eager"
    text = plan.explain(full=True)
    assert "runtime    meta tensors (shapes and dtypes only)" in text
    assert "meta tensors compute nothing: there is nothing to compile" in text
    y = plan.execute(torch.empty(4, 1000, dtype=torch.complex64, device=META))
    assert (y.device, tuple(y.shape)) == (META, (4, 1000))


def test_autograd_on_meta():
    x = torch.empty(2, 64, dtype=torch.complex64, device=META, requires_grad=True)
    trnplan.fft.fft(x).real.sum().backward()
    assert (x.grad.device, tuple(x.grad.shape), x.grad.dtype) == (META, (2, 64), torch.complex64)


def test_device_kinds():
    assert device_kind("xla") == device_kind(torch.device("xla", 0)) == "xla"
    assert device_kind(META) == "meta"
    assert Problem.create(64, device="xla:0").device == "xla"
    assert Problem.create(64, device="xla").digest() != Problem.create(64, device="cpu").digest()
    assert isinstance(get_backend("xla"), accel.AccelBackend) and not get_backend("xla").has_native_fft("fp32")
    with pytest.raises(ValueError, match=r"device must be one of 'cpu', 'cuda', 'neuron', 'xla', 'meta' .*got 'mps': "
                                         r"trnplan has no backend for 'mps' tensors"):
        trnplan.plan_many(64, device="mps")


def test_accelerator_refusals_name_the_fix():
    with pytest.raises(PlanningError, match=r"cores > 1 on 'meta': one process drives one device here"):
        trnplan.plan_many(64, 4, device="meta", cores=2, cache=None)
    with pytest.raises(ValueError, match=r"compile='aot' is not available on meta; use one of auto, eager, dynamo"):
        trnplan.plan_many(64, 4, device="meta", compile="aot", cache=None)
    with pytest.raises(ValueError, match=r"compile='dynamo' needs a torch.compile backend for 'meta'"):
        trnplan.plan_many(64, 4, device="meta", compile="dynamo", cache=None)
    backend = accel.AccelBackend("xla")
    assert "x.to(torch.complex64)" in backend.precision_unsupported_reason("fp64")
    assert "x.cpu()" in backend.precision_unsupported_reason("fp64")


@pytest.mark.skipif(neuron_runtime.detect().kind is not None, reason="a Neuron runtime is installed here")
def test_neuron_without_a_runtime_names_both_installs(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch_neuronx", raising=False)
    with pytest.raises(BackendUnavailable) as info:
        trnplan.plan_many(64, device="neuron", cache=None)
    assert neuron_runtime.INSTALL_TORCHNEURON in str(info.value)
    assert neuron_runtime.INSTALL_XLA_TRACE in str(info.value)
    assert "torch-neuronx is not installed" in str(info.value)


def test_compile_cache_variables_are_set_only_when_unset(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_DIR", raising=False)
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", "s3://mine/cache")
    got = accel.configure_compile_cache(tmp_path)
    assert got == {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "neff"), "NEURON_COMPILE_CACHE_URL": "s3://mine/cache"}
    assert "(set by trnplan)" in accel.cache_note("neuron")
    assert "s3://mine/cache (set by you)" in accel.cache_note("xla")


def test_bucketed_runner_pads_and_crops_on_the_host():
    """A batch below the bucket is padded and cropped on the host (a device pad would be a graph per
    batch size); the graph is compiled once per boundary form and sees only the bucket's shape."""
    compiled, calls = [], []

    def compile_graph(target, example):
        compiled.append(tuple(t.shape for t in example))

        def graph(*inputs):
            calls.append(tuple(t.shape for t in inputs))
            return tuple(target(*inputs))
        return graph

    class Double(torch.nn.Module):
        def forward(self, re, im):
            return 2 * re, 2 * im

    runner = accel.BucketedRunner(Double(), 6, ((2,), (2,)), torch.float32, torch.device("cpu"), compile_graph,
                                  host_boundary=True)
    x = torch.arange(10.0).reshape(5, 2)
    y = runner.run_shaped("split", (x, -x))
    assert compiled == [((6, 2), (6, 2))] and calls == [((6, 2), (6, 2))]
    assert torch.equal(y[0], 2 * x) and torch.equal(y[1], -2 * x)
    # the complex form: its own graph, boundary inside; a (2, 2) leading layout reshaped on the host
    z = torch.complex(x, -x)[:4].reshape(2, 2, 2)
    (w,) = runner.run_shaped("complex", (z,))
    assert compiled[1:] == [((6, 2),)] and torch.equal(w, 2 * z)
    runner.run_shaped("split", (x[:3], x[:3]))
    assert len(compiled) == 2  # no new graph for a new batch size in the bucket


STAND_IN = textwrap.dedent("""
    import torch
    torch.utils.rename_privateuse1_backend("neuron")  # what TorchNeuron's autoload registers
    from trnplan.backends import accel, get_backend, neuron_runtime
    from trnplan.core.problem import Problem
    rt = neuron_runtime.detect()
    backend = get_backend("neuron")
    print(rt.kind, type(backend).__name__, backend.kind, backend.compile_backend(),
          backend.auto_compile()[0], Problem.create(64, device=torch.device("neuron", 0)).device,
          accel.resolve_device("neuron", "neuron"))
    print(backend.precision_unsupported_reason("fp64") is not None, backend.has_native_fft("fp32"))
""")


def test_a_privateuse1_neuron_registration_selects_torchneuron():
    root = str(pathlib.Path(__file__).resolve().parents[1])  # this checkout's trnplan
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [root, os.environ.get("PYTHONPATH")] if p)}
    out = subprocess.run([sys.executable, "-c", STAND_IN], capture_output=True, text=True, env=env, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["torchneuron AccelBackend neuron neuron dynamo neuron neuron:0", "True False"]


@pytest.mark.neuron
@pytest.mark.skipif(not accel.torchneuron_present(), reason="needs TorchNeuron (torch-neuronx 2.13/2.14 on trn2/trn3)")
@pytest.mark.parametrize("shape, kind", [(1024, "r2c"), (4096, "c2c"), ((64, 64), "r2c")])
def test_torchneuron_hardware(shape, kind):
    """On a trn2/trn3 with TorchNeuron (skipped elsewhere; has not run yet): a plan on the native
    ``neuron`` device, compiled with backend="neuron", against numpy complex128 with the fp32 bar,
    and no op fell back to the CPU (runtimes.md §2: torch_neuronx.get_fallback_ops). Input and
    output are kept free of complex tensors on the device: real input (r2c) or the (re, im) pair."""
    import numpy as np
    import torch_neuronx

    from trnplan.core.accuracy import DEFAULT_TOL

    shape_t = shape if isinstance(shape, tuple) else (shape,)
    g = np.random.default_rng(0)
    x = g.standard_normal((4, *shape_t))
    torch_neuronx.clear_op_tracking()
    plan = trnplan.plan_many(shape, 4, kind=kind, device="neuron", cache=None)
    assert plan.provenance.compile_mode == "dynamo" and plan.device.type == "neuron"
    axes = tuple(range(1, len(shape_t) + 1))
    if kind == "r2c":
        y = plan.execute(torch.from_numpy(x).float().to("neuron")).cpu()
        ref = np.fft.rfftn(x, axes=axes)
    else:
        xi = g.standard_normal((4, *shape_t))
        re, im = plan.execute((torch.from_numpy(x).float().to("neuron"), torch.from_numpy(xi).float().to("neuron")))
        y = torch.complex(re.cpu(), im.cpu())
        ref = np.fft.fftn(x + 1j * xi, axes=axes)
    err = float(np.linalg.norm(y.numpy() - ref) / np.linalg.norm(ref))
    assert err <= DEFAULT_TOL["fp32"], f"{plan.tree}: {err:.3g}"
    assert not torch_neuronx.get_fallback_ops(), torch_neuronx.get_fallback_ops()


def test_the_2gb_limit_is_checked_at_the_largest_intermediate():
    """Issue 27 item 9: a plan whose input fits under 2 GiB but whose largest intermediate ([re | im]
    operands, split-mode slices, Bluestein's padded length) does not is refused on Neuron routes."""
    from trnplan.backends import get_backend, neuron
    from trnplan.core.problem import Problem
    from trnplan.core.spec import Spec
    from trnplan.planner import Planner

    fits = Problem.create(4096, 2**14, device="meta", precision="fp32")  # input 2^26 points: 256 MiB per part
    tree = Planner(get_backend("meta")).plan(fits)
    assert neuron.tensor_limit_reason(fits) is None and neuron.largest_tensor_reason(fits, tree) is None
    big = Problem.create(4097, 2**16, device="meta", precision="fp32")  # input 1 GiB per part: under the limit
    tree = Planner(get_backend("meta")).plan(big, Spec(name="bluestein"))
    assert neuron.tensor_limit_reason(big) is None
    why = neuron.largest_tensor_reason(big, tree)
    assert why is not None and "largest intermediate (" in why and "over the 2 GiB a NeuronCore tensor may have" in why
