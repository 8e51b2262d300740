"""trnplan.fft against torch.fft (semantics: shape, dtype, errors) and numpy.fft in complex128 (values).

Every numeric case runs the trnplan function and torch.fft's on the same input, requires the
same output shape and dtype, and bounds the relative L2 distance to numpy.fft on the input cast
to complex128/float64 by the engine's bar for the output's precision (conftest.BAR: fp32 1e-6,
fp64 1e-12). numpy has no hfft2/hfftn/ihfft2/ihfftn; their reference is built from numpy's 1-D
Hermitian transform and its c2c fftn over the other axes (a different route from trnplan's
conj/irfftn identity, so it checks that identity).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from support import BAR, rel_l2

import trnplan
from trnplan import fft as tfft
from trnplan.core import state
from trnplan.plan import api as plan_api

C2C_1D = ("fft", "ifft")
R2C_1D = ("rfft", "ihfft")
C2R_1D = ("irfft", "hfft")
ND_2 = ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2")
ND_N = ("fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")
ALL = C2C_1D + R2C_1D + C2R_1D + ND_2 + ND_N
NORMS = (None, "backward", "ortho", "forward")
REAL_IN = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}   # complex input is an error
C2R = {"irfft", "hfft", "irfft2", "hfft2", "irfftn", "hfftn"}       # n / s[-1] is the output length


@pytest.fixture(scope="module", autouse=True)
def _module_plan_cache():
    """Plans are shared by the tests of this module, as in a process that calls trnplan.fft many
    times: ~900 cases would otherwise plan ~3000 times from scratch. The in-process plan cache is
    emptied when the module starts and ends; the tests that are about plan reuse clear it
    themselves. The transforms here are tiny, so torch runs them on one thread: on a loaded
    2-core machine each 2-thread MKL call measured 16 ms of thread hand-off against 0.03 ms on
    one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    trnplan.clear_plan_cache()
    yield
    trnplan.clear_plan_cache()
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _fresh_plan_cache(monkeypatch):
    """Overrides conftest's per-test fixture of the same name (which empties the in-process plan
    cache before every test). These tests are about the API, not the on-disk plan cache
    (tests/test_cache.py): it is bypassed, so nothing is read or written on disk."""
    monkeypatch.delenv("TRNPLAN_WISDOM_ONLY", raising=False)
    monkeypatch.delenv("TRNPLAN_TRUST_CACHE", raising=False)
    trnplan.cache.set_default_cache(None)
    yield
    state.reset(keep=("plan.memo",))  # the rest of a fresh process's state (set_default_cache too)


def dtypes_for(name):
    return (torch.float32, torch.float64) if name in REAL_IN else (
        torch.float32, torch.float64, torch.complex64, torch.complex128)


def make_input(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if dtype.is_complex:
        a = a + 1j * rng.standard_normal(shape)
    return torch.from_numpy(a).to(dtype)


def precision_of(y: torch.Tensor) -> str:
    return "fp64" if y.dtype in (torch.float64, torch.complex128) else "fp32"


# ---------------------------------------------------------------------------- numpy reference
def _np_norm(norm):
    return "backward" if norm is None else norm


def numpy_reference(name, x: torch.Tensor, n_or_s, dim, norm):
    """numpy.fft in complex128 with torch.fft's argument conventions (axes resolved here)."""
    a = x.detach().resolve_conj().cpu().numpy()
    a = a.astype(np.complex128) if np.iscomplexobj(a) else a.astype(np.float64)
    norm = _np_norm(norm)
    if name in C2C_1D + R2C_1D + C2R_1D:
        return getattr(np.fft, name)(a, n=n_or_s, axis=dim, norm=norm)
    # N-D: resolve axes and s as torch documents (s alone -> the last len(s) dims; -1 keeps a size)
    if dim is None:
        axes = list(range(a.ndim)) if n_or_s is None else list(range(a.ndim - len(n_or_s), a.ndim))
    else:
        axes = [dim] if isinstance(dim, int) else list(dim)
    axes = [d % a.ndim for d in axes]
    s = None
    if n_or_s is not None:
        s = [a.shape[d] if v == -1 else v for d, v in zip(axes, n_or_s)]
        if name in C2R and n_or_s[-1] == -1:
            s[-1] = 2 * (a.shape[axes[-1]] - 1)
    base = name.rstrip("2n") if name.endswith(("2", "n")) else name
    if base in ("fft", "ifft", "rfft", "irfft"):
        return getattr(np.fft, base + "n")(a, s=s, axes=axes, norm=norm)
    others, last = axes[:-1], axes[-1]
    s_others = None if s is None else s[:-1]
    n_last = None if s is None else s[-1]
    if base == "hfft":  # forward c2c over the other axes, then numpy's 1-D Hermitian transform
        b = np.fft.fftn(a, s=s_others, axes=others, norm=norm) if others else a
        return np.fft.hfft(b, n=n_last, axis=last, norm=norm)
    assert base == "ihfft"
    b = np.fft.ihfft(a, n=n_last, axis=last, norm=norm)
    return np.fft.ifftn(b, s=s_others, axes=others, norm=norm) if others else b


def check_case(name, x, n_or_s, dim, norm, *, dim_kw=True):
    """Run trnplan and torch on x; same shape and dtype as torch, within BAR of numpy complex128."""
    key = "n" if name in C2C_1D + R2C_1D + C2R_1D else "s"
    kwargs = {key: n_or_s, "norm": norm}
    if dim_kw:
        kwargs["dim"] = dim
    y = getattr(tfft, name)(x, **kwargs)
    t = getattr(torch.fft, name)(x, **kwargs)
    assert y.shape == t.shape, f"{name}: shape {tuple(y.shape)} vs torch {tuple(t.shape)}"
    assert y.dtype == t.dtype, f"{name}: dtype {y.dtype} vs torch {t.dtype}"
    ref = numpy_reference(name, x, n_or_s, dim if dim_kw else _default_dim(name), norm)
    assert ref.shape == tuple(y.shape)
    err = rel_l2(y.resolve_conj(), ref)
    assert err <= BAR[precision_of(y)], f"{name} n/s={n_or_s} dim={dim} norm={norm} {x.dtype}: rel-L2 {err:.2e}"
    return y


def _default_dim(name):
    return (-2, -1) if name.endswith("2") else (-1 if name in C2C_1D + R2C_1D + C2R_1D else None)


# ---------------------------------------------------------------------------- 1-D transforms
SHAPE_3D = (5, 6, 7)  # odd and even sizes on every axis


def n_choices(m, c2r):
    """None, smaller, larger, odd — relative to the input size m along dim (the output length for c2r)."""
    if c2r:
        return (None, max(1, m - 2), 2 * m + 2, 2 * m - 1)
    return (None, max(1, m - 2), m + 3, 2 * m + 1 if m % 2 == 0 else m + 2)


@pytest.mark.parametrize("name", C2C_1D + R2C_1D + C2R_1D)
@pytest.mark.parametrize("dim", (-1, 0, 1, -2))
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("which_n", range(4))
def test_1d_against_torch_and_numpy(name, dim, norm, which_n):
    for dtype in dtypes_for(name):
        x = make_input(SHAPE_3D, dtype, seed=which_n)
        n = n_choices(SHAPE_3D[dim], name in C2R)[which_n]
        check_case(name, x, n, dim, norm)


@pytest.mark.parametrize("name", C2C_1D + R2C_1D + C2R_1D)
def test_1d_defaults_positional(name):
    x = make_input((3, 10), torch.complex64 if name not in REAL_IN else torch.float32)
    y = getattr(tfft, name)(x)
    check_case(name, x, None, -1, None, dim_kw=False)
    # positional n, dim, norm as in torch's signature
    y2 = getattr(tfft, name)(x, 8, 0, "ortho")
    t2 = getattr(torch.fft, name)(x, 8, 0, "ortho")
    assert y2.shape == t2.shape and y.dtype == y2.dtype
    assert rel_l2(y2.resolve_conj(), numpy_reference(name, x, 8, 0, "ortho")) <= BAR["fp32"]


# ---------------------------------------------------------------------------- N-D transforms
def s_choices(sizes, c2r):
    """None, cropped, padded, odd-with-(-1) — for the transformed dims' input sizes."""
    cropped = [max(1, m - 1) for m in sizes]
    padded = [m + 2 for m in sizes]
    odd = [-1] * (len(sizes) - 1) + [2 * sizes[-1] - 1 if c2r else sizes[-1] + (1 if sizes[-1] % 2 == 0 else 2)]
    return (None, cropped, padded, odd)


DIMS_2 = ((-2, -1), (0, 2), (-1, 0), (2, 1))          # default, non-adjacent, reversed, reversed middle
DIMS_N = (None, (0, 2), (-1, 0), (1,), (0, 1, 2), (2, 0, 1))


def _sizes(shape, dims, s):
    if dims is None:
        dims = range(len(shape)) if s is None else range(len(shape) - len(s), len(shape))
    return [shape[d] for d in dims]


@pytest.mark.parametrize("name", ND_2)
@pytest.mark.parametrize("dim", DIMS_2)
@pytest.mark.parametrize("norm", NORMS)
def test_2d_against_torch_and_numpy(name, dim, norm):
    for which in range(4):
        for dtype in dtypes_for(name):
            x = make_input(SHAPE_3D, dtype, seed=which)
            s = s_choices(_sizes(SHAPE_3D, dim, None), name in C2R)[which]
            check_case(name, x, s, dim, norm)


@pytest.mark.parametrize("name", ND_N)
@pytest.mark.parametrize("dim", DIMS_N)
@pytest.mark.parametrize("norm", NORMS)
def test_nd_against_torch_and_numpy(name, dim, norm):
    for which in range(4):
        for dtype in dtypes_for(name):
            x = make_input(SHAPE_3D, dtype, seed=which)
            s = s_choices(_sizes(SHAPE_3D, dim, None), name in C2R)[which]
            check_case(name, x, s, dim, norm)


@pytest.mark.parametrize("name", ND_N)
def test_nd_s_without_dim_takes_the_last_dims(name):
    x = make_input((3, 4, 6), torch.float64 if name in REAL_IN else torch.complex128)
    check_case(name, x, (5, -1), None, "ortho")
    check_case(name, x, (8,), None, None)


@pytest.mark.parametrize("name", ND_2 + ND_N)
def test_nd_4d_input_batched_over_two_dims(name):
    x = make_input((2, 3, 4, 5), torch.float32 if name in REAL_IN else torch.complex64)
    check_case(name, x, None, (1, 3), "forward")


# ---------------------------------------------------------------------------- layouts and edge sizes
def _non_contiguous_inputs(dtype):
    base = make_input((6, 8, 10), dtype, seed=3)
    yield "transpose", base.transpose(0, 2)
    yield "strided", base[:, ::2, 1::3]
    yield "expanded", base[:1].expand(4, 8, 10)
    if dtype.is_complex:
        yield "conj view", base.conj()


@pytest.mark.parametrize("name", ALL)
def test_non_contiguous_inputs(name):
    dtype = torch.float64 if name in REAL_IN else torch.complex128
    for label, x in _non_contiguous_inputs(dtype):
        assert not x.is_contiguous() or x.is_conj(), label
        dim = -1 if name in C2C_1D + R2C_1D + C2R_1D else (0, -1)
        check_case(name, x, None, dim, None)


@pytest.mark.parametrize("name", ALL)
def test_size_one_axes(name):
    dtype = torch.float32 if name in REAL_IN else torch.complex64
    one_d = name in C2C_1D + R2C_1D + C2R_1D
    x = make_input((1, 4, 1), dtype)
    if name in C2R:
        # length-1 input along the real axis would default to n = 0: give the output length
        check_case(name, x, 1 if one_d else (1, 1), -1 if one_d else (0, 2), None)
        check_case(name, x, 3 if one_d else (-1, 3), -1 if one_d else (0, 2), "ortho")
    else:
        check_case(name, x, None, -1 if one_d else (0, 2), None)
        check_case(name, x, 1, 1, "ortho") if one_d else check_case(name, x, (1, 1), (0, 1), "ortho")


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("lead", ((0,), (3, 0)))
def test_empty_batch_gives_an_empty_result(name, lead):
    """A leading dimension of 0: torch.fft raises an MKL error on the CPU; trnplan returns the
    empty tensor torch.fft gives on the meta device (same shape and dtype), and no plan is made."""
    dtype = torch.float32 if name in REAL_IN else torch.complex64
    one_d = name in C2C_1D + R2C_1D + C2R_1D
    x = torch.zeros((*lead, 6, 8), dtype=dtype)
    kwargs = {} if one_d or name.endswith("2") else {"dim": (-2, -1)}
    before = trnplan.plan_cache_info()["size"]
    y = getattr(tfft, name)(x, **kwargs)
    meta = getattr(torch.fft, name)(x.to("meta"), **kwargs)
    assert y.shape == meta.shape and y.dtype == meta.dtype and y.numel() == 0 and y.device == x.device
    assert trnplan.plan_cache_info()["size"] == before


def test_empty_batch_keeps_autograd_connected():
    x = torch.zeros((0, 8), dtype=torch.float64, requires_grad=True)
    y = tfft.rfft(x)
    assert y.requires_grad
    y.abs().sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape


def test_zero_length_axis_is_padded_when_n_is_given():
    x = torch.zeros((3, 0), dtype=torch.complex64)
    y = tfft.fft(x, n=4)
    assert y.shape == torch.fft.fft(x, n=4).shape
    assert torch.count_nonzero(y) == 0


def test_fftn_over_no_dims_returns_the_promoted_input():
    x = make_input((3, 4), torch.float64)
    for y, t in ((tfft.fftn(x, dim=()), torch.fft.fftn(x, dim=())),
                 (tfft.fftn(torch.tensor(2.5)), torch.fft.fftn(torch.tensor(2.5)))):
        assert y.shape == t.shape and y.dtype == t.dtype
        assert torch.equal(y, t)


# ---------------------------------------------------------------------------- dtype rules
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", (torch.int64, torch.int32, torch.bool, torch.uint8))
def test_integer_and_bool_inputs_are_promoted_like_torch(name, dtype):
    x = torch.arange(24).reshape(4, 6).remainder(3).to(dtype)
    y, t = getattr(tfft, name)(x), getattr(torch.fft, name)(x)
    assert y.dtype == t.dtype and y.shape == t.shape
    assert rel_l2(y.resolve_conj(), t.resolve_conj().to(torch.complex128 if t.is_complex() else torch.float64)) \
        <= BAR["fp32"]


def test_integer_input_follows_the_default_dtype():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        x = torch.arange(8)
        assert tfft.fft(x).dtype == torch.fft.fft(x).dtype == torch.complex128
        assert tfft.rfft(x).dtype == torch.fft.rfft(x).dtype == torch.complex128
        assert tfft.irfft(x).dtype == torch.fft.irfft(x).dtype == torch.float64
    finally:
        torch.set_default_dtype(old)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16, torch.complex32))
def test_half_precision_inputs_raise_a_clear_error(name, dtype):
    """torch.fft on the CPU raises RuntimeError for these; trnplan raises UnsupportedDtypeError,
    which is a RuntimeError (so drop-in code keeps working) and a TypeError, naming the fix."""
    if dtype == torch.complex32 and name in REAL_IN:
        dtype = torch.float16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
        x = torch.ones(4, 8).to(dtype)
    with pytest.raises(RuntimeError):
        getattr(torch.fft, name)(x)
    with pytest.raises(tfft.UnsupportedDtypeError, match=r"float32.*float64|\.float\(\)|complex64") as info:
        getattr(tfft, name)(x)
    assert isinstance(info.value, TypeError) and isinstance(info.value, RuntimeError)
    assert ("x.float()" in str(info.value)) or ("x.to(torch.complex64)" in str(info.value))


@pytest.mark.parametrize("name", sorted(REAL_IN))
def test_complex_input_to_real_transforms_is_an_error_like_torch(name):
    x = torch.ones(4, 8, dtype=torch.complex64)
    with pytest.raises(RuntimeError):
        getattr(torch.fft, name)(x)
    with pytest.raises(RuntimeError, match="expects a real input tensor.*trnplan.fft"):
        getattr(tfft, name)(x)


def test_ihfft_is_a_conjugate_view_like_torch():
    x = make_input((4, 10), torch.float64)
    assert tfft.ihfft(x).is_conj() == torch.fft.ihfft(x).is_conj()
    assert tfft.ihfftn(x).is_conj() == torch.fft.ihfftn(x).is_conj()


# ---------------------------------------------------------------------------- argument errors
def _error_cases():
    x = torch.randn(4, 6)
    xc = torch.randn(4, 6, dtype=torch.complex64)
    return [
        ("fft", (x,), {"dim": 2}),
        ("fft", (x,), {"dim": -3}),
        ("fft", (torch.tensor(1.0),), {}),
        ("fft2", (torch.randn(5),), {}),
        ("fftn", (x,), {"dim": (0, -2)}),
        ("rfftn", (x,), {"dim": (1, 1)}),
        ("fftn", (x,), {"s": (3,), "dim": (0, 1)}),
        ("fft2", (x,), {"s": (3,)}),
        ("fftn", (x,), {"s": (3, 3, 3)}),
        ("fft", (x,), {"n": 0}),
        ("fft", (x,), {"n": -1}),
        ("fftn", (x,), {"s": (-2, 3)}),
        ("fft", (torch.zeros(3, 0),), {}),
        ("irfft", (torch.ones(3, 1, dtype=torch.complex64),), {}),
        ("irfftn", (torch.ones(3, 1, dtype=torch.complex64),), {}),
        ("hfft", (torch.ones(3, 1, dtype=torch.complex64),), {}),
        ("irfft", (xc,), {"n": 0}),
        ("rfftn", (x,), {"dim": ()}),
        ("irfftn", (xc,), {"dim": ()}),
        ("ihfftn", (x,), {"dim": []}),
        ("fft", (x,), {"norm": "bad"}),
        ("ifft2", (xc,), {"norm": "orthonormal"}),
        ("fft", (x,), {"norm": 1}),
        ("fft", (x,), {"n": 4.0}),
        ("fft", (x,), {"n": True}),
        ("fft", (x,), {"dim": 1.0}),
        ("fft", (x.numpy(),), {}),
        ("rfft", (xc,), {}),
    ]


@pytest.mark.parametrize("case", range(len(_error_cases())))
def test_bad_arguments_raise_what_torch_raises(case):
    name, args, kwargs = _error_cases()[case]
    with pytest.raises(Exception) as torch_err:
        getattr(torch.fft, name)(*args, **kwargs)
    with pytest.raises(Exception) as ours:
        getattr(tfft, name)(*args, **kwargs)
    assert isinstance(ours.value, type(torch_err.value)), (
        f"{name}{kwargs}: torch raises {type(torch_err.value).__name__}, trnplan {type(ours.value).__name__}: {ours.value}")
    assert len(str(ours.value)) > 20


def test_error_messages_name_the_problem():
    x = torch.randn(4, 6)
    with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got 2"):
        tfft.fft(x, dim=2)
    with pytest.raises(RuntimeError, match="unique"):
        tfft.fftn(x, dim=(0, -2))
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\).*pass n/s"):
        tfft.fft(x, n=0)
    with pytest.raises(RuntimeError, match=r'Invalid normalization mode: "bad".*"ortho"'):
        tfft.fft(x, norm="bad")
    with pytest.raises(RuntimeError, match="at least one axis"):
        tfft.rfftn(x, dim=())


# ---------------------------------------------------------------------------- out=
@pytest.mark.parametrize("name", ("fft", "rfft", "irfft", "fft2", "irfftn"))
def test_out_receives_the_result(name):
    x = make_input((4, 6), torch.float32 if name in REAL_IN else torch.complex64)
    want = getattr(tfft, name)(x)
    out = torch.empty_like(want)
    got = getattr(tfft, name)(x, out=out)
    assert got is out and torch.equal(out, want)
    empty = torch.empty(0, dtype=want.dtype)
    assert getattr(tfft, name)(x, out=empty) is empty and torch.equal(empty, want)


def test_out_with_the_wrong_shape_is_resized_with_a_warning_like_torch():
    x = make_input((4, 6), torch.complex64)
    out, out_t = torch.empty(2, 2, dtype=torch.complex64), torch.empty(2, 2, dtype=torch.complex64)
    with pytest.warns(UserWarning, match="resized"):
        tfft.fft(x, out=out)
    with pytest.warns(UserWarning, match="resized"):
        torch.fft.fft(x, out=out_t)
    assert out.shape == out_t.shape == (4, 6)
    assert rel_l2(out, numpy_reference("fft", x, None, -1, None)) <= BAR["fp32"]


def test_out_of_a_wider_complex_dtype_is_cast_like_torch():
    x = make_input((4, 6), torch.complex64)
    out = torch.empty(4, 6, dtype=torch.complex128)
    tfft.fft(x, out=out)
    assert out.dtype == torch.complex128
    assert rel_l2(out, numpy_reference("fft", x, None, -1, None)) <= BAR["fp32"]


def test_out_errors_like_torch():
    x = make_input((4, 6), torch.complex64)
    with pytest.raises(RuntimeError, match="complex output"):
        tfft.fft(x, out=torch.empty(4, 6))
    with pytest.raises(RuntimeError, match="floating point output"):
        tfft.irfft(x, out=torch.empty(4, 10, dtype=torch.int64))
    xg = x.clone().requires_grad_()
    with pytest.raises(RuntimeError):
        torch.fft.fft(xg, out=torch.empty(4, 6, dtype=torch.complex64))
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        tfft.fft(xg, out=torch.empty(4, 6, dtype=torch.complex64))


# ---------------------------------------------------------------------------- plan reuse
def test_repeated_calls_do_not_replan(monkeypatch):
    """After the first call, trnplan.fft answers from its own front cache: plan_many is not
    called again and the process-wide plan cache does not grow."""
    trnplan.clear_plan_cache()
    x = make_input((8, 64), torch.complex64)
    calls = []
    real_plan_many = plan_api.plan_many
    monkeypatch.setattr(plan_api, "plan_many", lambda *a, **k: calls.append(a) or real_plan_many(*a, **k))
    y0 = tfft.fft(x)
    size = trnplan.plan_cache_info()["size"]
    assert len(calls) == 1 and size >= 1
    for _ in range(5):
        assert torch.equal(tfft.fft(x), y0)
    assert len(calls) == 1 and trnplan.plan_cache_info()["size"] == size
    # the same shape with another norm or direction is another plan
    tfft.fft(x, norm="ortho")
    tfft.ifft(x)
    assert len(calls) == 3
    # a cleared process-wide cache reaches the front cache: the next call plans again
    trnplan.clear_plan_cache()
    assert torch.equal(tfft.fft(x), y0)
    assert len(calls) == 4


def test_the_front_cache_returns_the_plan_the_first_call_made():
    """The front ends' alias: a repeated call gets the plan the first call made (for a new shape, the
    device's own FFT planned without a search, api.dropin_plan), not a new one."""
    trnplan.clear_plan_cache()
    x = make_input((3, 5, 16), torch.float32)
    tfft.rfft2(x)
    plan = plan_api.cached_plan("r2c", (5, 16), 3, torch.complex64, "backward", False, x.device)
    assert plan_api.cached_plan("r2c", (5, 16), 3, torch.complex64, "backward", False, x.device) is plan
    assert plan.problem.kind == "r2c" and plan.problem.shape == (5, 16) and plan.problem.batch == 3


# ---------------------------------------------------------------------------- frequency helpers
def test_fftfreq_rfftfreq_against_numpy():
    for n in (1, 2, 7, 8):
        for d in (1.0, 0.25):
            assert rel_l2(tfft.fftfreq(n, d, dtype=torch.float64), np.fft.fftfreq(n, d)) <= BAR["fp64"]
            assert rel_l2(tfft.rfftfreq(n, d, dtype=torch.float64), np.fft.rfftfreq(n, d)) <= BAR["fp64"]
    assert tfft.fftfreq(4, requires_grad=True).requires_grad


def test_fftshift_ifftshift_against_numpy():
    a = np.arange(5 * 6).reshape(5, 6)
    x = torch.from_numpy(a)
    np.testing.assert_array_equal(tfft.fftshift(x).numpy(), np.fft.fftshift(a))
    np.testing.assert_array_equal(tfft.ifftshift(x, dim=0).numpy(), np.fft.ifftshift(a, axes=0))
    np.testing.assert_array_equal(tfft.ifftshift(tfft.fftshift(x, dim=(0, 1)), dim=(0, 1)).numpy(), a)


R2R_FUNCTIONS = ("dct", "idct", "dst", "idst", "dctn", "idctn", "dstn", "idstn")
#: trnplan's own: torch.fft has no truncated transforms
TRUNCATED_FUNCTIONS = {"rfftn_truncated": ["input", "modes", "s", "dim", "norm", "low"],
                       "irfftn_truncated": ["input", "s", "modes", "dim", "norm", "low"]}


def test_signatures_match_torch_fft():
    """Each public function has torch.fft's signature (names, order, defaults, keyword-only
    marker, as torch's docstring states it) and a numpydoc docstring."""
    import inspect

    for name in tfft.__all__:
        if name == "UnsupportedDtypeError":
            continue
        doc = inspect.getdoc(getattr(tfft, name))
        for section in ("Parameters", "Returns", "Raises", "Examples"):
            assert f"{section}\n--" in doc, f"{name}: no {section} section"
        if name in R2R_FUNCTIONS:  # scipy.fft's real-to-real transforms: torch.fft has none
            assert not hasattr(torch.fft, name)
            params = list(inspect.signature(getattr(tfft, name)).parameters)
            assert params == ["input", "type", "s" if name.endswith("n") else "n", "dim", "norm", "out"], name
            continue
        if name in TRUNCATED_FUNCTIONS:
            assert not hasattr(torch.fft, name)
            params = inspect.signature(getattr(tfft, name)).parameters
            assert list(params) == TRUNCATED_FUNCTIONS[name]
            assert params["low"].kind is inspect.Parameter.KEYWORD_ONLY, name
            continue
        torch_sig = getattr(torch.fft, name).__doc__.strip().splitlines()[0]
        torch_params = torch_sig[torch_sig.index("(") : torch_sig.rindex(")") + 1]
        sig = inspect.signature(getattr(tfft, name))  # compared without trnplan's type annotations
        bare = sig.replace(parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                           return_annotation=sig.empty)
        assert str(bare) == torch_params, name


# ---------------------------------------------------------------------------- CUDA
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", ALL)
def test_on_cuda_against_torch_and_numpy(name):
    """The same checks on a CUDA tensor: the plan is made for (and runs on) the input's device."""
    one_d = name in C2C_1D + R2C_1D + C2R_1D
    for dtype in dtypes_for(name):
        x = make_input(SHAPE_3D, dtype).cuda()
        size = (7 if one_d else (4, 9))
        y = check_case(name, x, size, 1 if one_d else (0, 2), "ortho")
        assert y.device == x.device
    empty = torch.zeros(0, 6, 8, dtype=torch.complex64 if name not in REAL_IN else torch.float32, device="cuda")
    # an empty *batch*: the n-D functions' default dim=None would also transform the size-0 axis,
    # which is an error (no transform of length 0), so they transform the trailing two axes
    kwargs = {} if one_d else {"dim": (-2, -1)}
    assert getattr(tfft, name)(empty, **kwargs).device == empty.device
