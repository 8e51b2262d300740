"""Gradients through trnplan.fft: gradcheck, torch.fft's gradients, a Fourier neural operator
trained with both libraries, and the same model under torch.compile.

gradcheck compares the analytic backward (the adjoint plan) with central differences in float64;
its defaults (atol 1e-5, rtol 1e-3) are kept, tightened to atol 1e-8 where the transforms are
small enough for the finite-difference error (~eps² · |f'''| ≈ 1e-12 · n) to stay far below it.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from support import BAR, rel_l2
from torch import nn
from torch.autograd import gradcheck, gradgradcheck

import trnplan
import trnplan.nn
from trnplan import fft as tfft
from trnplan.fft import _engine

REAL_IN = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}
ONE_D = {"fft", "ifft", "rfft", "irfft", "hfft", "ihfft"}
C2R = {"irfft", "hfft", "irfft2", "hfft2", "irfftn", "hfftn"}
GRAD_FNS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2",
            "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Tiny transforms: one torch thread (2-thread MKL hand-off costs ~16 ms a call on a loaded
    2-core machine, against 0.03 ms on one thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _no_disk_cache():
    """These tests are about gradients, not the on-disk plan cache (tests/test_cache.py)."""
    trnplan.cache.set_default_cache(None)
    yield
    trnplan.cache.set_default_cache("env")


def make_input(shape, complex_, seed=0, requires_grad=True):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if complex_:
        a = a + 1j * rng.standard_normal(shape)
    return torch.from_numpy(a).requires_grad_(requires_grad)


def call(name, lib, x, size, norm):
    """``name`` from ``lib`` over a non-last dim (1-D) or dims (0, 2) with n/s = ``size``."""
    fn = getattr(lib, name)
    if name in ONE_D:
        return fn(x, n=size, dim=1, norm=norm)
    s = None if size is None else (size, size + 1) if name in C2R else (size, size)
    return fn(x, s=s, dim=(0, 2), norm=norm)


SIZES = (None, 3, 8)   # default, crop (inputs are 4-5 long), zero-pad
SHAPE = (4, 5, 4)


# ---------------------------------------------------------------------------- gradcheck
@pytest.mark.parametrize("name", GRAD_FNS)
@pytest.mark.parametrize("norm", ("backward", "ortho", "forward"))
def test_gradcheck(name, norm):
    """Every function × norm × n/s (default, crop, pad), in gradcheck's fast mode (the Jacobian
    checked along random directions u, v: vᵀ·J·u analytic vs numerical), which catches a wrong
    adjoint, scale or Hermitian weight with probability 1 and costs a few calls, not one per
    input element."""
    for size in SIZES:
        x = make_input(SHAPE, complex_=name not in REAL_IN, seed=size or 0)
        assert gradcheck(lambda t, size=size: call(name, tfft, t, size, norm), (x,), eps=1e-6, atol=1e-8,
                         fast_mode=True), (name, size)


@pytest.mark.parametrize("name", GRAD_FNS)
def test_gradcheck_full_jacobian(name):
    """The whole Jacobian, element by element, for every function (ortho; crop on one axis, pad
    on the other)."""
    x = make_input((3, 4, 3), complex_=name not in REAL_IN)
    if name in ONE_D:
        fn = lambda t: getattr(tfft, name)(t, n=5, dim=1, norm="ortho")
    else:
        fn = lambda t: getattr(tfft, name)(t, s=(2, 5), dim=(0, 2), norm="ortho")
    assert gradcheck(fn, (x,), eps=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ("fft", "fftn", "irfft"))
def test_gradcheck_real_input_promoted_to_complex(name):
    """Real input to a complex transform: the gradient is the real part of the complex one."""
    x = make_input(SHAPE, complex_=False)
    assert gradcheck(lambda t: call(name, tfft, t, None, "ortho"), (x,), eps=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ("fft", "rfft", "irfft", "rfft2", "irfftn"))
def test_gradgradcheck(name):
    """Second derivatives: the backward itself runs through a differentiable plan."""
    x = make_input((3, 4, 4), complex_=name not in REAL_IN)
    assert gradgradcheck(lambda t: call(name, tfft, t, None, "ortho"), (x,), eps=1e-6, atol=1e-8, fast_mode=True)


def test_gradcheck_non_contiguous_input():
    base = make_input((6, 5, 8), complex_=True)
    assert gradcheck(lambda t: tfft.fft2(t.transpose(0, 2)[:, ::2], s=(5, 3)), (base,), eps=1e-6, atol=1e-8)


# ---------------------------------------------------------------------------- torch's gradients
@pytest.mark.parametrize("name", GRAD_FNS)
@pytest.mark.parametrize("dtype", ("fp32", "fp64"))
def test_gradients_match_torch_fft(name, dtype):
    """The same loss through trnplan.fft and torch.fft gives the same input gradient, to the
    precision bar of the transforms (the gradient is one adjoint transform of the output's)."""
    for size in SIZES:
        for norm in (None, "ortho", "forward"):
            grads = []
            for lib in (tfft, torch.fft):
                x = make_input(SHAPE, complex_=name not in REAL_IN, seed=3)
                if dtype == "fp32":
                    x = x.detach().to(torch.complex64 if x.is_complex() else torch.float32).requires_grad_()
                y = call(name, lib, x, size, norm)
                w = make_input(y.shape, complex_=y.is_complex(), seed=4, requires_grad=False).to(y.dtype)
                (y.resolve_conj() * w.conj()).real.sum().backward()
                grads.append(x.grad.resolve_conj())
            err = rel_l2(grads[0], grads[1].to(torch.complex128 if grads[1].is_complex() else torch.float64))
            assert err <= 2 * BAR[dtype], f"{name} size={size} norm={norm}: gradient rel-L2 {err:.2e} vs torch.fft"


# ---------------------------------------------------------------------------- the compile-path operator
@pytest.mark.parametrize("kind,shape,inverse,complex_in", (
    ("c2c", [4, 6], True, True),
    ("r2c", [5, 6], False, False),
    ("c2r", [4, 7], True, True),
))
def test_compile_operator_passes_opcheck(kind, shape, inverse, complex_in):
    """trnplan::execute (the node torch.compile graphs hold) has a consistent schema, fake
    (shape-only) version and autograd registration; its gradient passes gradcheck."""
    in_tail = [*shape[:-1], shape[-1] // 2 + 1] if kind == "c2r" else shape
    x = make_input((3, *in_tail), complex_=complex_in)
    torch.library.opcheck(_engine._execute_op, (x, kind, shape, inverse, "ortho"))
    assert gradcheck(lambda t: _engine._execute_op(t, kind, shape, inverse, "ortho"), (x,), eps=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind,shape,inverse,n_in", (
    ("c2c", [4, 6], True, 2),
    ("r2c", [5, 6], False, 1),
    ("c2r", [4, 7], True, 2),
    ("r2c@2x3", [6, 8], False, 1),
    ("c2r@2x3", [6, 8], True, 2),
))
def test_split_compile_operator_passes_opcheck(kind, shape, inverse, n_in):
    """trnplan::execute_split (the node a split-weight layer's torch.compile graph holds): schema,
    fake version and autograd registration consistent; its gradient passes gradcheck; its output
    within the fp64 bar of numpy.fft in complex128 (a truncated c2r reads the kept block)."""
    base, _, word = kind.partition("@")
    if base == "c2r":
        tail = [2 * int(word.split("x")[0]), int(word.split("x")[1])] if word else [*shape[:-1], shape[-1] // 2 + 1]
    else:
        tail = shape
    rng = np.random.default_rng(7)
    if base == "c2r" and not word:  # a Hermitian-consistent half spectrum: the rfft of a real signal
        z = np.fft.rfftn(rng.standard_normal((3, *shape)), axes=(1, 2))
        parts = [np.ascontiguousarray(z.real), np.ascontiguousarray(z.imag)]
    else:
        parts = [rng.standard_normal((3, *tail)) for _ in range(n_in)]
    inputs = [torch.tensor(p, requires_grad=True) for p in parts]
    args = (kind, shape, inverse, "backward")
    torch.library.opcheck(_engine.execute_split_op, (inputs, *args))
    assert gradcheck(lambda *t: tuple(_engine.execute_split_op(list(t), *args)), tuple(inputs), eps=1e-6, atol=1e-8)
    out = _engine.execute_split_op([t.detach() for t in inputs], *args)
    if base == "c2c":
        ref = np.fft.ifftn(parts[0] + 1j * parts[1], axes=(1, 2))
        got = out[0].numpy() + 1j * out[1].numpy()
    elif base == "r2c":
        ref = np.fft.rfftn(parts[0], axes=(1, 2))
        if word:
            m0, m1 = (int(v) for v in word.split("x"))
            ref = np.concatenate([ref[:, :m0, :m1], ref[:, -m0:, :m1]], axis=1)
        got = out[0].numpy() + 1j * out[1].numpy()
    else:
        z = parts[0] + 1j * parts[1]
        if word:
            m0, m1 = (int(v) for v in word.split("x"))
            full = np.zeros((3, shape[0], shape[1] // 2 + 1), complex)
            full[:, :m0, :m1], full[:, -m0:, :m1] = z[:, :m0], z[:, m0:]
            z = full
        ref = np.fft.irfftn(z, s=shape, axes=(1, 2))
        got = out[0].numpy()
    assert rel_l2(got, ref) <= BAR["fp64"]


def _spectral_conv_reference(x, w, modes):
    """The FNO layer in numpy complex128: rfftn, the kept block (lowest and highest modes along the
    non-last axes, lowest along the last), the channel mixing, zero-filled back, irfftn."""
    dims = len(modes)
    axes = tuple(range(-dims, 0))
    grid = x.shape[-dims:]
    z = np.fft.rfftn(x, axes=axes)
    idx = [np.r_[0:m, n - m:n] for m, n in zip(modes[:-1], grid[:-1])] + [np.arange(modes[-1])]
    block = z[(..., *np.ix_(*idx))]
    y = np.einsum({1: "bix,iox->box", 2: "bixy,ioxy->boxy"}[dims], block, w)
    full = np.zeros((*y.shape[:2], *grid[:-1], grid[-1] // 2 + 1), complex)
    full[(..., *np.ix_(*idx))] = y
    return np.fft.irfftn(full, s=grid, axes=axes)


@pytest.mark.parametrize("modes,grid", (((5,), (24,)), ((3, 4), (10, 12))), ids=("1-D", "2-D"))
def test_split_weight_layer_traces_in_one_graph_under_torch_compile(modes, grid):
    """nn.SpectralConv with split weights (the form a NeuronCore takes) under
    torch.compile(fullgraph=True): one graph, each plan one trnplan::execute_split node (Dynamo no
    longer traces into planning); forward and the weights' and input's gradients equal eager's
    and are within the fp64 bar of the layer in numpy complex128."""
    torch._dynamo.reset()
    torch.manual_seed(3)
    layer = trnplan.nn.SpectralConv(3, 2, modes, dtype=torch.float64)
    x = torch.randn(2, 3, *grid, dtype=torch.float64, requires_grad=True)
    explained = torch._dynamo.explain(layer)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, \
        [str(b.reason) for b in explained.break_reasons]
    w = layer.weight.detach().numpy()
    ref = _spectral_conv_reference(x.detach().numpy(), w[..., 0] + 1j * w[..., 1], modes)

    def run(f):
        layer.zero_grad()
        x.grad = None
        y = f(x)
        (y * y).sum().backward()
        return y.detach(), layer.weight.grad.clone(), x.grad.clone()

    eager = run(layer)
    compiled = run(torch.compile(layer, fullgraph=True, backend="eager"))
    assert rel_l2(eager[0], ref) <= BAR["fp64"] and rel_l2(compiled[0], ref) <= BAR["fp64"]
    for a, b in zip(compiled, eager):
        assert rel_l2(a, b.numpy()) <= BAR["fp64"]
    torch._dynamo.reset()


# ---------------------------------------------------------------------------- a Fourier neural operator
class SpectralConv2d(nn.Module):
    """FNO's spectral layer (Li et al., "Fourier Neural Operator for Parametric PDEs", ICLR 2021):
    rfft2 → multiply the lowest ``modes`` frequencies (both signs along H) by learned complex
    weights → irfft2. The weights are stored as real (re, im) parameters and multiplied in real
    arithmetic, as trnplan does inside: Inductor generates no code for complex tensors."""

    def __init__(self, channels, modes, fft, dtype):
        super().__init__()
        self.fft, self.modes = fft, modes
        scale = 1.0 / channels
        self.weight = nn.Parameter(scale * torch.randn(2, 2, channels, channels, modes, modes, dtype=dtype))

    def forward(self, x):
        _, _, h, w = x.shape
        m = self.modes
        spectrum = self.fft.rfft2(x)
        blocks = []
        for k, rows in enumerate((spectrum[:, :, :m, :m], spectrum[:, :, h - m:, :m])):
            xr, xi = rows.real, rows.imag
            wr, wi = self.weight[k, 0], self.weight[k, 1]
            yr = torch.einsum("bixy,ioxy->boxy", xr, wr) - torch.einsum("bixy,ioxy->boxy", xi, wi)
            yi = torch.einsum("bixy,ioxy->boxy", xr, wi) + torch.einsum("bixy,ioxy->boxy", xi, wr)
            blocks.append(torch.complex(yr, yi))
        gap = torch.zeros(*blocks[0].shape[:2], h - 2 * m, m, dtype=spectrum.dtype, device=x.device)
        modes = torch.cat([blocks[0], gap, blocks[1]], dim=2)
        modes = nn.functional.pad(modes, (0, w // 2 + 1 - m))
        return self.fft.irfft2(modes, s=(h, w))


class FNO(nn.Module):
    def __init__(self, fft, width=6, modes=4, layers=2, dtype=torch.float64):
        super().__init__()
        self.lift = nn.Conv2d(1, width, 1, dtype=dtype)
        self.spectral = nn.ModuleList(SpectralConv2d(width, modes, fft, dtype) for _ in range(layers))
        self.pointwise = nn.ModuleList(nn.Conv2d(width, width, 1, dtype=dtype) for _ in range(layers))
        self.project = nn.Conv2d(width, 1, 1, dtype=dtype)

    def forward(self, x):
        x = self.lift(x)
        for spectral, pointwise in zip(self.spectral, self.pointwise):
            x = nn.functional.gelu(spectral(x) + pointwise(x))
        return self.project(x)


def heat_data(batch, size, dtype, seed=0):
    """Inputs: random fields; targets: the same fields after a step of the heat equation (a
    spectral low-pass, the kind of operator an FNO learns), computed with numpy.fft."""
    rng = np.random.default_rng(seed)
    u0 = rng.standard_normal((batch, 1, size, size))
    k = np.fft.fftfreq(size) * size
    decay = np.exp(-0.02 * (k[:, None] ** 2 + k[None, :] ** 2))
    u1 = np.fft.ifft2(np.fft.fft2(u0) * decay).real
    return torch.from_numpy(u0).to(dtype), torch.from_numpy(u1).to(dtype)


def train(fft, steps, dtype, seed=0):
    torch.manual_seed(seed)
    model = FNO(fft, dtype=dtype)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = heat_data(4, 16, dtype)
    losses, grads = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]).clone())
        opt.step()
    return losses, grads, model


def test_fno_trains_like_torch_fft_fp64():
    """Five Adam steps from the same init on the same data: losses and gradients agree.

    Per step the model runs 8 transforms (rfft2 + irfft2 per layer, forward and backward), each
    within 1e-12 of exact in fp64; 5 steps give ≲ 4e-11 relative, and the bound 1e-9 leaves 25×
    for the conditioning of GELU and of Adam's step (which divides by √v)."""
    steps = 5
    losses_t, grads_t, _ = train(tfft, steps, torch.float64)
    losses_r, grads_r, _ = train(torch.fft, steps, torch.float64)
    assert losses_t[-1] < losses_t[0], "the model does not learn"
    for step in range(steps):
        assert abs(losses_t[step] - losses_r[step]) <= 1e-9 * abs(losses_r[step]), step
        assert rel_l2(grads_t[step], grads_r[step].numpy()) <= 1e-9, step


def test_fno_first_step_matches_torch_fft_fp32():
    """In fp32 each transform is within 1e-6 of exact (torch.fft's too), so two libraries'
    gradients after 8 transforms differ by ≲ 2·8·1e-6; the bound is 2e-5."""
    losses_t, grads_t, _ = train(tfft, 1, torch.float32)
    losses_r, grads_r, _ = train(torch.fft, 1, torch.float32)
    assert abs(losses_t[0] - losses_r[0]) <= 2e-5 * abs(losses_r[0])
    assert rel_l2(grads_t[0], grads_r[0].numpy()) <= 2e-5


@pytest.mark.slow
def test_fno_under_torch_compile_matches_eager():
    """torch.compile (default Inductor backend, CPU): one graph with no breaks (each transform
    is one trnplan::execute node), and the compiled forward and backward equal eager's within
    fp64 rounding of the reordered pointwise ops (≤ 1e-12 relative; bound 1e-10)."""
    torch._dynamo.reset()
    torch.manual_seed(1)
    model = FNO(tfft, width=4, modes=3, layers=1, dtype=torch.float64)
    x, y = heat_data(2, 12, torch.float64, seed=1)

    explained = torch._dynamo.explain(model)(x)
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
    assert explained.graph_count == 1

    def loss_and_grads(m):
        model.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        loss.backward()
        return loss.item(), torch.cat([p.grad.flatten() for p in model.parameters()]).clone()

    loss_e, grad_e = loss_and_grads(model)
    start = time.perf_counter()
    compiled = torch.compile(model)
    loss_c, grad_c = loss_and_grads(compiled)
    loss_c2, grad_c2 = loss_and_grads(compiled)  # the second call runs the cached compiled code
    print(f"torch.compile of the FNO: first call {time.perf_counter() - start:.1f} s")
    for loss, grad in ((loss_c, grad_c), (loss_c2, grad_c2)):
        assert abs(loss - loss_e) <= 1e-10 * abs(loss_e)
        assert rel_l2(grad, grad_e.numpy()) <= 1e-10
    torch._dynamo.reset()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", ("fft", "rfft", "irfft", "rfft2", "irfft2", "hfftn"))
def test_gradcheck_on_cuda(name):
    x = make_input(SHAPE, complex_=name not in REAL_IN, requires_grad=False).cuda().requires_grad_()
    assert gradcheck(lambda t: call(name, tfft, t, 8, "ortho"), (x,), eps=1e-6, atol=1e-8, fast_mode=True)
