"""Issue 30's spectral plans on the stood-in TorchNeuron ``neuron`` device (tests/neuron_device_standin.py).

Every route of the three families, audited as tests/test_neuron_device_standin.py audits the
ordinary plans, in one child process (the PrivateUse1 rename cannot be undone):

* ``trnplan.conv.plan_conv`` with ``method="library"``, ``"gemm"`` and ``"direct"`` (1-D circular,
  linear and causal; 2-D linear on the library route), real banks: a call without a gradient is one
  compiled graph (``torch.compile(backend="neuron")``; a second call of the shape compiles nothing
  and runs no op outside it), the bank's spectrum one graph at plan time, a call with a gradient a
  forward and a backward graph (AOTAutograd, as TorchNeuron runs it); within the convolution's own
  bound of the float64 convolution on the CPU. A complex bank or a complex signal is refused
  (``ComplexOnDevice``): a NeuronCore holds no complex data, and a complex convolution has no split form;
* truncated r2c and c2r (``(truncated method=gemm)`` and the library cut ``method=full``), 1-D and
  2-D, through ``execute_split``, forward and with a gradient;
* DCT/DST kinds through the GEMM and the FFT-based lowering (``(r2r method=gemm|fft)``), forward
  and with a gradient.

For each: the values against numpy/scipy in float64 with the engine's bar, every op that ran on the
device real-typed (no complex, float64 or int64: the stand-in refuses them anyway), every op inside
a compiled graph on trnplan's Neuron ATen allowlist, no CPU fallback. What it cannot show:
neuronx-cc's lowering and Trainium numerics (docs/trainium.md, "What has run where").
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.tools.audit import allowlist

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, math, sys
    sys.path.insert(0, sys.argv[1])
    import neuron_device_standin as s
    s.install(); s.register_compile_backend()
    import numpy as np, scipy.fft, torch, trnplan
    from trnplan.conv import plan_conv

    g = np.random.default_rng(0)
    out = {}
    for compile in ("auto", "eager"):  # the plans' precision probes (one per route): before the cases
        trnplan.plan_many(64, 4, device=s.DEVICE, compile=compile, cache=None)

    def dev(a):
        return s.to_neuron(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)))

    def host(t):
        return s.to_cpu(t).double().numpy()

    def rel(a, b):
        return float(np.linalg.norm(a - b) / np.linalg.norm(b))

    def dtypes():
        return sorted({str(d) for _, ds, _ in s.OPS for d in ds})

    def graph_ops():
        return sorted({o for o, _, ing in s.OPS if ing})

    def eager_ops():  # ops run on the device outside a compiled graph, but for transfers and allocation
        return sorted({o for o, _, ing in s.OPS if not ing} - s._TRANSFERS)

    def conv_case(name, kernel, length, mode, method):
        s.OPS.clear(); s.FALLBACK.clear(); start = len(s.GRAPHS)
        h = g.standard_normal((3, *kernel))
        conv = plan_conv(dev(h), length, mode, method=method)
        ref = plan_conv(torch.from_numpy(h), length, mode)  # float64 on the CPU
        shape = (2, 3, *((length,) if isinstance(length, int) else length))
        x = g.standard_normal(shape)
        rec = {"method": conv.method, "bound": conv.bound, "plan_graphs": len(s.GRAPHS) - start,
               "runs": next(l for l in conv.explain().splitlines() if l.startswith("runs:"))}
        xd = dev(x)
        y = conv(xd)
        rec["err"] = rel(host(y), ref(torch.from_numpy(x)).numpy())
        rec["device"] = str(y.device)
        s.OPS.clear(); start = len(s.GRAPHS)
        y = conv(xd)  # the same shape again: the graph made by the first call, nothing else
        rec["again"] = {"graphs": len(s.GRAPHS) - start, "eager": eager_ops(), "in_graph": bool(graph_ops())}
        if mode == "causal":  # the gradient (the adjoint route: the same graph's backward) once per route
            xg = dev(x).requires_grad_(True); start = len(s.GRAPHS)
            conv(xg).square().sum().backward()
            xr = torch.from_numpy(x).requires_grad_(True)
            ref(xr).square().sum().backward()
            rec["grad"] = {"err": rel(host(xg.grad), xr.grad.numpy()), "graphs": len(s.GRAPHS) - start,
                           "device": str(xg.grad.device)}
        rec.update(dtypes=dtypes(), graph_ops=graph_ops(), fallback=sorted(set(s.FALLBACK)))
        out[name] = rec

    for method in ("library", "gemm", "direct"):
        for mode, length, k in (("circular", 96, 17), ("linear", 80, 24), ("causal", 128, 40)):
            conv_case(f"conv {method} {mode}", (k,), length, mode, method)
    conv_case("conv library causal 2-d", (3, 4), (12, 10), "causal", "library")

    # batches 1..8 (and a (2, 2) lead) of one convolution: one graph per bucket, the pad and crop on the host
    from trnplan.backends.accel import bucket_batch
    h = g.standard_normal((3, 40))
    conv, ref = plan_conv(dev(h), 128, "causal", method="gemm"), plan_conv(torch.from_numpy(h), 128, "causal")
    start, errs, leads = len(s.GRAPHS), [], [(b,) for b in range(1, 9)] + [(2, 2)]
    for lead in leads:
        x = g.standard_normal((*lead, 3, 128))
        y = conv(dev(x))
        errs.append(rel(host(y), ref(torch.from_numpy(x)).numpy()) if y.shape == x.shape else 1.0)
    out["buckets"] = {"graphs": len(s.GRAPHS) - start, "buckets": len({bucket_batch(math.prod(l)) for l in leads}),
                      "err": max(errs), "bound": conv.bound}

    def split_case(name, make, x, ref, grad_ref=None):
        s.OPS.clear(); s.FALLBACK.clear(); start = len(s.GRAPHS)
        plan = make()
        xd = dev(x) if not np.iscomplexobj(x) else (dev(x.real), dev(x.imag))
        y = plan.execute_split(xd)
        got = host(y) if not isinstance(y, tuple) else host(y[0]) + 1j * host(y[1])
        rec = {"tree": str(plan.tree), "err": rel(got, ref), "graphs": len(s.GRAPHS) - start,
               "mode": plan.provenance.compile_mode}
        if grad_ref is not None:  # the gradient of sum(w * y) is the adjoint applied to w
            w, want = grad_ref
            xs = tuple(t.requires_grad_(True) for t in (xd if isinstance(xd, tuple) else (xd,)))
            ys = plan.execute_split(xs if len(xs) > 1 else xs[0])
            ys = ys if isinstance(ys, tuple) else (ys,)
            ws = (w.real, w.imag) if np.iscomplexobj(w) else (w,)
            sum((yy * dev(ww)).sum() for yy, ww in zip(ys, ws)).backward()
            gg = host(xs[0].grad) if len(xs) == 1 else host(xs[0].grad) + 1j * host(xs[1].grad)
            rec["grad_err"] = rel(gg, want)
        rec.update(dtypes=dtypes(), graph_ops=graph_ops(), fallback=sorted(set(s.FALLBACK)))
        out[name] = rec

    plan = lambda *a, **k: trnplan.plan_many(*a, device="neuron", cache=None, **k)

    def torch_grad(kind, x, w, shape, axes, index):
        # the gradient of sum(y * w) (complex y: Re(y) Re(w) + Im(y) Im(w)) with respect to the input (complex:
        # re + i im), by torch.fft's autograd in float64 on the CPU: rfftn then the cut, or the zero-fill then irfftn
        if kind == "r2c":
            t = torch.from_numpy(x).requires_grad_(True)
            y = torch.fft.rfftn(t, dim=axes)[index]
            (y.real * torch.from_numpy(w.real) + y.imag * torch.from_numpy(w.imag)).sum().backward()
            return t.grad.numpy()
        re, im = (torch.from_numpy(np.ascontiguousarray(p)).requires_grad_(True) for p in (x.real, x.imag))
        full = torch.zeros((x.shape[0], *shape[:-1], shape[-1] // 2 + 1), dtype=torch.complex128)
        full[index] = torch.complex(re, im)
        (torch.fft.irfftn(full, s=shape, dim=axes) * torch.from_numpy(w)).sum().backward()
        return re.grad.numpy() + 1j * im.grad.numpy()
    for method in ("gemm", "full"):
        st = f"(truncated method={method})"
        for shape, modes in (((256,), (16,)), ((16, 12), (3, 4))):
            axes = tuple(range(1, len(shape) + 1))
            rows = [np.r_[0:m, n - m:n] for m, n in zip(modes[:-1], shape[:-1])]
            index = (Ellipsis, *np.ix_(*rows, np.arange(modes[-1])))
            x = g.standard_normal((4, *shape))
            spec = np.fft.rfftn(x, axes=axes)[index]
            w = g.standard_normal(spec.shape) + 1j * g.standard_normal(spec.shape)
            split_case(f"r2c {method} {shape}", lambda: plan(shape, 4, kind="r2c", modes=modes, strategy=st), x, spec,
                       (w, torch_grad("r2c", x, w, shape, axes, index)))
            full = np.zeros((4, *shape[:-1], shape[-1] // 2 + 1), complex); full[index] = spec
            v = g.standard_normal((4, *shape))
            split_case(f"c2r {method} {shape}", lambda: plan(shape, 4, kind="c2r", modes=modes, strategy=st),
                       spec, np.fft.irfftn(full, s=shape, axes=axes), (v, torch_grad("c2r", spec, v, shape, axes, index)))
    for method in ("gemm", "fft"):
        for kind, n, norm in (("dct2", 64, "ortho"), ("dst1", 30, "ortho"), ("dct4", 48, "ortho"), ("dst3", 40, "ortho")):
            x = g.standard_normal((4, n)); w = g.standard_normal((4, n))
            t = int(kind[3]); fn = getattr(scipy.fft, kind[:3])
            # orthonormal DCT/DST: the adjoint is the inverse of the same type
            split_case(f"{kind} {method}", lambda: plan(n, 4, kind=kind, norm=norm, strategy=f"(r2r method={method})"),
                       x, fn(x, type=t, norm=norm), (w, getattr(scipy.fft, "i" + kind[:3])(w, type=t, norm=norm)))
        # 2-D: row-column over 1-D plans of that lowering
        x = g.standard_normal((4, 8, 12)); w = g.standard_normal((4, 8, 12))
        st = f"(r2r method=rowcol (r2r method={method}) (r2r method={method}))"
        split_case(f"dst2-2d {method}", lambda: plan((8, 12), 4, kind="dst2", norm="ortho", strategy=st),
                   x, scipy.fft.dstn(x, type=2, norm="ortho", axes=(1, 2)),
                   (w, scipy.fft.idstn(w, type=2, norm="ortho", axes=(1, 2))))

    # trnplan.nn.SpectralConv with split weights (dtype=torch.float32) against the complex layer on the CPU
    import trnplan.nn
    torch.manual_seed(0)
    for modes, grid in (((6,), (32,)), ((4, 5), (16, 12))):
        layer = trnplan.nn.SpectralConv(3, 2, modes, dtype=torch.float32)
        ref = trnplan.nn.SpectralConv(3, 2, modes)
        w = layer.weight.detach().double()
        ref = ref.to(torch.complex128)
        ref.weight = torch.nn.Parameter(torch.complex(w[..., 0], w[..., 1]))
        x = torch.randn(4, 3, *grid)
        want = ref(x.double()); want.square().sum().backward()
        layer = layer.to(s.DEVICE)
        s.OPS.clear(); s.FALLBACK.clear()
        got = layer(s.to_neuron(x)); got.square().sum().backward()
        gw = s.to_cpu(layer.weight.grad).double()
        out[f"layer {modes}"] = {"err": rel(host(got), want.detach().numpy()),
                                 "grad_err": rel(torch.complex(gw[..., 0], gw[..., 1]).numpy(), ref.weight.grad.numpy()),
                                 "device": str(got.device), "dtypes": dtypes(), "graph_ops": graph_ops(),
                                 "fallback": sorted(set(s.FALLBACK))}

    refusals = {}
    h = s.NeuronTensor(torch.randn(3, 8, dtype=torch.complex64))  # a complex bank that reached the device
    for name, fn in (("complex bank", lambda: plan_conv(h, 64, "causal")),
                     ("complex signal", lambda: plan_conv(dev(g.standard_normal((3, 8))), 64, "causal")(
                         s.NeuronTensor(torch.randn(2, 3, 64, dtype=torch.complex64)))),
                     ("float64 bank", lambda: plan_conv(s.NeuronTensor(torch.randn(3, 8, dtype=torch.float64)), 64,
                                                        "causal")),
                     ("float64 signal", lambda: plan_conv(dev(g.standard_normal((3, 8))), 64, "causal")(
                         s.NeuronTensor(torch.randn(2, 3, 64, dtype=torch.float64)))),
                     ("spatial route", lambda: plan_conv(dev(g.standard_normal((3, 8))), 64, "causal",
                                                         method="spatial"))):
        s.OPS.clear()
        try:
            fn(); refusals[name] = None  # (a float64 signal's plan_conv itself runs float32 ops: dtypes below)
        except Exception as exc:
            refusals[name] = {"cls": type(exc).__name__, "msg": str(exc), "dtypes": dtypes()}
    out["refusals"] = refusals
    print(json.dumps(out))
""")

ONE_WORKER = pytest.mark.xdist_group("spectral_standin_child")
REAL_DTYPES = {"torch.float32", "torch.bfloat16", "torch.int32", "torch.bool"}
CONV = [f"conv {m} {mode}" for m in ("library", "gemm", "direct") for mode in ("circular", "linear", "causal")] + [
    "conv library causal 2-d"]
SPLIT = [f"{k} {m} {s}" for m in ("gemm", "full") for s in ("(256,)", "(16, 12)") for k in ("r2c", "c2r")] + [
    f"{k} {m}" for m in ("gemm", "fft") for k in ("dct2", "dst1", "dct4", "dst3", "dst2-2d")]


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH")] if p),
           "TRNPLAN_CACHE_DIR": str(tmp_path_factory.mktemp("trnplan-cache"))}
    run = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "tests")], capture_output=True, text=True,
                         env=env, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _real_and_listed(got):
    assert set(got["dtypes"]) <= REAL_DTYPES, got["dtypes"]  # every op on the device, in a graph or not
    assert got["graph_ops"] and set(got["graph_ops"]) <= set(allowlist()), sorted(set(got["graph_ops"]) - set(allowlist()))
    assert not any("fft" in op for op in got["graph_ops"]) and got["fallback"] == [], got


@ONE_WORKER
@pytest.mark.slow
@pytest.mark.parametrize("name", CONV)
def test_conv_route_on_neuron_is_one_real_graph_per_call(child, name):
    got = child[name]
    want = name.split()[1]
    assert got["method"] == want and got["device"] == "neuron:0", got
    assert "every call one graph on neuron:0 by torch.compile(backend='neuron'" in got["runs"], got["runs"]
    assert got["err"] <= got["bound"], got  # the convolution's own bound (the mode's bar, or √2 times it)
    # at plan time the spectrum's graph only (the process's first convolution also the conv planner's
    # precision probe): the library route's plans are composed into the graphs, none compiled on its
    # own (a neuronx-cc run each on a NeuronCore)
    assert got["plan_graphs"] == (2 if name == CONV[0] else 1), got
    assert got["again"] == {"graphs": 0, "eager": [], "in_graph": True}, got  # one graph, already compiled
    if "causal" in name:  # sum(y²)'s gradient is the adjoint convolution of 2y: two convolutions in a row
        assert got["grad"]["err"] <= 2 * got["bound"] and got["grad"]["device"] == "neuron:0", got
        assert got["grad"]["graphs"] == 2, got  # AOTAutograd's forward and backward graphs
    _real_and_listed(got)


@ONE_WORKER
@pytest.mark.slow
def test_conv_on_neuron_compiles_one_graph_per_batch_bucket(child):
    """Batches 1..8 and a (2, 2) lead of one convolution: at most one graph per bucket (the pad and the crop
    on the host, as the transform plans' buckets), each result within the convolution's bound."""
    got = child["buckets"]
    assert got["graphs"] <= got["buckets"] < 9, got
    assert got["err"] <= got["bound"], got


@ONE_WORKER
@pytest.mark.slow
@pytest.mark.parametrize("name", SPLIT)
def test_truncated_and_r2r_routes_on_neuron_stay_real_and_listed(child, name):
    got = child[name]
    method = name.split()[1]
    assert f"method={method}" in got["tree"], got["tree"]
    assert got["mode"] == "dynamo" and got["graphs"] >= 1, got
    assert got["err"] <= DEFAULT_TOL["fp32"], got
    # the input's gradient through the plan's adjoint on the device, against torch.fft's autograd in float64
    assert got["grad_err"] <= DEFAULT_TOL["fp32"], got
    _real_and_listed(got)


@ONE_WORKER
@pytest.mark.slow
@pytest.mark.parametrize("name", ["layer (6,)", "layer (4, 5)"])
def test_spectral_conv_layer_with_split_weights_on_neuron(child, name):
    """trnplan.nn.SpectralConv(dtype=torch.float32): the output and the weights' gradient on ``neuron`` against
    the complex layer in float64 on the CPU, two fp32 plans and the mixing in a row; nothing complex on the device."""
    got = child[name]
    assert got["device"] == "neuron:0"
    assert got["err"] <= 2 * DEFAULT_TOL["fp32"] and got["grad_err"] <= 4 * DEFAULT_TOL["fp32"], got
    _real_and_listed(got)


@pytest.mark.parametrize("modes,grid", [((6,), (32,)), ((4, 5), (16, 12)), ((2, 3, 2), (8, 8, 6))])
def test_spectral_conv_split_weights_match_the_complex_layer_on_the_cpu(modes, grid):
    import torch

    import trnplan.nn

    torch.manual_seed(1)
    layer = trnplan.nn.SpectralConv(3, 2, modes, dtype=torch.float64)
    ref = trnplan.nn.SpectralConv(3, 2, modes, backend="torch", dtype=torch.complex128)
    ref.weight = torch.nn.Parameter(torch.view_as_complex(layer.weight.detach().clone()))
    x = torch.randn(4, 3, *grid, dtype=torch.float64)
    got, want = layer(x), ref(x)
    got.square().sum().backward()
    want.square().sum().backward()
    assert layer.weight.shape == (3, 2, *(2 * m for m in modes[:-1]), modes[-1], 2)
    assert float((got - want).detach().norm() / want.detach().norm()) <= DEFAULT_TOL["fp64"]
    gw = torch.view_as_complex(layer.weight.grad)
    assert float((gw - ref.weight.grad).norm() / ref.weight.grad.norm()) <= DEFAULT_TOL["fp64"]


def test_spectral_conv_split_weights_need_a_real_dtype_and_the_trnplan_backend():
    import torch

    import trnplan.nn

    with pytest.raises(ValueError, match="float32/float64 for split weights with backend='trnplan'"):
        trnplan.nn.SpectralConv(2, 2, 4, dtype=torch.float32, backend="torch")
    with pytest.raises(ValueError, match="dtype must be complex64/complex128"):
        trnplan.nn.SpectralConv(2, 2, 4, dtype=torch.int32)


@ONE_WORKER
@pytest.mark.slow
@pytest.mark.parametrize("name", ["complex bank", "complex signal"])
def test_complex_convolution_on_neuron_is_refused(child, name):
    got = child["refusals"][name]
    assert got is not None and got["cls"] == "ComplexOnDevice", got
    assert "holds no complex" in got["msg"] and "real" in got["msg"], got["msg"]
    assert set(got["dtypes"]) <= REAL_DTYPES, got["dtypes"]


@ONE_WORKER
@pytest.mark.slow
def test_the_spatial_route_is_refused_on_neuron(child):
    """method="spatial" (torch's depthwise conv1d, measured and priced on the CPU only): refused on a
    NeuronCore naming the route that runs there, before any op."""
    got = child["refusals"]["spatial route"]
    assert got is not None and got["cls"] == "PlanningError", got
    assert "priced on the CPU only" in got["msg"] and "method=library" in got["msg"], got["msg"]
    assert set(got["dtypes"]) <= REAL_DTYPES, got["dtypes"]


@ONE_WORKER
@pytest.mark.slow
@pytest.mark.parametrize("name,cls,words", [("float64 bank", "PlanningError", "h.float().to(device)"),
                                            ("float64 signal", "TypeError", "pass x.float()")])
def test_float64_convolution_on_neuron_is_refused_with_the_fix(child, name, cls, words):
    got = child["refusals"][name]
    assert got is not None and got["cls"] == cls, got
    assert "no FP64" in got["msg"] and words in got["msg"], got["msg"]
    assert set(got["dtypes"]) <= REAL_DTYPES, got["dtypes"]  # refused before any float64 op on the device
