"""Plans made for the ``xla`` device (torch-xla 2.9, XLA:CPU): same device out, compiled whole,
bucketed, differentiable, audited.

* every tree the accelerator profile picks, and the trees it can be forced to, against numpy
  complex128 with the mode's bar (``DEFAULT_TOL``, imported), forward and inverse, c2c/r2c/c2r,
  1-D/2-D/3-D, fp32/bf16/bf16x3/bf16x6; no op ran on the host; the plan's HLO and StableHLO
  audited (:mod:`trnplan.tools.xla_audit`);
* compile counts: one Dynamo graph per (plan, bucket), compiled at plan time; a second call
  compiles nothing; a new batch size inside a bucket compiles no plan graph;
* trnplan.fft / stft on xla tensors return xla tensors; float64 is refused with the fix;
* autograd: gradients on xla match float64 torch.fft's within the fp32 bar; an FNO-style
  spectral layer trains on xla tensors.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch_xla
from support import reference, rel_l2

import trnplan
from trnplan.backends import accel, get_backend
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.core.errors import PlanningError
from trnplan.tools import xla_audit

pytestmark = pytest.mark.xla
DEV = torch_xla.device()
BATCH = 4


def host_complex(shape, seed=0) -> torch.Tensor:
    g = np.random.default_rng(seed)
    return torch.from_numpy(g.standard_normal(shape) + 1j * g.standard_normal(shape)).to(torch.complex64)


def host_real(shape, seed=0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape)).float()


# (shape, kind, inverse, precision, strategy or None for the accelerator profile's own pick)
CASES = [
    (64, "c2c", False, "fp32", None),
    (1024, "c2c", True, "fp32", None),
    (4096, "c2c", False, "fp32", None),
    (1000, "c2c", False, "fp32", None),
    (257, "c2c", True, "fp32", None),  # a prime: Bluestein or a dense GEMM, the profile decides
    (1024, "c2c", False, "fp32", "stockham"),
    (1024, "c2c", True, "fp32", "butterfly"),
    (4096, "c2c", False, "fp32", "(four-step 4096=64x64 (stockham) (stockham))"),
    (97, "c2c", False, "fp32", "(bluestein 97 (stockham) (stockham))"),
    (1024, "r2c", False, "fp32", None),
    (1024, "c2r", True, "fp32", None),
    (1024, "r2c", False, "fp32", "(real 1024 method=half (stockham))"),
    ((16, 32), "c2c", False, "fp32", None),
    ((8, 16, 16), "r2c", False, "fp32", None),
    ((8, 16, 16), "c2r", True, "fp32", None),
    (1024, "c2c", False, "bf16", None),
    (1024, "c2c", False, "bf16x3", None),
    (256, "c2c", True, "bf16x6", None),
]


def _id(c):
    return f"{c[1]}-{'inv' if c[2] else 'fwd'}-{c[0]}-{c[3]}-{c[4] or 'picked'}"


@pytest.mark.parametrize("case", CASES, ids=map(_id, CASES))
def test_plan_on_xla(case):
    shape, kind, inverse, precision, strategy = case
    shape_t = shape if isinstance(shape, tuple) else (shape,)
    plan = trnplan.plan_many(shape, BATCH, kind=kind, inverse=inverse, precision=precision, strategy=strategy,
                             device="xla", cache=None)
    assert plan.device.type == "xla" and plan.provenance.compile_mode == "dynamo"
    assert not {"native", "scipy", "pyfftw", "mkl-fft"} & {n.solver for _, n in plan.tree.walk()}
    if kind == "r2c":
        x = host_real((BATCH, *shape_t))
    elif kind == "c2r":  # a Hermitian-consistent half spectrum: the rfftn of real data
        x = torch.from_numpy(np.fft.rfftn(np.random.default_rng(0).standard_normal((BATCH, *shape_t)),
                                          axes=tuple(range(1, len(shape_t) + 1)))).to(torch.complex64)
    else:
        x = host_complex((BATCH, *shape_t))
    ref = reference(x, inverse, kind=kind, shape=shape_t)
    xd = x.to(DEV)
    torch_xla.sync()
    before = xla_audit._fallback_counts()
    y = plan.execute(xd)
    assert y.device == xd.device
    err = rel_l2(y, ref)
    fallback = sorted(op for op, n in xla_audit._fallback_counts().items() if n > before.get(op, 0))
    assert err <= DEFAULT_TOL[precision], f"{plan.tree}: rel L2 {err:.3g} over the {precision} bar"
    assert fallback == [], f"{plan.tree}: ran on the host: {fallback}"
    report = xla_audit.audit_plan(plan)
    assert report.ok, str(report)
    assert set(report.hlo_ops) <= xla_audit.PLAN_HLO_OPS, set(report.hlo_ops) - xla_audit.PLAN_HLO_OPS
    assert set(report.stablehlo_ops) <= xla_audit.PLAN_STABLEHLO_OPS
    print(f"XLA-LANE device {plan.tree} {precision} err={err:.3g} hlo={','.join(sorted(report.hlo_ops))} "
          f"stablehlo={','.join(sorted(report.stablehlo_ops))}")


def _probed() -> None:
    """Run the device's precision probe (one graph per process, not per plan) before counting: the
    per-test state reset forgets it, so the first plan of a test would compile it too."""
    get_backend("xla").precision_probe(DEV)


def test_compile_counts_per_plan_and_bucket():
    """One Dynamo graph per (plan, bucket, boundary form), compiled at first use (the device's own
    form at plan time); a new batch size in the same bucket shares the graph and compiles nothing."""
    _probed()
    accel.clear_runners()
    x = [host_real((6, 512), 1).to(DEV), host_real((6, 512), 2).to(DEV)]
    torch_xla.sync()
    with xla_audit.CompileCounter() as planned:
        plan = trnplan.plan_many(512, 6, device="xla", strategy="stockham", cache=None)
    with xla_audit.CompileCounter() as first:
        y = plan.execute(x)
        y = [t.cpu() for t in y]
    with xla_audit.CompileCounter() as second:
        y = plan.execute(x)
        y = [t.cpu() for t in y]
    x5 = [t[:5] for t in x]
    torch_xla.sync()
    with xla_audit.CompileCounter() as in_bucket:
        plan5 = trnplan.plan_many(512, 5, device="xla", strategy="stockham", cache=None)
        y5 = [t.cpu() for t in plan5.execute(x5)]
    with xla_audit.CompileCounter() as in_bucket_again:
        y5 = [t.cpu() for t in plan5.execute(x5)]
    print(f"XLA-LANE compiles: plan {planned.dynamo} dynamo/{planned.uncached} xla; first call {first.dynamo}/"
          f"{first.uncached}; second {second.dynamo}/{second.uncached} (cached {second.cached}); new batch in bucket "
          f"{in_bucket.dynamo}/{in_bucket.uncached}; again {in_bucket_again.dynamo}/{in_bucket_again.uncached}")
    # plan time compiles the device's own boundary form (complex on XLA:CPU); the first pair call
    # compiles the split form, once; nothing else compiles: no reshape, pad or crop graph
    assert planned.dynamo == 1
    assert first.dynamo == 1 and first.uncached <= 1
    assert (second.dynamo, second.uncached) == (0, 0)
    # batch 5 in bucket 6: the bucket's graph reused; on XLA:CPU the pad and the crop are two small
    # device graphs, once per batch size (on a NeuronCore they run on the host: test_trn1_xla.py)
    assert in_bucket.dynamo == 0 and in_bucket.uncached <= 2 and "shared" in plan5.provenance.compile_reason
    assert (in_bucket_again.uncached, in_bucket_again.dynamo) == (0, 0)
    assert plan5.provenance.bucket.startswith("batch 5 runs in the compiled bucket 6")
    ref = np.fft.fft(x5[0].cpu().double().numpy() + 1j * x5[1].cpu().double().numpy())
    assert rel_l2(y5[0].double().numpy() + 1j * y5[1].double().numpy(), ref) <= DEFAULT_TOL["fp32"]


def test_a_stream_of_batch_sizes_stays_under_the_recompile_limit():
    """Batch sizes 1…40 make 9 buckets (2, 3, 4, 6, 8, 12, 16, 24, 32, 48 → those ≥ 2 used): one
    graph each, every result right; the plans' runners never hit Dynamo's recompile limit (8 per
    code object: each runner compiles one shape on a code object of its own)."""
    accel.clear_runners()
    torch._dynamo.reset()
    _probed()
    with xla_audit.CompileCounter() as stream:
        for b in range(1, 41):
            x = host_complex((b, 64), b)
            y = trnplan.fft.fft(x.to(DEV)).cpu()
            assert rel_l2(y, np.fft.fft(x.to(torch.complex128).numpy())) <= DEFAULT_TOL["fp32"]
    buckets = {accel.bucket_batch(b) for b in range(1, 41)}
    assert stream.dynamo == len(buckets), (stream.dynamo, sorted(buckets))
    print(f"XLA-LANE stream 1..40: {stream.dynamo} plan graphs for buckets {sorted(buckets)}, "
          f"{stream.uncached} XLA compiles in all")


def test_eager_is_selectable():
    plan = trnplan.plan_many(256, BATCH, device="xla", compile="eager", cache=None)
    assert plan.provenance.compile_mode == "eager" and plan._runner is None
    x = host_complex((BATCH, 256))
    assert rel_l2(plan.execute(x.to(DEV)), np.fft.fft(x.to(torch.complex128).numpy())) <= DEFAULT_TOL["fp32"]
    assert "bucket     none: eager" in plan.explain(full=True)


def test_explain_names_runtime_backend_cache_and_bucket():
    text = trnplan.plan_many(1024, 5, device="xla", cache=None).explain(full=True)
    assert "torch.compile(backend='openxla', fullgraph=True, dynamic=False)" in text
    assert "runtime    torch-xla 2.9.0" in text
    assert "jit cache  " in text and "NEURON_COMPILE_CACHE_URL=" in text
    assert "bucket     batch 5 runs in the compiled bucket 6" in text


def test_fft_functions_keep_the_device():
    x = host_complex((3, 8, 32))
    r = host_real((3, 8, 32))
    xd, rd = x.to(DEV), r.to(DEV)
    checks = [
        (trnplan.fft.fft(xd), np.fft.fft(x.to(torch.complex128).numpy())),
        (trnplan.fft.ifft(xd, norm="ortho"), np.fft.ifft(x.to(torch.complex128).numpy(), norm="ortho")),
        (trnplan.fft.fft2(xd), np.fft.fft2(x.to(torch.complex128).numpy())),
        (trnplan.fft.rfft(rd), np.fft.rfft(r.double().numpy())),
        (trnplan.fft.irfft(trnplan.fft.rfft(rd), n=32), r.double().numpy()),
        (trnplan.fft.rfftn(rd, dim=(-2, -1)), np.fft.rfftn(r.double().numpy(), axes=(1, 2))),
    ]
    for y, ref in checks:
        assert y.device.type == "xla"
        assert rel_l2(y, ref) <= DEFAULT_TOL["fp32"]


def test_stft_on_xla():
    sig = host_real((2, 2000), 3)
    window = torch.hann_window(256)
    spec = trnplan.stft(sig.to(DEV), 256, hop_length=64, window=window.to(DEV), return_complex=True)
    ref = torch.stft(sig, 256, hop_length=64, window=window, return_complex=True)
    assert spec.device.type == "xla"
    assert rel_l2(spec, ref.to(torch.complex128).numpy()) <= 10 * DEFAULT_TOL["fp32"]  # torch.stft is fp32 itself
    back = trnplan.istft(spec, 256, hop_length=64, window=window.to(DEV), length=2000)
    assert back.device.type == "xla" and rel_l2(back, sig.double().numpy()) <= 10 * DEFAULT_TOL["fp32"]


def test_float64_on_xla_is_refused_with_the_fix():
    x = host_complex((2, 64)).to(torch.complex128).to(DEV)
    with pytest.raises(PlanningError, match=r"precision='fp64' \(complex128 / float64 data\) has no device path on "
                                            r"'xla'.*x\.to\(torch\.complex64\).*x\.cpu\(\)"):
        trnplan.fft.fft(x)


def test_gradients_on_xla_match_float64():
    """loss = Σ Re(w · fft(x)) + Σ |rfft(r)|² · v: the gradients on xla against torch.fft's in float64.

    (|z|² as re² + im²: torch-xla 2.9's complex abs has no autograd.)"""
    x, r = host_complex((4, 128), 5), host_real((4, 128), 6)
    w, v = host_complex((4, 128), 7), host_real((4, 65), 8)

    def loss(fft, x, r, w, v):
        z = fft.rfft(r)
        return (w * fft.fft(x)).real.sum() + ((z.real.square() + z.imag.square()) * v).sum()

    x64, r64 = x.to(torch.complex128).requires_grad_(), r.double().requires_grad_()
    loss(torch.fft, x64, r64, w.to(torch.complex128), v.double()).backward()
    xd, rd = x.to(DEV).requires_grad_(), r.to(DEV).requires_grad_()
    loss(trnplan.fft, xd, rd, w.to(DEV), v.to(DEV)).backward()
    assert xd.grad.device.type == "xla"
    ex, er = rel_l2(xd.grad, x64.grad.numpy()), rel_l2(rd.grad, r64.grad.numpy())
    print(f"XLA-LANE gradients vs float64: c2c {ex:.3g}, r2c {er:.3g}")
    assert ex <= DEFAULT_TOL["fp32"] and er <= 2 * DEFAULT_TOL["fp32"]  # r2c: the forward and the adjoint plan


class SpectralConv1d(torch.nn.Module):
    """The FNO spectral layer (Li et al., "Fourier Neural Operator for Parametric PDEs", ICLR 2021):
    rfft, multiply the lowest ``modes`` by a learned complex weight per channel pair, irfft."""

    def __init__(self, channels: int, modes: int, fft):
        super().__init__()
        self.modes, self.fft = modes, fft
        scale = 1 / channels
        self.wr = torch.nn.Parameter(scale * torch.randn(channels, channels, modes))
        self.wi = torch.nn.Parameter(scale * torch.randn(channels, channels, modes))

    def forward(self, x):
        n = x.shape[-1]
        xf = self.fft.rfft(x)[..., : self.modes]
        re = torch.einsum("bim,iom->bom", xf.real, self.wr) - torch.einsum("bim,iom->bom", xf.imag, self.wi)
        im = torch.einsum("bim,iom->bom", xf.real, self.wi) + torch.einsum("bim,iom->bom", xf.imag, self.wr)
        out = torch.view_as_complex(torch.stack([re, im], -1))
        out = torch.nn.functional.pad(torch.view_as_real(out), (0, 0, 0, n // 2 + 1 - self.modes))
        return self.fft.irfft(torch.view_as_complex(out), n=n)


def test_fno_spectral_layer_trains_on_xla():
    torch.manual_seed(0)
    target = SpectralConv1d(2, 8, torch.fft)  # the operator to learn, with torch.fft on the host
    x = torch.randn(16, 2, 64)
    with torch.no_grad():
        y = target(x)
    torch.manual_seed(1)
    model = SpectralConv1d(2, 8, trnplan.fft).to(DEV)
    host = SpectralConv1d(2, 8, torch.fft)
    host.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    xd, yd = x.to(DEV), y.to(DEV)
    losses = []
    for step in range(30):
        opt.zero_grad()
        loss = (model(xd) - yd).square().mean()
        loss.backward()
        if step == 0:  # the first gradient against the same layer on the host with torch.fft
            (host(x) - y).square().mean().backward()
            assert rel_l2(model.wr.grad, host.wr.grad.double().numpy()) <= 1e-5
        opt.step()
        torch_xla.sync()
        losses.append(loss.item())
    print(f"XLA-LANE FNO layer: loss {losses[0]:.3g} -> {losses[-1]:.3g} in 30 Adam steps")
    assert losses[-1] < 0.1 * losses[0]


def test_compiled_model_calling_trnplan_on_xla_has_no_graph_break():
    """torch.compile(model, backend="openxla", fullgraph=True): trnplan's transforms are custom ops
    in the graph, which torch-xla then traces through (the plan's ops land in its XLA graph)."""
    model = SpectralConv1d(2, 8, trnplan.fft).to(DEV)
    x = torch.randn(4, 2, 64).to(DEV)
    expected = model(x).detach().cpu()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="openxla", fullgraph=True, dynamic=False)
    got = compiled(x).cpu()
    assert rel_l2(got, expected.double().numpy()) <= DEFAULT_TOL["fp32"]


def test_precompile_then_wisdom_only(tmp_path):
    """`trnplan precompile` with device="xla" entries fills the plan cache; a TRNPLAN_WISDOM_ONLY
    process then plans from wisdom (batch 5 finds the entry of its bucket, 6) and compiles the graph
    in the process (on XLA:CPU there is no persistent compile cache to fill)."""
    from trnplan.cache import PlanCache

    results = trnplan.precompile([{"shape": [1024], "batch": 6, "device": "xla"},
                                  {"shape": [256], "batch": 4, "kind": "r2c", "device": "xla"}],
                                 cache=tmp_path, progress=False)
    assert [(r.ok, r.error) for r in results] == [(True, None), (True, None)]
    trnplan.clear_plan_cache()
    plan = trnplan.plan_many(1024, 5, device="xla", cache=PlanCache(tmp_path), effort="wisdom_only")
    assert (plan.provenance.origin, plan.provenance.compile_mode) == ("wisdom hit", "dynamo")
    x = host_complex((5, 1024), 9)
    assert rel_l2(plan.execute(x.to(DEV)), np.fft.fft(x.to(torch.complex128).numpy())) <= DEFAULT_TOL["fp32"]
