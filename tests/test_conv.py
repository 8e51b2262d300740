"""trnplan.conv.plan_conv: batched long convolution with a filter bank, against a direct float64
convolution (numpy, O(L·K) sums) with the fp32/fp64 bars, and its gradients."""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
import torch
from support import concurrently, rel_l2

from trnplan.conv import plan_conv, smooth_length, transform_length, transform_lengths
from trnplan.core.accuracy import DEFAULT_TOL


def direct(x: np.ndarray, h: np.ndarray, mode: str) -> np.ndarray:
    """Σ_k h[c, k] x[b, c, n − k] in float64/complex128, by definition (1-D and 2-D)."""
    length, kernel = x.shape[2:], h.shape[1:]
    full = tuple(n + k - 1 for n, k in zip(length, kernel))
    y = np.zeros((*x.shape[:2], *full), dtype=np.result_type(x, h, np.float64))
    for k in np.ndindex(*kernel):
        index = (slice(None), slice(None), *(slice(i, i + n) for i, n in zip(k, length)))
        weight = h[(slice(None), *k)].reshape(1, -1, *([1] * len(kernel)))
        y[index] += weight * x
    if mode == "linear":
        return y
    if mode == "causal":
        return y[(..., *(slice(0, n) for n in length))]
    out = np.zeros((*x.shape[:2], *length), dtype=y.dtype)
    for idx in np.ndindex(*full):
        out[(..., *(i % n for i, n in zip(idx, length)))] += y[(..., *idx)]
    return out


@pytest.mark.parametrize("mode", ["linear", "causal", "circular"])
@pytest.mark.parametrize("length,kernel", [((100,), (13,)), ((64,), (64,)), ((20, 18), (5, 4))])
def test_matches_direct_convolution(mode, length, kernel):
    rng = np.random.default_rng(0)
    for dtype, bar in ((torch.float32, "fp32"), (torch.complex64, "fp32"), (torch.float64, "fp64")):
        x = rng.standard_normal((3, 4, *length)) + (1j * rng.standard_normal((3, 4, *length)) if dtype.is_complex
                                                    else 0)
        h = rng.standard_normal((4, *kernel))
        conv = plan_conv(torch.from_numpy(h).to(torch.float64 if bar == "fp64" else torch.float32), length, mode)
        y = conv(torch.from_numpy(x).to(dtype))
        assert y.dtype == dtype
        assert rel_l2(y, direct(x, h, mode)) <= DEFAULT_TOL[bar], (mode, length, dtype)


def test_complex_bank_and_a_new_bank_per_call():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 50))
    h = rng.standard_normal((3, 7)) + 1j * rng.standard_normal((3, 7))
    conv = plan_conv(torch.from_numpy(h).to(torch.complex64), 50, "causal")
    assert rel_l2(conv(torch.from_numpy(x).float()), direct(x, h, "causal")) <= DEFAULT_TOL["fp32"]
    h2 = rng.standard_normal((3, 7))
    y2 = plan_conv(torch.zeros(3, 7), 50, "causal")(torch.from_numpy(x).float(), filters=torch.from_numpy(h2).float())
    assert rel_l2(y2, direct(x, h2, "causal")) <= DEFAULT_TOL["fp32"]


def test_repeated_calls_reuse_nothing_they_return():
    """The CPU path keeps a zero-padded input buffer per thread and multiplies in place
    (ConvPlan._padded, _in_place): each call right, no result or input overwritten by a later call,
    another batch shape, another thread, or the gradient's (out-of-place) path."""
    rng = np.random.default_rng(2)
    h = rng.standard_normal((3, 6))
    for mode, length in (("linear", (40,)), ("causal", (40,)), ("circular", (40,)), ("linear", (9, 7))):
        hk = h[:, :4, None] * h[:, None, :3] if len(length) == 2 else h
        conv = plan_conv(torch.from_numpy(hk).float(), length, mode, method="library")
        xs = [rng.standard_normal(shape) for shape in ((2, 3, *length), (2, 3, *length), (5, 3, *length))]
        ts = [torch.from_numpy(x).float() for x in xs]
        ys = [conv(t) for t in ts]
        for x, t, y in zip(xs, ts, ys):
            assert np.array_equal(t.numpy(), x.astype(np.float32))  # the input untouched
            assert rel_l2(y, direct(x, hk, mode)) <= DEFAULT_TOL["fp32"], (mode, length, x.shape)
        results = concurrently(lambda i, conv=conv, ts=ts: [conv(ts[i % 3]) for _ in range(20)], 3)
        for i, got in results.items():
            assert all(rel_l2(y, direct(xs[i % 3], hk, mode)) <= DEFAULT_TOL["fp32"] for y in got), (mode, i)
    xc = rng.standard_normal((2, 3, 40)) + 1j * rng.standard_normal((2, 3, 40))
    tc = torch.from_numpy(xc).to(torch.complex64)
    yc = plan_conv(torch.from_numpy(h).float(), 40, "circular")(tc)  # no padding: the plan reads x itself
    assert np.array_equal(tc.numpy(), xc.astype(np.complex64))
    assert rel_l2(yc, direct(xc, h, "circular")) <= DEFAULT_TOL["fp32"]
    x = rng.standard_normal((2, 3, 40))
    xg = torch.from_numpy(x).float().requires_grad_()
    conv = plan_conv(torch.from_numpy(h).float(), 40, "linear", method="library")
    for _ in range(2):  # the second call is this thread's ready call for the signature (ConvPlan._seen_call)
        assert rel_l2(conv(xg.detach()), direct(x, h, "linear")) <= DEFAULT_TOL["fp32"]
    h2 = rng.standard_normal((3, 6))
    assert rel_l2(conv(xg.detach(), filters=torch.from_numpy(h2).float()), direct(x, h2, "linear")) <= DEFAULT_TOL["fp32"]
    assert rel_l2(conv(xg.detach()), direct(x, h, "linear")) <= DEFAULT_TOL["fp32"]  # the kept bank again
    conv(xg).sum().backward()  # d/dx[n] Σ_m y[m] = Σ_k h[k], every n (linear: no sample cut off)
    want = np.broadcast_to(h.sum(1)[None, :, None], (2, 3, 40))
    assert rel_l2(xg.grad, want) <= DEFAULT_TOL["fp32"]


def test_a_plan_with_ready_calls_saves_copies_and_converts():
    """The per-thread buffers and ready calls stay out of torch.save and deepcopy (each copy makes its
    own), and a replaced spectrum (a buffer reassigned, as ``Module.to`` does) is not multiplied by
    the old one's ready call."""
    rng = np.random.default_rng(3)
    x, h = rng.standard_normal((2, 3, 40)), rng.standard_normal((3, 6))
    xt, want = torch.from_numpy(x).float(), direct(x, h, "causal")
    conv = plan_conv(torch.from_numpy(h).float(), 40, "causal", method="library")
    conv(xt)
    assert conv._seen_call(xt) is not None
    stream = io.BytesIO()
    torch.save(conv, stream)
    stream.seek(0)
    for other in (torch.load(stream, weights_only=False), copy.deepcopy(conv)):
        for _ in range(2):
            assert rel_l2(other(xt), want) <= DEFAULT_TOL["fp32"]
        assert other._scratch.mine()[0].data_ptr() != conv._scratch.mine()[0].data_ptr()
    conv.spectrum = conv.spectrum.to(torch.complex128)
    assert conv._seen_call(xt) is None
    assert rel_l2(conv(xt), want) <= DEFAULT_TOL["fp32"]


def adjoint(g: np.ndarray, h: np.ndarray, mode: str, length: int) -> np.ndarray:
    """The signal's gradient of Σ g·y (1-D): Σ_k h[c, k] g[b, c, n + k], by definition in float64
    (g zero past the output; circular: n + k wraps)."""
    out = np.zeros((*g.shape[:2], length), dtype=np.float64)
    for k in range(h.shape[1]):
        idx = np.arange(length) + k
        if mode == "circular":
            idx %= length
        ok = idx < g.shape[2]
        out[..., ok] += h[None, :, k, None] * g[..., idx[ok]]
    return out


@pytest.mark.parametrize("method", ["library", "spatial", "gemm"])
def test_a_first_call_in_inference_mode_leaves_normal_calls_working(method):
    """The kept per-thread buffers (ConvPlan._padded; method=spatial's SpatialConv._padded), the
    full spectrum of complex signals and the plan's constants are normal tensors even when made under
    torch.inference_mode(): a later normal call writes the buffer ("Inplace update to inference
    tensor outside InferenceMode" before) and a gradient call saves them for backward."""
    rng = np.random.default_rng(4)
    h = rng.standard_normal((3, 5))
    for mode in ("linear", "causal", "circular"):
        x, g = rng.standard_normal((2, 3, 40)), rng.standard_normal((2, 3, 44 if mode == "linear" else 40))
        xt, want = torch.from_numpy(x).float(), direct(x, h, mode)
        with torch.inference_mode():  # a plan made there too: its spectrum and constants
            made_inside = plan_conv(torch.from_numpy(h).float(), 40, mode, method=method)
        conv = plan_conv(torch.from_numpy(h).float(), 40, mode, method=method)
        for plan in (conv, made_inside):
            with torch.inference_mode():
                assert rel_l2(plan(xt), want) <= DEFAULT_TOL["fp32"], (method, mode)
            for _ in range(2):  # the second: this thread's ready call for the signature
                assert rel_l2(plan(xt), want) <= DEFAULT_TOL["fp32"], (method, mode)
            xg = xt.clone().requires_grad_()
            (plan(xg) * torch.from_numpy(g).float()).sum().backward()
            assert rel_l2(xg.grad, adjoint(g, h, mode, 40)) <= DEFAULT_TOL["fp32"], (method, mode)
    if method == "library":  # complex signals with a real bank: the full spectrum kept at the first call
        xc = rng.standard_normal((2, 3, 40)) + 1j * rng.standard_normal((2, 3, 40))
        with torch.inference_mode():
            conv(torch.from_numpy(xc).to(torch.complex64))
        xg = torch.from_numpy(xc).to(torch.complex64).requires_grad_()
        y = conv(xg)
        assert rel_l2(y, direct(xc, h, mode)) <= DEFAULT_TOL["fp32"]
        y.real.sum().backward()
        assert rel_l2(xg.grad, adjoint(np.ones(y.shape), h, mode, 40)) <= DEFAULT_TOL["fp32"]


@pytest.mark.slow
def test_gradients_in_signal_and_filters():
    """gradcheck in float64 (~13 s here: each perturbed input runs the planned transforms)."""
    x = torch.randn(1, 2, 12, dtype=torch.float64, requires_grad=True)
    h = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    for mode in ("linear", "causal", "circular"):
        conv = plan_conv(h.detach(), 12, mode)
        assert torch.autograd.gradcheck(lambda a, b, conv=conv: conv(a, filters=b), (x, h))
        assert torch.autograd.gradcheck(conv, (x,))


def test_refusals_say_which():
    with pytest.raises(ValueError, match="mode must be one of"):
        plan_conv(torch.randn(2, 5), 10, mode="same")
    with pytest.raises(ValueError, match="filters no longer than the signal"):
        plan_conv(torch.randn(2, 12), 10, mode="circular")
    with pytest.raises(ValueError, match=r"shape \(C, K\)"):
        plan_conv(torch.randn(5), 10)
    conv = plan_conv(torch.randn(2, 5), 10)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 2, 10\)"):
        conv(torch.randn(4, 3, 10))
    with pytest.raises(ValueError, match=r"filters must have shape \(2, 5\)"):
        conv(torch.randn(4, 2, 10), filters=torch.randn(2, 6))


def test_smooth_lengths():
    for n in (1, 2, 7, 97, 1000, 4097, 65537):
        m = smooth_length(n)
        k = m
        for p in (2, 3, 5):
            while k % p == 0:
                k //= p
        assert m >= n and k == 1 and all(smooth_length(j) == m for j in range(n, m + 1) if j == n)
    assert smooth_length(4097) == 4320 and smooth_length(1000) == 1000


def test_transform_lengths_are_even_smooth_lengths():
    """The linear and causal transform length: an even 2·3·5-smooth length ≥ L + K − 1 (MKL's r2c of
    an odd one ran 2.2× the next even one's), the least that is a multiple of 16 within 1.25× of the
    least even one (MKL ran 270 1.7–2.4× 288, 4374 1.5× 4608), else the least even; and the
    convolution right there."""
    for n in (1, 2, 3, 7, 97, 125, 130, 263, 1000, 1031, 1088, 4097, 4351, 16386):
        m = transform_length(n)
        evens = [j for j in range(max(n, 2), int(1.25 * m) + 2) if j % 2 == 0 and smooth_length(j) == j]
        fast = [j for j in evens if j % 16 == 0 and j <= 1.25 * evens[0]]
        assert m == (fast[0] if fast else evens[0]), (n, m)
        assert transform_lengths(n)[0] == m and set(transform_lengths(n)) == set(fast) | {evens[0]}
    assert [transform_length(n) for n in (1088, 16386, 4159, 263, 4351, 1031, 130, 2055)] == [
        1152, 17280, 4320, 288, 4608, 1152, 144, 2160]
    rng = np.random.default_rng(6)
    x, h = rng.standard_normal((2, 3, 100)), rng.standard_normal((3, 26))  # 125 (odd) → 128
    for mode in ("linear", "causal"):
        conv = plan_conv(torch.from_numpy(h).float(), 100, mode, method="library")
        assert conv.n == (128,)
        assert rel_l2(conv(torch.from_numpy(x).float()), direct(x, h, mode)) <= DEFAULT_TOL["fp32"]
