"""Drop-in fidelity: torch.fft / torch.stft / torch.istft beside their trnplan twins, call by call.

Each row of the tables below is one call, made once with torch's function and once with
trnplan's on the same arguments. Either both return — then the outputs have the same shape,
dtype and device, and (where there is data) trnplan's result is within the engine's bar for its
precision (``trnplan.core.accuracy.DEFAULT_TOL``) of numpy.fft on the input in complex128 — or
both raise, and trnplan's exception is an instance of the class torch raised (trnplan keeps its
own message and may subclass more, e.g. ``InvalidArgument`` is a ``ValueError`` and a
``RuntimeError``). The numpy and scipy rows do the same against numpy.fft and scipy.fft.

Known, documented differences (docs/user-guide.md, "Drop-in fidelity") are tests of their own,
asserting trnplan's documented behaviour, so that closing a difference fails a test here.
"""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.fft
import torch
from support import rel_l2

import trnplan
from trnplan import fft as tfft
from trnplan.core.accuracy import DEFAULT_TOL, combine
from trnplan.core.errors import InvalidArgument, TrnplanError
from trnplan.interfaces import numpy_fft, scipy_fft

C = torch.complex64
D = torch.float64


def _rand(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=torch.float64, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-5, 5, shape, generator=g).to(dtype)


def _bar(t: torch.Tensor) -> float:
    return DEFAULT_TOL["fp64" if t.dtype in (torch.float64, torch.complex128) else "fp32"]


def _reference(func, args, kwargs):
    """torch.fft's function on the float64/complex128 copy of the tensor arguments: numpy-grade
    reference (torch's CPU FFT in double is pocketfft/MKL in complex128, as numpy.fft)."""
    def up(a):
        if isinstance(a, torch.Tensor) and a.device.type == "cpu" and (a.is_floating_point() or a.is_complex()):
            return a.to(torch.complex128 if a.is_complex() else torch.float64)
        return a
    return func(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items() if k != "out"})


def _run(func, args, kwargs):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return func(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - the class is what is compared
        return None, exc


def _public_class(exc: BaseException) -> type:
    """torch raises a few internal subclasses (torch._C._LinAlgError ...): compare to the builtin base."""
    for cls in type(exc).__mro__:
        if cls.__module__ in ("builtins", "numpy.exceptions"):
            return cls
    return Exception


def _side_by_side(theirs, ours, args, kwargs, check_values=True, theirs_kwargs=None):
    want, want_exc = _run(theirs, args, kwargs if theirs_kwargs is None else theirs_kwargs)
    got, got_exc = _run(ours, args, kwargs)
    if want_exc is not None:
        assert got_exc is not None, f"torch raised {want_exc!r}; trnplan returned"
        assert isinstance(got_exc, _public_class(want_exc)), (
            f"torch raised {type(want_exc).__name__}({want_exc}); trnplan raised {type(got_exc).__name__}({got_exc})")
        return None
    assert got_exc is None, f"torch returned; trnplan raised {got_exc!r}"
    assert (got.shape, got.dtype, got.device) == (want.shape, want.dtype, want.device)
    if check_values and got.device.type == "cpu" and got.numel():
        ref = _reference(theirs, args, kwargs)
        assert rel_l2(got, ref) <= _bar(got), rel_l2(got, ref)
    return got


# ============================================================================ torch.fft
ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
TWO_D = ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2")
N_D = ("fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")
REAL_IN = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}


def _x(name, shape=(6, 10), dtype=None):
    """Input of the kind the transform takes: real for r2c, complex otherwise."""
    return _rand(shape, dtype or (torch.float32 if name in REAL_IN else C))


#: valid calls, each function: (label, make(name) -> (args, kwargs))
VALID_1D = [
    ("float32", lambda f: ((_x(f),), {})),
    ("float64", lambda f: ((_x(f, dtype=D if f in REAL_IN else torch.complex128),), {})),
    ("int64", lambda f: ((_rand((6, 10), torch.int64),), {})),
    ("bool", lambda f: ((_rand((6, 10), torch.bool),), {})),
    ("real-to-complex-transform", lambda f: ((_rand((6, 10), torch.float32),), {}) if f not in REAL_IN else
     ((_x(f),), {})),
    ("n-pad", lambda f: ((_x(f),), {"n": 16})),
    ("n-crop", lambda f: ((_x(f),), {"n": 7})),
    ("dim0", lambda f: ((_x(f),), {"dim": 0})),
    ("dim-2-of-3d", lambda f: ((_x(f, (3, 8, 5)),), {"dim": -2})),
    ("norm-ortho", lambda f: ((_x(f),), {"norm": "ortho"})),
    ("norm-forward", lambda f: ((_x(f),), {"norm": "forward"})),
    ("norm-backward", lambda f: ((_x(f),), {"norm": "backward"})),
    ("non-contiguous", lambda f: ((_x(f, (10, 6)).t(),), {})),
    ("strided", lambda f: ((_x(f, (6, 20))[:, ::2],), {})),
    ("1-d", lambda f: ((_x(f, (12,)),), {})),
    ("length-1", lambda f: ((_x(f, (4, 1)),), {"n": 1} if f in ("irfft", "hfft") else {})),
    ("prime", lambda f: ((_x(f, (3, 13)),), {})),
    ("out", lambda f: ((_x(f),), {"out": torch.empty(0, dtype=C if f in ("fft", "ifft", "rfft", "ihfft")
                                                        else torch.float32)})),
    ("meta", lambda f: ((_x(f).to("meta"),), {})),
]
INVALID_1D = [
    ("n=0", lambda f: ((_x(f),), {"n": 0})),
    ("n=-2", lambda f: ((_x(f),), {"n": -2})),
    ("n-float", lambda f: ((_x(f),), {"n": 4.0})),
    ("dim-out-of-range", lambda f: ((_x(f),), {"dim": 2})),
    ("0-d", lambda f: ((_x(f, ()),), {})),
    ("norm-bad", lambda f: ((_x(f),), {"norm": "bad"})),
    ("norm-not-str", lambda f: ((_x(f),), {"norm": 3})),
    ("float16", lambda f: ((_x(f, dtype=torch.float16),), {})),
    ("bfloat16", lambda f: ((_x(f, dtype=torch.bfloat16),), {})),
    ("complex32", lambda f: ((_x(f, dtype=torch.float16).to(torch.complex32),), {})),
    ("complex-to-real-input", lambda f: ((_rand((6, 10), C),), {})),
    ("out-wrong-kind", lambda f: ((_x(f),), {"out": torch.empty(0, dtype=torch.int64)})),
    ("out-not-tensor", lambda f: ((_x(f),), {"out": [0.0]})),
    ("not-a-tensor", lambda f: (([1.0, 2.0],), {})),
    ("size-1-to-irfft", lambda f: ((_x(f, (4, 1)),), {})),
]
VALID_ND = [
    ("float32", lambda f: ((_x(f, (3, 6, 10)),), {})),
    ("float64", lambda f: ((_x(f, (3, 6, 10), D if f in REAL_IN else torch.complex128),), {})),
    ("int32", lambda f: ((_rand((6, 10), torch.int32),), {})),
    ("s", lambda f: ((_x(f, (3, 6, 10)),), {"s": (4, 12)})),
    ("s-minus-1", lambda f: ((_x(f, (3, 6, 10)),), {"s": (-1, 8)})),
    ("dim", lambda f: ((_x(f, (3, 6, 10)),), {"dim": (0, 2)})),
    ("dim-reversed", lambda f: ((_x(f, (3, 6, 10)),), {"dim": (-1, -3)})),
    ("s-and-dim", lambda f: ((_x(f, (3, 6, 10)),), {"s": (5, 4), "dim": (2, 0)})),
    ("norm-ortho", lambda f: ((_x(f, (3, 6, 10)),), {"norm": "ortho"})),
    ("norm-forward", lambda f: ((_x(f, (3, 6, 10)),), {"norm": "forward"})),
    ("non-contiguous", lambda f: ((_x(f, (10, 6, 3)).permute(2, 1, 0),), {})),
    ("out", lambda f: ((_x(f, (3, 6, 10)),), {"out": torch.empty(
        2, dtype=C if f.startswith(("fft", "ifft", "rfft", "ihfft")) else torch.float32)})),
    ("meta", lambda f: ((_x(f, (3, 6, 10)).to("meta"),), {})),
]
INVALID_ND = [
    ("s-0", lambda f: ((_x(f, (3, 6, 10)),), {"s": (0, 4)})),
    ("dim-repeated", lambda f: ((_x(f, (3, 6, 10)),), {"dim": (1, 1)})),
    ("dim-out-of-range", lambda f: ((_x(f, (3, 6, 10)),), {"dim": (0, 5)})),
    ("s-dim-lengths", lambda f: ((_x(f, (3, 6, 10)),), {"s": (4, 4), "dim": (0,)})),
    ("s-too-long", lambda f: ((_x(f, (6, 10)),), {"s": (2, 4, 4)})),
    ("norm-bad", lambda f: ((_x(f, (3, 6, 10)),), {"norm": "bad"})),
    ("float16", lambda f: ((_x(f, (3, 6, 10), torch.float16),), {})),
    ("bfloat16", lambda f: ((_x(f, (3, 6, 10), torch.bfloat16),), {})),
    ("complex-to-real-input", lambda f: ((_rand((6, 10), C),), {})),
    ("s-float", lambda f: ((_x(f, (3, 6, 10)),), {"s": (4.0, 4)})),
    ("out-wrong-kind", lambda f: ((_x(f, (3, 6, 10)),), {"out": torch.empty(0, dtype=torch.int64)})),
]
def _cases(names, rows):
    return [pytest.param(f, make, id=f"{f}-{label}") for f in names for label, make in rows]


@pytest.mark.parametrize(("name", "make"), _cases(ONE_D, VALID_1D + INVALID_1D)
                         + _cases(TWO_D + N_D, VALID_ND + INVALID_ND))
def test_torch_fft_side_by_side(name, make):
    args, kwargs = make(name)
    out = kwargs.get("out")
    theirs_kw = dict(kwargs)
    if isinstance(out, torch.Tensor):  # each side writes its own out tensor
        theirs_kw["out"] = out.clone()
    got = _side_by_side(getattr(torch.fft, name), getattr(tfft, name), args, kwargs, theirs_kwargs=theirs_kw)
    if isinstance(out, torch.Tensor) and got is not None:
        assert got is out  # out= is written and returned, as torch does


@pytest.mark.parametrize("name", ONE_D + TWO_D + N_D)
def test_empty_batch_is_a_known_difference(name):
    """A leading dimension of size 0: trnplan returns the empty result torch.fft's shape rules give."""
    x = _x(name, (0, 6, 10))
    kw = {"dim": (1, 2)} if name in N_D else {}  # fftn over all dims would transform the empty one
    y = getattr(tfft, name)(x, **kw)
    meta = getattr(torch.fft, name)(x.to("meta"), **kw)  # torch's own shape and dtype rules
    assert (y.shape, y.dtype) == (meta.shape, meta.dtype) and y.numel() == 0
    with pytest.raises(RuntimeError, match="MKL FFT error"):  # torch 2.13's CPU FFT: the difference documented
        getattr(torch.fft, name)(x, **kw)


def test_half_precision_keeps_trnplans_message_and_torchs_class():
    x = torch.randn(16).half()
    with pytest.raises(RuntimeError, match="Unsupported dtype Half"):
        torch.fft.fft(x)
    with pytest.raises(tfft.UnsupportedDtypeError, match=r"float16 tensor.*x\.float\(\)") as info:
        tfft.fft(x)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, TypeError)


# ============================================================================ torch.stft / torch.istft
def _sig(*shape, dtype=torch.float32):
    return _rand(shape or (400,), dtype, seed=3)


def _spec(n_fft=16, hop=4, window=None, dtype=torch.float32, onesided=True, batch=()):
    x = _sig(*batch, 400, dtype=dtype)
    w = torch.hann_window(n_fft, dtype=torch.float64 if dtype in (D, torch.complex128) else torch.float32) \
        if window is None else window
    return torch.stft(x, n_fft, hop, window=w, return_complex=True, onesided=onesided)


HANN = torch.hann_window(16)
STFT_VALID = [
    ("real", (_sig(), 16), {"window": HANN, "return_complex": True}),
    ("batched", (_sig(3, 400), 16), {"hop_length": 5, "window": HANN, "return_complex": True}),
    ("float64", (_sig(dtype=D), 16), {"window": HANN.double(), "return_complex": True}),
    ("mixed-precision-window", (_sig(), 16), {"window": HANN.double(), "return_complex": True}),
    ("complex", (_sig(dtype=C), 16), {"window": HANN}),
    ("two-sided", (_sig(), 16), {"window": HANN, "onesided": False, "return_complex": True}),
    ("short-window", (_sig(), 16), {"win_length": 10, "window": torch.hann_window(10), "return_complex": True}),
    ("hop>win", (_sig(), 16), {"hop_length": 20, "window": HANN, "return_complex": True}),
    ("no-center", (_sig(), 16), {"center": False, "window": HANN, "return_complex": True}),
    ("align", (_sig(), 16), {"center": False, "win_length": 8, "window": torch.ones(8), "align_to_window": True,
                             "return_complex": True}),
    ("constant-pad", (_sig(), 16), {"pad_mode": "constant", "window": HANN, "return_complex": True}),
    ("normalized", (_sig(), 16), {"normalized": True, "window": HANN, "return_complex": True}),
    ("return-real", (_sig(), 16), {"window": HANN, "return_complex": False}),
    ("non-contiguous", (_sig(400, 3).t(), 16), {"window": HANN, "return_complex": True}),
    ("no-window", (_sig(), 16), {"return_complex": True}),
]
STFT_INVALID = [
    ("complex-onesided", (_sig(dtype=torch.complex128), 10), {"window": torch.rand(10), "onesided": True}),
    ("no-return-complex", (_sig(), 10), {}),
    ("empty", (_sig(0), 16), {"window": HANN, "return_complex": True}),
    ("empty-no-center", (_sig(0), 16), {"window": HANN, "center": False, "return_complex": True}),
    ("window-shape", (_sig(), 16), {"window": torch.hann_window(15), "return_complex": True}),
    ("window-2d", (_sig(), 16), {"window": HANN[None], "return_complex": True}),
    ("3-d", (_sig(2, 2, 400), 16), {"window": HANN, "return_complex": True}),
    ("float16", (_sig().half(), 16), {"window": HANN.half(), "return_complex": True}),
    ("bfloat16", (_sig().bfloat16(), 16), {"window": HANN.bfloat16(), "return_complex": True}),
    ("int64", (torch.arange(400), 16), {"return_complex": True}),
    ("n_fft-0", (_sig(), 0), {"return_complex": True}),
    ("n_fft>signal", (_sig(10), 64), {"center": False, "return_complex": True}),
    ("win>n_fft", (_sig(), 16), {"win_length": 20, "return_complex": True}),
    ("hop-0", (_sig(), 16), {"hop_length": 0, "return_complex": True}),
    ("pad-mode", (_sig(), 16), {"pad_mode": "foo", "return_complex": True}),
    ("reflect-short", (_sig(5), 16), {"return_complex": True}),
    ("window-device", (_sig(), 16), {"window": torch.ones(16, device="meta"), "return_complex": True}),
    ("align-centred", (_sig(), 16), {"align_to_window": True, "return_complex": True}),
]
X16 = _spec()
ISTFT_VALID = [
    ("onesided", (X16, 16), {"hop_length": 4, "window": HANN}),
    ("length", (X16, 16), {"hop_length": 4, "window": HANN, "length": 390}),
    ("length-pads", (X16, 16), {"hop_length": 4, "window": HANN, "length": 420}),
    ("batched", (_spec(batch=(2,)), 16), {"hop_length": 4, "window": HANN}),
    ("float64", (_spec(dtype=D), 16), {"hop_length": 4, "window": HANN.double()}),
    ("two-sided", (_spec(onesided=False), 16), {"hop_length": 4, "window": HANN, "onesided": False}),
    ("complex-out", (_spec(dtype=C, onesided=False), 16), {"hop_length": 4, "window": HANN,
                                                           "return_complex": True}),
    ("normalized", (X16, 16), {"hop_length": 4, "window": HANN, "normalized": True}),
    ("no-window", (X16, 16), {"hop_length": 4}),
]
ISTFT_INVALID = [
    ("real-input", (torch.zeros(3, 5, 2), 4), {}),
    ("nola", (X16, 16), {"hop_length": 4, "window": HANN, "center": False}),
    ("empty", (torch.zeros(9, 0, dtype=C), 16), {"window": HANN}),
    ("hop>win", (X16, 16), {"hop_length": 20, "window": HANN}),
    ("window-shape", (X16, 16), {"window": torch.hann_window(15)}),
    ("4-d", (X16[None, None], 16), {"window": HANN}),
    ("rows", (X16, 20), {}),
    ("complex-out-onesided", (X16, 16), {"return_complex": True}),
    ("complex-window-real-out", (_spec(onesided=False), 16), {"onesided": False, "window": HANN.to(C)}),
    ("complex32", (X16.to(torch.complex32), 16), {}),
    ("win>n_fft", (X16, 16), {"win_length": 20}),
]


@pytest.mark.parametrize(("args", "kwargs"), [pytest.param(a, k, id=label) for label, a, k in
                                              STFT_VALID + STFT_INVALID])
def test_stft_side_by_side(args, kwargs):
    _side_by_side(torch.stft, trnplan.stft, args, kwargs)


@pytest.mark.parametrize(("args", "kwargs"), [pytest.param(a, k, id=label) for label, a, k in
                                              ISTFT_VALID + ISTFT_INVALID])
def test_istft_side_by_side(args, kwargs):
    _side_by_side(torch.istft, trnplan.istft, args, kwargs)


def test_stft_errors_are_trnplans_with_torchs_class():
    """The issue's cases: RuntimeError (torch's class), trnplan's InvalidArgument (its message)."""
    x = torch.rand(100, dtype=torch.cdouble)
    with pytest.raises(InvalidArgument, match="onesided=True needs real input") as info:
        trnplan.stft(x, 10, window=torch.rand(10), onesided=True)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, TrnplanError)
    with pytest.raises(RuntimeError, match="requires return_complex"):
        trnplan.stft(torch.rand(100), 10)
    with pytest.raises(RuntimeError, match="complex output of stft"):
        trnplan.istft(torch.zeros(3, 5, 2), 4)
    with pytest.raises(RuntimeError, match="NOLA"):
        trnplan.istft(X16, 16, hop_length=4, window=HANN, center=False)


def _torch_warning(call: str) -> list:
    """torch's warnings for ``call`` in a fresh process (torch warns once per process: TORCH_WARN_ONCE)."""
    code = ("import torch, warnings\nwarnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    x = torch.randn(400)\n"
            f"    {call}\n"
            "print(repr([(c.category.__name__, str(c.message)) for c in w]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("ours", "call"), [
    (lambda: trnplan.stft(_sig(), 16, return_complex=True), "torch.stft(x, 16, return_complex=True)"),
    (lambda: trnplan.istft(X16, 16),
     "torch.istft(torch.stft(x, 16, window=torch.ones(16), return_complex=True), 16)"),
])
def test_no_window_warns_as_torch_does(ours, call):
    theirs = [(cat, msg) for cat, msg in _torch_warning(call) if "window was not provided" in msg]
    assert [cat for cat, _ in theirs] == ["UserWarning"]
    with pytest.warns(UserWarning, match="A window was not provided") as ours_w:
        ours()
    # the same sentences (torch runs them together without spaces), attributed to the caller's line
    assert [w.filename for w in ours_w] == [__file__]
    words = str(ours_w[0].message).replace(" ", "")
    assert theirs[0][1].split(" (Triggered internally")[0].replace(" ", "") == words
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trnplan.stft(_sig(), 16, window=torch.ones(16), return_complex=True)  # an explicit window: no warning


# ============================================================================ numpy.fft / scipy.fft
def _same_class(ours, theirs):
    with pytest.raises(Exception) as expected:
        theirs()
    with pytest.raises(_public_class(expected.value)):
        ours()


A = np.random.default_rng(0).standard_normal((4, 8))
NUMPY_INVALID = [
    ("out-not-array", lambda m: m.fft(A, out=[0.0] * 8)),
    ("out-wrong-shape", lambda m: m.fft(A, out=np.empty((4, 7), complex))),
    ("out-wrong-kind", lambda m: m.fft(A, out=np.empty((4, 8)))),
    ("rfft-out-not-array", lambda m: m.rfft(A, out=(0,))),
    ("fftn-out-not-array", lambda m: m.fftn(A, out=[0.0])),
    ("n-0", lambda m: m.rfft(A, n=0)),
    ("n-negative", lambda m: m.ifft(A, n=-3)),
    ("n-float", lambda m: m.irfft(A, n=4.5)),
    ("n-str", lambda m: m.hfft(A, n="4")),
    ("axis-out-of-range", lambda m: m.ihfft(A, axis=-3)),
    ("axis-float", lambda m: m.fft(A, axis=1.0)),
    ("norm-bad", lambda m: m.rfftn(A, norm="Ortho")),
    ("0-d", lambda m: m.fft(np.float64(1.0))),
    ("empty", lambda m: m.rfft(np.ones((3, 0)))),
    ("axes-out-of-range", lambda m: m.fft2(A, axes=(0, 3))),
    ("s-axes-lengths", lambda m: m.irfftn(A, s=(4, 4), axes=(1,))),
    ("s-0", lambda m: m.irfft2(A, s=(4, 0))),
    ("complex-to-rfft2", lambda m: m.rfft2(A + 1j)),
    ("object-array", lambda m: m.fft(np.array(["a", "b"], dtype=object))),
    ("string-array", lambda m: m.fft(np.array(["a", "b"]))),
]
SCIPY_INVALID = [
    ("n-float", lambda: scipy.fft.fft(A, n=4.5)),
    ("n-negative", lambda: scipy.fft.rfft(A, n=-1)),
    ("axis-out-of-range", lambda: scipy.fft.ihfft(A, axis=5)),
    ("norm-bad", lambda: scipy.fft.irfft(A, norm="Ortho")),
    ("empty", lambda: scipy.fft.fft(np.ones((3, 0)))),
    ("0-d", lambda: scipy.fft.fft(np.float64(1.0))),
    ("workers-too-negative", lambda: scipy.fft.fft(A, workers=-1000)),
    ("s-too-long", lambda: scipy.fft.rfft2(A, s=(2, 2, 2))),
    ("axes-repeated", lambda: scipy.fft.ifft2(A, axes=(1, 1))),
    ("s-0", lambda: scipy.fft.hfftn(A, s=(0, 4))),
    ("complex-to-ihfft", lambda: scipy.fft.ihfft(A + 1j)),
    ("complex-to-ihfftn", lambda: scipy.fft.ihfftn(A + 1j)),
    ("string-array", lambda: scipy.fft.fft(np.array(["a", "b"]))),
]


@pytest.mark.parametrize("call", [pytest.param(c, id=label) for label, c in NUMPY_INVALID])
def test_numpy_interface_raises_numpys_class(call):
    _same_class(lambda: call(numpy_fft), lambda: call(np.fft))


@pytest.mark.parametrize("call", [pytest.param(c, id=label) for label, c in SCIPY_INVALID])
def test_scipy_backend_raises_scipys_class(call):
    def ours():
        with scipy.fft.set_backend(scipy_fft, only=True):
            call()

    def theirs():
        with scipy.fft.set_backend("scipy", only=True):
            call()

    _same_class(ours, theirs)


# ============================================================================ torch operators
class SpectralLayer(torch.nn.Module):
    """An FNO-style spectral layer: rfft, keep ``modes`` frequencies times a complex weight, irfft."""

    def __init__(self, fft_module, modes: int = 5):
        super().__init__()
        self.fft = fft_module
        self.weight = torch.nn.Parameter(torch.randn(modes, dtype=C, generator=torch.Generator().manual_seed(1)))
        self.modes = modes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spectrum = self.fft.rfft(x)
        return self.fft.irfft(spectrum[..., : self.modes] * self.weight, n=x.shape[-1])


class TorchLayer(SpectralLayer):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spectrum = torch.fft.rfft(x)
        return torch.fft.irfft(spectrum[..., : self.modes] * self.weight, n=x.shape[-1])


class TrnplanLayer(SpectralLayer):  # TorchScript compiles a module's methods, not a module attribute
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spectrum = tfft.rfft(x)
        return tfft.irfft(spectrum[..., : self.modes] * self.weight, n=x.shape[-1])


def _layer_reference(layer, x):
    """The layer in float64/complex128 through torch.fft: the reference for the fp32 bar."""
    ref = TorchLayer(torch.fft)
    ref.weight = torch.nn.Parameter(layer.weight.detach().to(torch.complex128))
    return ref(x.double()).detach()


def _compiled(how, layer, x):
    if how == "script":
        return torch.jit.script(layer)
    if how == "trace":
        return torch.jit.trace(layer, x)
    if how == "export":
        return torch.export.export(layer, (x,)).module()
    return torch.compile(layer, fullgraph=True)  # a graph break is an error with fullgraph=True


@pytest.mark.parametrize("how", ["script", "trace", "export", "compile"])
def test_spectral_layer_under_script_trace_export_compile(how):
    layer = TrnplanLayer(tfft)
    x = _rand((4, 32), seed=2)
    run = _compiled(how, layer, x)
    x2 = _rand((4, 32), seed=3)  # not the example input: the program runs on new data
    y = run(x2)
    assert (y.shape, y.dtype) == ((4, 32), torch.float32)
    assert rel_l2(y, _layer_reference(layer, x2)) <= DEFAULT_TOL["fp32"]
    y.square().sum().backward()  # gradients reach the weight through the operators
    want = TorchLayer(torch.fft)
    want.weight = torch.nn.Parameter(layer.weight.detach().to(torch.complex128))
    want(x2.double()).square().sum().backward()
    assert rel_l2(layer.weight.grad, want.weight.grad) <= DEFAULT_TOL["fp32"]


def test_script_of_the_issues_function_calls_trnplans_operator():
    def g(x: torch.Tensor) -> torch.Tensor:
        return tfft.fft2(x)

    scripted = torch.jit.script(g)
    assert "trnplan::fft_fft2" in str(scripted.graph)
    x = _rand((4, 6))
    assert rel_l2(scripted(x), torch.fft.fft2(x.double())) <= DEFAULT_TOL["fp32"]

    def with_args(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return tfft.rfftn(x, s=[4, 8], dim=[0, 1], norm="ortho", out=out)

    out = torch.empty(0, dtype=C)
    got = torch.jit.script(with_args)(x, out)
    assert got.data_ptr() == out.data_ptr()
    assert rel_l2(out, torch.fft.rfftn(x.double(), s=[4, 8], dim=[0, 1], norm="ortho")) <= DEFAULT_TOL["fp32"]


def test_trace_records_one_operator_per_transform_and_saves():
    traced = torch.jit.trace(lambda t: tfft.fft2(t), torch.randn(4, 6))
    kinds = [node.kind() for node in traced.graph.nodes()]
    assert kinds.count("trnplan::fft_fft2") == 1 and not any(k.startswith("aten::") for k in kinds)
    layer = TrnplanLayer(tfft)
    module = torch.jit.trace(layer, _rand((4, 32)))
    kinds = [node.kind() for node in module.graph.nodes()]
    assert kinds.count("trnplan::fft_rfft") == kinds.count("trnplan::fft_irfft") == 1
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    buffer.seek(0)
    loaded = torch.jit.load(buffer)  # resolves trnplan::fft_* because trnplan is imported
    x = _rand((4, 32), seed=5)
    assert rel_l2(loaded(x), _layer_reference(layer, x)) <= DEFAULT_TOL["fp32"]


def test_export_holds_trnplans_operator():
    program = torch.export.export(TrnplanLayer(tfft), (_rand((4, 32)),))
    targets = [str(node.target) for node in program.graph.nodes if node.op == "call_function"]
    assert sum("trnplan.execute" in t for t in targets) == 2  # rfft and irfft: one plan each
    assert not any("fft_r2c" in t or "fft_c2r" in t for t in targets)  # not torch's own FFT


class StftLayer(torch.nn.Module):
    """stft -> a learnable per-bin gain -> istft (a spectral mask, as in speech enhancement)."""

    def __init__(self):
        super().__init__()
        self.window = torch.hann_window(16)
        self.gain = torch.nn.Parameter(torch.linspace(0.5, 1.5, 9))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spec = trnplan.stft(x, 16, 4, window=self.window, return_complex=True)
        return trnplan.istft(spec * self.gain[:, None], 16, 4, window=self.window, length=x.shape[-1])


@pytest.mark.parametrize("how", ["script", "trace", "export", "compile"])
def test_stft_layer_under_script_trace_export_compile(how):
    layer = StftLayer()
    run = _compiled(how, layer, _rand((2, 200), seed=4))
    x = _rand((2, 200), seed=6)
    y = run(x)
    w64, g64 = layer.window.double(), layer.gain.detach().double()
    spec = torch.stft(x.double(), 16, 4, window=w64, return_complex=True)
    want = torch.istft(spec * g64[:, None], 16, 4, window=w64, length=200)
    assert (y.shape, y.dtype) == (want.shape, torch.float32)
    assert rel_l2(y, want) <= DEFAULT_TOL["fp32"]
    if how == "script":
        assert "trnplan::stft" in str(run.graph) and "trnplan::istft" in str(run.graph)


def test_export_with_a_dynamic_batch_runs_at_another_batch():
    from torch.export import Dim

    layer = TrnplanLayer(tfft)
    program = torch.export.export(layer, (_rand((4, 32)),), dynamic_shapes={"x": {0: Dim("batch", min=2)}})
    x = _rand((7, 32), seed=8)
    assert rel_l2(program.module()(x), _layer_reference(layer, x)) <= DEFAULT_TOL["fp32"]


# ---------------------------------------------------------------- a shape seen for the first time: cheap, nothing on disk


def _records():
    from trnplan.cache import default_cache

    return default_cache().records()


@pytest.fixture
def dropin_plans(monkeypatch):
    """The plans the drop-in makes for new shapes, in order."""
    from trnplan.plan import api

    made = []
    real = api.dropin_plan

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(api, "dropin_plan", spy)
    return made


@pytest.mark.parametrize("name, shape, dtype", [("fft", (3, 1009), torch.complex64), ("rfft", (2, 360), torch.float64),
                                                ("fft2", (2, 24, 40), torch.complex128)])
def test_a_new_shape_plans_the_devices_own_fft_and_writes_nothing(name, shape, dtype, dropin_plans):
    x = torch.randn(shape, dtype=dtype)
    y = getattr(tfft, name)(x)
    ref = getattr(np.fft, name)(x.numpy().astype(np.complex128 if x.is_complex() else np.float64))
    precision = "fp64" if dtype in (torch.complex128, torch.float64) else "fp32"
    assert rel_l2(y, ref) <= DEFAULT_TOL[precision]
    assert _records() == []  # no wisdom written for a drop-in call
    (plan,) = dropin_plans
    assert plan.tree.solver == "native" or (plan.tree.solver in ("real", "nd") and "method=lib" in str(plan.tree))
    assert plan.provenance.cache_path is None  # planned without the cache: stored nowhere


def test_a_new_shape_uses_stored_wisdom(dropin_plans):
    trnplan.plan_many(1024, 4)  # stored, as a precompiled or measured plan is
    trnplan.clear_plan_cache()
    tfft.fft(torch.randn(4, 1024, dtype=torch.complex64))
    (plan,) = dropin_plans
    assert plan.provenance.origin == "wisdom hit"


def test_dropin_search_asks_for_the_full_estimate_and_stores_it(monkeypatch, dropin_plans):
    monkeypatch.setenv("TRNPLAN_DROPIN_SEARCH", "1")
    tfft.fft(torch.randn(2, 1009, dtype=torch.complex64))
    assert len(_records()) == 1 and dropin_plans[0].provenance.origin == "planned now"


def test_dropin_under_wisdom_only_still_refuses_a_miss(monkeypatch):
    monkeypatch.setenv("TRNPLAN_WISDOM_ONLY", "1")
    with pytest.raises(trnplan.WisdomMiss, match="no stored plan"):
        tfft.fft(torch.randn(2, 1013, dtype=torch.complex64))


def test_a_new_shapes_backward_is_cheap_too(dropin_plans):
    g = torch.Generator().manual_seed(1009)
    x = torch.randn(2, 1009, dtype=torch.complex64, generator=g).requires_grad_()
    # Σ|Fx|²: a well-conditioned loss (Σ|Fx| once made this test depend on the unseeded input: its
    # gradient Fᴴ(Fx/|Fx|) amplifies rounding where some |Fx| is small, 1.8e-6 in one run)
    (tfft.fft(x).abs() ** 2).sum().backward()
    (plan,) = dropin_plans
    adjoint = plan.adjoint()
    assert adjoint.strategy == plan.strategy == "native" and adjoint.provenance.cache_path is None
    assert _records() == []
    xd = x.detach().numpy().astype(np.complex128)
    want = np.fft.ifft(2 * np.fft.fft(xd)) * 1009  # d/dx̄ Σ|Fx|² = 2·Fᴴ(Fx)
    assert max(plan.tree.error, adjoint.tree.error) <= DEFAULT_TOL["fp32"]
    bound = combine(plan.tree.error, adjoint.tree.error)  # two transforms: the model's errors add in quadrature
    assert np.linalg.norm(x.grad.numpy() - want) / np.linalg.norm(want) <= bound
