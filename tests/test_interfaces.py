"""trnplan.interfaces: the numpy.fft look-alike and the scipy.fft backend.

Values are checked against numpy.fft in complex128 (float64 copies of the input), held to the
plan bars of conftest.BAR by the precision the call computes in (single for float16/float32/
complex64 data, double otherwise); dtypes, shapes and exception classes are checked against
what numpy.fft / scipy.fft themselves return or raise for the same call. scipy's own test
module (scipy/fft/tests/test_basic.py) is run under the backend at the end.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.fft
import torch
from support import BAR, rel_l2

import trnplan
from trnplan.fft import _realtransforms
from trnplan.interfaces import numpy_fft, scipy_fft
from trnplan.interfaces._bridge import to_torch

SINGLE = {np.dtype(t) for t in (np.float16, np.float32, np.complex64)}


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _bar(dtype) -> float:
    return BAR["fp32"] if np.dtype(dtype) in SINGLE else BAR["fp64"]


def _ref64(func, a, *args, **kw):
    """numpy.fft on the complex128/float64 copy of ``a``: the reference."""
    a64 = a.astype(np.complex128) if np.iscomplexobj(a) else a.astype(np.float64)
    return getattr(np.fft, func)(a64, *args, **kw)


def _public_class(exc: BaseException) -> type:
    """The nearest public exception class of ``exc`` (numpy's UFuncOutputCastingError is private:
    its public base is TypeError; numpy.exceptions.AxisError is public)."""
    for cls in type(exc).__mro__:
        if cls.__module__ in ("builtins", "numpy.exceptions", "uarray"):
            return cls
    return Exception


def _same_error(ours, theirs):
    """Both calls raise, and ours raises an instance of numpy's / scipy's (public) exception class."""
    with pytest.raises(Exception) as expected:
        theirs()
    with pytest.raises(_public_class(expected.value)):
        ours()


# ============================================================================ numpy_fft
ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
REAL_IN = {"rfft", "ihfft", "rfft2", "rfftn"}


def _input_for(func, dtype, shape, seed=0):
    """Real data for the real-input transforms, else the given dtype (real data promotes)."""
    if func in REAL_IN and np.dtype(dtype).kind == "c":
        dtype = np.float32 if np.dtype(dtype) == np.complex64 else np.float64
    return _data(shape, dtype, seed)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128, np.int32])
@pytest.mark.parametrize("func", ONE_D)
def test_numpy_1d_matches_numpy(func, dtype):
    a = _input_for(func, dtype, (3, 9, 10))
    ours_f, np_f = getattr(numpy_fft, func), getattr(np.fft, func)
    for kw in ({}, {"n": 7}, {"n": 16}, {"axis": 1, "norm": "ortho"}, {"axis": 0, "n": 5, "norm": "forward"}):
        got = ours_f(a, **kw)
        want = np_f(a, **kw)
        assert got.dtype == want.dtype and got.shape == want.shape, kw
        assert rel_l2(got, _ref64(func, a, **kw)) <= _bar(a.dtype), kw


ND = ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("func", ND)
def test_numpy_nd_matches_numpy(func, dtype):
    a = _input_for(func, dtype, (4, 6, 7))
    ours_f, np_f = getattr(numpy_fft, func), getattr(np.fft, func)
    cases = [{}, {"norm": "ortho"}, {"axes": (0, 2)}, {"axes": (2, 0), "s": (5, 8)}, {"axes": (1, 2), "s": (-1, 9)},
             {"axes": (-1, -2), "norm": "forward"}]
    for kw in cases:
        got = ours_f(a, **kw)
        want = np_f(a, **kw)
        assert got.dtype == want.dtype and got.shape == want.shape, kw
        assert rel_l2(got, _ref64(func, a, **kw)) <= _bar(a.dtype), kw


@pytest.mark.parametrize("func", ["fft", "rfft", "irfft", "hfft", "ihfft", "fftn", "irfftn"])
def test_numpy_float16_follows_numpy(func):
    """float16 computes in single precision; complex results are complex64 and real results
    float16, as numpy returns them (so the real ones are compared at float16's resolution:
    u16 = 4.9e-4, rel-L2 ≤ 1e-3 is ~2 u16 for the final rounding to float16)."""
    a = _data((5, 12), np.float16)
    got, want = getattr(numpy_fft, func)(a), getattr(np.fft, func)(a)
    assert got.dtype == want.dtype
    bound = 1e-3 if got.dtype == np.float16 else BAR["fp32"]
    assert rel_l2(got.astype(np.complex128), _ref64(func, a)) <= bound


def test_numpy_longdouble_is_numpys_own():
    a = _data((16,), np.longdouble)
    for func in ("fft", "rfft", "irfft", "fftn"):
        got, want = getattr(numpy_fft, func)(a), getattr(np.fft, func)(a)
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_numpy_repeated_axes_transform_twice_like_numpy():
    a = _data((6, 5), np.complex128)
    for func in ("fftn", "ifftn", "rfftn", "irfftn"):
        x = a.real.copy() if func == "rfftn" else a
        got, want = getattr(numpy_fft, func)(x, axes=(0, 0, 1)), getattr(np.fft, func)(x, axes=(0, 0, 1))
        assert got.shape == want.shape and rel_l2(got, want) <= BAR["fp64"]


def test_numpy_s_without_axes_and_none_in_s_warn_as_numpy_does():
    a = _data((4, 6), np.complex128)
    with pytest.warns(DeprecationWarning, match="`axes` should not be `None`"):
        got = numpy_fft.fftn(a, s=(3, 8))
    assert rel_l2(got, np.fft.fftn(a, s=(3, 8), axes=(0, 1))) <= BAR["fp64"]
    with pytest.warns(DeprecationWarning, match="containing `None`"):
        got = numpy_fft.irfftn(a, s=(3, None), axes=(0, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        want = np.fft.irfftn(a, s=(3, None), axes=(0, 1))
    assert got.shape == want.shape and rel_l2(got, want) <= BAR["fp64"]


def test_numpy_empty_axes_and_empty_batches():
    a = _data((3, 4), np.float64)
    assert np.fft.fftn(a, axes=()) is a and numpy_fft.fftn(a, axes=()) is a  # over no axes: the input itself
    empty = np.zeros((0, 8))
    for func in ("fft", "rfft", "irfft"):
        got, want = getattr(numpy_fft, func)(empty), getattr(np.fft, func)(empty)
        assert got.shape == want.shape and got.dtype == want.dtype


def test_numpy_out_argument():
    a = _data((4, 8), np.float64)
    out = np.empty((4, 8), np.complex128)
    got = numpy_fft.fft(a, out=out)
    assert got is out and rel_l2(out, np.fft.fft(a)) <= BAR["fp64"]
    out64 = np.empty((4, 5), np.complex64)  # same-kind downcast, as numpy's ufunc allows
    assert numpy_fft.rfft(a, out=out64) is out64
    assert rel_l2(out64, np.fft.rfft(a)) <= BAR["fp32"]
    out2 = np.empty((4, 8), np.complex128)
    assert numpy_fft.fft2(a, out=out2) is out2 and rel_l2(out2, np.fft.fft2(a)) <= BAR["fp64"]
    _same_error(lambda: numpy_fft.fft(a, out=np.empty((4, 7), np.complex128)),
                lambda: np.fft.fft(a, out=np.empty((4, 7), np.complex128)))
    _same_error(lambda: numpy_fft.fft(a, out=np.empty((4, 8))), lambda: np.fft.fft(a, out=np.empty((4, 8))))


@pytest.mark.parametrize("call", [
    lambda m: m.fft(np.ones(4), n=0),
    lambda m: m.fft(np.ones(0)),
    lambda m: m.irfft(np.ones(1)),
    lambda m: m.fft(np.ones(4), norm="bad"),
    lambda m: m.fft(np.ones((3, 4)), axis=2),
    lambda m: m.fft(np.ones(4), n=2.0),
    lambda m: m.rfft(np.ones(4, complex)),
    lambda m: m.fftn(np.ones((3, 4)), s=(2, 2), axes=(0,)),
    lambda m: m.fftn(np.ones((3, 4)), axes=(0, 5)),
    lambda m: m.rfftn(np.ones((3, 4)), axes=()),
    lambda m: m.fft2(np.ones((3, 4)), s=(0, 2)),
])
def test_numpy_errors_are_numpys(call):
    _same_error(lambda: call(numpy_fft), lambda: call(np.fft))


def test_numpy_array_likes_and_non_contiguous():
    x = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]]
    assert rel_l2(numpy_fft.fft2(x), np.fft.fft2(x)) <= BAR["fp64"]
    a = _data((8, 7), np.complex128)
    for view in (a[::-1], a[:, ::2], a.T, np.asfortranarray(a)):
        assert rel_l2(numpy_fft.fft(view, axis=0), np.fft.fft(view, axis=0)) <= BAR["fp64"]
    ro = a.copy()
    ro.flags.writeable = False
    assert rel_l2(numpy_fft.ifft(ro), np.fft.ifft(ro)) <= BAR["fp64"]
    assert ro.flags.writeable is False


def test_byte_swapped_input():
    a = _data((6, 8), np.float64).astype(">f8")
    assert rel_l2(numpy_fft.rfft(a), np.fft.rfft(a)) <= BAR["fp64"]
    with scipy.fft.set_backend(scipy_fft, only=True):
        got = scipy.fft.fft2(a)
    assert got.dtype == _scipy_own("fft2", a).dtype and rel_l2(got, np.fft.fft2(a)) <= BAR["fp64"]


def test_bridge_shares_memory_when_it_can():
    a = _data((4, 8), np.complex64)
    assert to_torch(a, np.complex64).data_ptr() == a.ctypes.data  # zero-copy
    rev = a[::-1]
    t = to_torch(rev, np.complex64)  # negative strides: one copy, same values
    assert t.data_ptr() != a.ctypes.data and np.array_equal(t.numpy(), rev)


def test_numpy_helpers_are_numpys():
    assert numpy_fft.fftfreq is np.fft.fftfreq and numpy_fft.rfftfreq is np.fft.rfftfreq
    assert numpy_fft.fftshift is np.fft.fftshift and numpy_fft.ifftshift is np.fft.ifftshift


# ============================================================================ scipy backend
ALL_SCIPY = ONE_D + ND + ["hfft2", "ihfft2", "hfftn", "ihfftn"]
SCIPY_REAL_IN = REAL_IN | {"ihfft2", "ihfftn"}


def _scipy_own(func, *args, **kw):
    with scipy.fft.set_backend("scipy", only=True):
        return getattr(scipy.fft, func)(*args, **kw)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128, np.float16, np.int64])
@pytest.mark.parametrize("func", ALL_SCIPY)
def test_scipy_backend_matches(func, dtype):
    if func in SCIPY_REAL_IN and np.dtype(dtype).kind == "c":
        dtype = np.float32 if np.dtype(dtype) == np.complex64 else np.float64
    a = _data((4, 6, 7), dtype)
    nd = func not in ONE_D
    scalar_s = {"s": 9, "norm": "forward"} if func.endswith("n") else {"s": (9, 5), "norm": "forward"}
    cases = ([{}, {"axes": (0, 2), "norm": "ortho"}, {"s": (5, 8), "axes": (2, 1)}, scalar_s]
             if nd else [{}, {"n": 5, "axis": 1, "norm": "ortho"}, {"n": 16, "axis": 0, "norm": "forward"}])
    before = trnplan.plan_cache_info()["size"]
    for kw in cases:
        with scipy.fft.set_backend(scipy_fft, only=True):
            got = getattr(scipy.fft, func)(a, **kw)
        want = _scipy_own(func, a, **kw)
        assert got.dtype == want.dtype and got.shape == want.shape, kw
        # scipy's own result on the float64/complex128 copy is the reference (for the
        # Hermitian N-D forms numpy has no function)
        a64 = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)
        bar = BAR["fp32"] if np.dtype(dtype) in SINGLE else BAR["fp64"]
        assert rel_l2(got, _scipy_own(func, a64, **kw)) <= bar, kw
    assert trnplan.plan_cache_info()["size"] > before  # the calls ran trnplan plans


def test_scipy_backend_is_what_set_backend_reaches():
    x = _data((64,), np.float64)
    trnplan.clear_plan_cache()
    with scipy.fft.set_backend(scipy_fft, only=True):
        scipy.fft.rfft(x)
    assert trnplan.plan_cache_info()["size"] >= 1
    trnplan.clear_plan_cache()
    scipy.fft.rfft(x)  # outside the context: scipy's own
    assert trnplan.plan_cache_info()["size"] == 0


def test_scipy_unimplemented_functions_fall_back():
    x = _data((4, 16), np.float64)
    with scipy.fft.set_backend(scipy_fft):
        got = scipy.fft.fht(x[0], dln=0.1, mu=0.5), scipy.fft.dct(x), scipy.fft.dstn(x)
    want = scipy.fft.fht(x[0], dln=0.1, mu=0.5), scipy.fft.dct(x), scipy.fft.dstn(x)
    # scipy's fht is built on scipy.fft.rfft/irfft, which the context routes here: same values
    # to the fp64 bar, not bit for bit; dct/dstn are trnplan r2r plans now (to the bar as well)
    assert all(rel_l2(g, w) <= BAR["fp64"] for g, w in zip(got, want))
    with scipy.fft.set_backend(scipy_fft, only=True), pytest.raises(Exception, match="No selected backends had"):
        scipy.fft.fht(x[0], dln=0.1, mu=0.5)


def test_scipy_longdouble_plan_and_foreign_arrays_fall_back():
    x = _data((16,), np.longdouble)
    with scipy.fft.set_backend(scipy_fft):
        got = scipy.fft.fft(x)
    assert got.dtype == np.clongdouble and np.array_equal(got, scipy.fft.fft(x))
    assert scipy_fft.__ua_function__(scipy.fft.fft, (x,), {}) is NotImplemented
    y = _data((16,), np.float64)
    assert scipy_fft.__ua_function__(scipy.fft.fft, (y,), {"plan": object()}) is NotImplemented
    with scipy.fft.set_backend(scipy_fft), pytest.raises(NotImplementedError):
        scipy.fft.fft(y, plan=object())  # scipy's own answer to a plan
    t = torch.from_numpy(y)  # another array library's array: scipy's business (SCIPY_ARRAY_API)
    assert scipy_fft.__ua_function__(scipy.fft.fft, (t,), {}) is NotImplemented


@pytest.mark.parametrize("call", [
    lambda: scipy.fft.fft(np.ones(4), n=0),
    lambda: scipy.fft.fft(np.ones(4), axis=3),
    lambda: scipy.fft.irfft(np.ones(1)),
    lambda: scipy.fft.rfft(np.ones(4, complex)),
    lambda: scipy.fft.rfftn(np.ones((2, 3), complex)),
    lambda: scipy.fft.fft(np.ones(4), norm="bad"),
    lambda: scipy.fft.fft(np.ones(4), workers=0),
    lambda: scipy.fft.fftn(np.ones((3, 4)), axes=(0, 0)),
    lambda: scipy.fft.fftn(np.ones((3, 4)), axes=(0, 2)),
    lambda: scipy.fft.fftn(np.ones((3, 4)), s=(2, 2, 2)),
    lambda: scipy.fft.fftn(np.ones((3, 4)), s=(2, 2), axes=(0,)),
    lambda: scipy.fft.rfftn(np.ones((3, 4)), axes=()),
    lambda: scipy.fft.irfftn(np.ones((3, 4)), s=(3, 0)),
    lambda: scipy.fft.irfft2(np.ones((3, 1)), s=(3, 4), axes=(0,)),
    lambda: scipy.fft.fft2(np.ones((3, 4)), s=(0, 2)),
])
def test_scipy_errors_are_scipys(call):
    def ours():
        with scipy.fft.set_backend(scipy_fft, only=True):
            call()

    def theirs():
        with scipy.fft.set_backend("scipy", only=True):
            call()

    _same_error(ours, theirs)


def test_scipy_irfftn_of_a_size_one_last_axis_follows_scipy():
    x = _data((3, 1), np.complex128)
    with scipy.fft.set_backend(scipy_fft, only=True):
        got = scipy.fft.irfftn(x), scipy.fft.hfft2(x)
    want = _scipy_own("irfftn", x), _scipy_own("hfft2", x)
    for g, w in zip(got, want):
        assert g.shape == w.shape == (3, 1) and rel_l2(g, w) <= BAR["fp64"]


def test_scipy_fftn_over_no_axes_returns_the_input():
    x = _data((3, 4), np.float64)
    with scipy.fft.set_backend(scipy_fft, only=True):
        assert scipy.fft.fftn(x, axes=()) is x


def test_scipy_workers_and_overwrite_x_are_accepted():
    x = _data((8, 12), np.complex128)
    keep = x.copy()
    with scipy.fft.set_backend(scipy_fft, only=True):
        got = scipy.fft.fft2(x, workers=-1, overwrite_x=True)
    assert np.array_equal(x, keep)  # the input is never written
    assert rel_l2(got, np.fft.fft2(keep)) <= BAR["fp64"]


# ---------------------------------------------------------------------------- scipy's own tests
#: tests of scipy/fft/tests/test_basic.py that fail under this backend with only=True, and why:
SCIPY_EXPECTED_FAILURES = {
    # long double has no trnplan plan, so the backend returns NotImplemented; with only=False
    # (the default) scipy's own pocketfft then runs these and they pass
    "TestFFT::test_dtypes_nonstandard[longdouble]",
    *(f"test_fft_with_order[{fn}-{order}-{dt}]" for fn in ("fft", "fft2", "fftn", "ifft", "ifft2", "ifftn")
      for order in ("F", "non-contiguous") for dt in ("longdouble", "clongdouble")),
    # scipy's conftest starts multiprocessing children with 'forkserver': they are fresh
    # interpreters without the global backend, so they run pocketfft, and the test compares
    # their result with the parent's (trnplan's) at rtol=1e-7, atol=0 — exact zeros against
    # ~1e-15 round-off in the bins of fft(ones(100)). Not a trnplan result under test.
    *(f"test_multiprocess[{fn}]" for fn in ("fft", "ifft", "rfft", "irfft")),
}
#: the slow ones (511 lengths × 4 transforms, each a new plan; 4 process pools): run with
#: TRNPLAN_SCIPY_FULL=1 (the last full run is recorded in docs/user-guide.md)
SCIPY_SLOW = ("TestFFT::test_identity_extensive", "test_multiprocess")

_RUNNER = r"""
import sys, pytest, scipy.fft
import trnplan.interfaces.scipy_fft as backend
scipy.fft.set_global_backend(backend, only=True)

class Collect:
    def __init__(self): self.outcomes = {}
    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.outcomes.setdefault(report.nodeid.split("::", 1)[1], report.outcome)

c = Collect()
code = pytest.main(sys.argv[1:], plugins=[c])
for k, v in sorted(c.outcomes.items()):
    print("OUTCOME", v, k)
"""


@pytest.mark.slow
def test_scipys_own_dct_dst_tests_pass_under_the_backend(tmp_path):
    """scipy/fft/tests/test_real_transforms.py (dct, idct, dst, idst and the N-D forms, every type,
    norm and orthogonalize choice), run with this backend as scipy.fft's only global backend:
    every DCT/DST there is a trnplan r2r plan."""
    if importlib.util.find_spec("scipy.fft.tests.test_real_transforms") is None:
        pytest.skip("this scipy installation ships without its test modules")
    args = ["--pyargs", "scipy.fft.tests.test_real_transforms", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--rootdir", str(tmp_path)]
    env = dict(os.environ, TRNPLAN_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", _RUNNER, *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=900, check=False)
    outcomes = dict(line.split(" ", 2)[1:][::-1] for line in proc.stdout.splitlines() if line.startswith("OUTCOME "))
    assert outcomes, proc.stdout[-3000:] + proc.stderr[-3000:]
    failed = sorted(k for k, v in outcomes.items() if v == "failed")
    assert not failed, failed[:20]
    assert sum(v == "passed" for v in outcomes.values()) >= 3000, (len(outcomes), proc.stdout[-2000:])


def test_dct_dst_are_served_by_trnplan_plans(monkeypatch):
    """With the backend (only=True), scipy.fft.dct/dstn run r2r plans, matching pocketfft in float64,
    orthogonalize=False/True included (applied as the per-type √2 weights around the plan)."""
    x = _data((6, 10), np.float64).real
    kinds, transform = set(), _realtransforms._transform

    def counted(x, kind, *args):
        kinds.add(kind)
        return transform(x, kind, *args)

    monkeypatch.setattr(_realtransforms, "_transform", counted)
    with scipy.fft.set_backend(scipy_fft, only=True):
        got = {(t, norm, o): scipy.fft.dct(x, type=t, norm=norm, orthogonalize=o)
               for t in (1, 2, 3, 4) for norm in ("backward", "ortho") for o in (None, False, True)}
        got_n = scipy.fft.idstn(x, type=3, norm="ortho", axes=(0, 1), s=(5, 12))
    assert kinds == {"dct1", "dct2", "dct3", "dct4", "dst3"}
    for (t, norm, o), y in got.items():
        assert rel_l2(y, scipy.fft.dct(x, type=t, norm=norm, orthogonalize=o)) <= BAR["fp64"], (t, norm, o)
    assert rel_l2(got_n, scipy.fft.idstn(x, type=3, norm="ortho", axes=(0, 1), s=(5, 12))) <= BAR["fp64"]
    with pytest.raises(ValueError, match="invalid DCT type"), scipy.fft.set_backend(scipy_fft, only=True):
        scipy.fft.dct(x, type=5)


@pytest.mark.slow
def test_scipys_own_fft_tests_pass_under_the_backend(tmp_path):
    """scipy/fft/tests/test_basic.py, run with this backend as scipy.fft's only global backend."""
    if importlib.util.find_spec("scipy.fft.tests.test_basic") is None:
        pytest.skip("this scipy installation ships without its test modules")
    args = ["--pyargs", "scipy.fft.tests.test_basic", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--rootdir", str(tmp_path)]
    if not os.environ.get("TRNPLAN_SCIPY_FULL"):
        args += ["-k", " and ".join(f"not {name.split('::')[-1]}" for name in SCIPY_SLOW)]
    env = dict(os.environ, TRNPLAN_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", _RUNNER, *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=900, check=False)
    outcomes = {}
    for line in proc.stdout.splitlines():
        if line.startswith("OUTCOME "):
            _, outcome, test = line.split(" ", 2)
            outcomes[test] = outcome
    assert outcomes, proc.stdout[-3000:] + proc.stderr[-3000:]
    failed = {k for k, v in outcomes.items() if v == "failed"}
    passed = {k for k, v in outcomes.items() if v == "passed"}
    assert failed <= SCIPY_EXPECTED_FAILURES, sorted(failed - SCIPY_EXPECTED_FAILURES)
    assert failed == SCIPY_EXPECTED_FAILURES & set(outcomes), sorted(SCIPY_EXPECTED_FAILURES & set(outcomes) - failed)
    assert len(passed) >= 100, (len(passed), proc.stdout[-2000:])
