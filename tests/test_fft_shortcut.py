"""trnplan.fft's shortcut for a seen call: the same result as the full path, and never a stale answer.

A call whose full path ended in ``plan.execute(input)`` (the transformed dims trailing, no
promotion, padding, cropping, conjugate or ``out=``) leaves a key in the in-process plan cache,
and the next call with the same key goes straight to the plan's ready callable. Here every
function that may take the shortcut is called twice: the second call must not reach the full path
(it is made to raise), and both results must lie within the engine's bar
(``trnplan.core.accuracy.DEFAULT_TOL``) of the float64 reference
(``trnplan.core.accuracy.reference``, numpy.fft in complex128, through tests/support.py). Then each field of the key —
the function, the input's shape, dtype and device, ``n``/``s`` (value and type), ``dim`` and
``norm`` — is changed alone after a seen call: the answer must be the changed call's, as the full
path gives it. Leaving any field out of the key fails one of these tests.
"""

from __future__ import annotations

import pytest
import torch
from support import BAR, reference, rel_l2

import trnplan
from trnplan import fft as tfft
from trnplan.fft import _dropin
from trnplan.plan import memo
from trnplan.plan.memo import PLANS

C64, C128, F32, F64 = torch.complex64, torch.complex128, torch.float32, torch.float64
KIND = {"fft": ("c2c", False), "ifft": ("c2c", True), "rfft": ("r2c", False), "irfft": ("c2r", True)}

#: (function, input shape, dtype, keywords, the transform's logical shape over the trailing dims)
CASES = [
    ("fft", (256,), C64, {}, (256,)),
    ("fft", (1, 256), C64, {"norm": "ortho"}, (256,)),
    ("ifft", (8, 4, 64), C128, {"dim": -1}, (64,)),
    ("rfft", (256,), F32, {}, (256,)),
    ("rfft", (4, 100), F64, {"n": 100, "norm": "forward"}, (100,)),
    ("irfft", (64, 33), C64, {}, (64,)),  # even n: torch's bare irfft
    ("irfft", (4, 33), C128, {"n": 65}, (65,)),  # odd n: the plan's call keeps n
    ("fft2", (64, 64), C64, {}, (64, 64)),
    ("ifft2", (8, 16, 12), C128, {"norm": "forward"}, (16, 12)),
    ("rfft2", (8, 64, 64), F32, {}, (64, 64)),
    ("rfft2", (2, 16, 16), F32, {"s": (16, 16), "dim": (-2, -1)}, (16, 16)),
    ("irfft2", (16, 9), C64, {}, (16, 16)),
    ("irfft2", (2, 16, 9), C128, {"s": (16, 17)}, (16, 17)),
    ("fftn", (8, 64, 64), C64, {}, (8, 64, 64)),  # every dim of a 3-D input: torch's bare fftn
    ("fftn", (2, 8, 8, 8), C64, {"dim": (-3, -2, -1), "norm": "ortho"}, (8, 8, 8)),
    ("ifftn", (2, 8, 6), C128, {"dim": (-2, -1)}, (8, 6)),
    ("rfftn", (4, 8, 8), F64, {"dim": (-3, -2, -1)}, (4, 8, 8)),
    ("irfftn", (3, 8, 5), C64, {}, (3, 8, 8)),
]


def _base(name: str) -> str:
    return name[:-1] if name[-1] in "2n" else name  # fft2, fftn -> fft


def _rand(shape, dtype, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


def _want(name: str, x: torch.Tensor, shape: tuple, norm):
    """The float64 reference of ``name`` over ``x``'s trailing ``len(shape)`` dims."""
    kind, inverse = KIND[_base(name)]
    return reference(x, inverse, norm, kind=kind, shape=shape)


def _close(y: torch.Tensor, want) -> None:
    assert tuple(y.shape) == want.shape
    assert rel_l2(y, want) <= BAR["fp64" if y.dtype in (F64, C128) else "fp32"]


@pytest.fixture
def no_full_path(monkeypatch):
    """From here on, the full path (argument handling, then the plan) raises: a call that still
    returns went through the shortcut."""
    def arm():
        for name in list(_dropin._IMPLS):
            def boom(*args, _name=name, **kwargs):
                raise AssertionError(f"{_name}() took the full path")
            monkeypatch.setitem(_dropin._IMPLS, name, boom)
    return arm


@pytest.mark.parametrize(("name", "shape", "dtype", "kw", "logical"), CASES,
                         ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}-{str(c[2])[6:]}-{len(c[3])}" for c in CASES])
def test_a_seen_call_takes_the_shortcut_and_gives_the_full_paths_result(name, shape, dtype, kw, logical,
                                                                          no_full_path):
    x = _rand(shape, dtype)
    fn = getattr(tfft, name)
    first = fn(x, **kw)  # the full path
    want = _want(name, x, logical, kw.get("norm"))
    _close(first, want)
    no_full_path()
    again = fn(x, **kw)
    assert again.dtype == first.dtype == getattr(torch.fft, name)(x, **kw).dtype
    _close(again, want)
    assert fn(x.clone(), **kw).shape == first.shape  # another tensor of the same signature: the same entry


def test_the_shortcut_keeps_autograd(no_full_path):
    """A seen call on an input that requires grad runs the plan's autograd (the adjoint plan)."""
    x = _rand((4, 16, 12), C64).requires_grad_()
    w = _rand((4, 16, 12), C64, seed=1)
    tfft.fft2(x.detach())
    no_full_path()
    y = tfft.fft2(x)
    assert y.requires_grad
    torch.real((y * w.conj()).sum()).backward()  # L = Re<w, F x>: dL/dx̄ = Fᴴ w, the unscaled inverse
    _close(x.grad, reference(w, True, "forward", shape=(16, 12)))


def test_out_and_promotion_take_the_full_path(no_full_path):
    x = _rand((4, 64), C64)
    tfft.fft(x)
    tfft.fft(x.real)  # promoted to complex: the full path, no key left
    no_full_path()
    out = torch.empty(4, 64, dtype=C64)
    with pytest.raises(AssertionError, match=r"fft\(\) took the full path"):
        tfft.fft(x, out=out)
    with pytest.raises(AssertionError, match=r"fft\(\) took the full path"):
        tfft.fft(x.real)
    with pytest.raises(AssertionError, match=r"hfft\(\) took the full path"):  # a conjugate around the plan
        tfft.hfft(x)


def test_clearing_the_plan_cache_reaches_the_shortcut():
    x = _rand((4, 64), C64)
    tfft.fft(x, norm="ortho")
    key = _dropin._direct_key("fft", x, None, -1, "ortho")
    plan = PLANS.by_alias(key)
    assert plan is not None and plan.problem.norm == "ortho" and plan.problem.shape == (64,)
    assert key in PLANS.calls  # the ready call of the shortcut's one-lookup path
    trnplan.clear_plan_cache()
    assert PLANS.by_alias(key) is None and key not in PLANS.calls
    tfft.fft(x, norm="ortho")
    assert PLANS.by_alias(key) is not None and PLANS.by_alias(key) is not plan


def test_an_evicted_plan_leaves_no_ready_call(monkeypatch, no_full_path):
    """The plan LRU's eviction and the names' bound both reach the ready calls: a call then takes
    the full path again (made to raise here) instead of running a plan the cache let go."""
    monkeypatch.setenv("TRNPLAN_PLAN_LRU_SIZE", "1")
    x, x2 = _rand((4, 64), C64), _rand((4, 32), C64)
    tfft.fft(x)
    key = _dropin._direct_key("fft", x, None, -1, None)
    assert key in PLANS.calls
    tfft.fft(x2)  # a second plan: the first is evicted
    assert key not in PLANS.calls and PLANS.by_alias(key) is None
    monkeypatch.setenv("TRNPLAN_PLAN_LRU_SIZE", "64")
    trnplan.clear_plan_cache()
    monkeypatch.setattr(memo, "MAX_NAMES", 2)  # a call's two names: the drop-in's request and the shortcut's
    tfft.fft(x)
    assert key in PLANS.calls
    tfft.fft(x2)  # its names push out x's, and with them x's ready call
    assert key not in PLANS.calls
    no_full_path()
    with pytest.raises(AssertionError, match=r"fft\(\) took the full path"):
        tfft.fft(x)
    _close(tfft.fft(x2), _want("fft", x2, (32,), None))


def _x(shape=(4, 64), dtype=C64, device="cpu"):
    return _rand(shape, dtype).to(device)


#: (field, the seen call, the changed call, the changed call's reference: (function, input, logical
#: shape, norm, numpy axes moved to the end) or the exception it raises)
X, X2, X128, XSQ = _x(), _x((2, 64)), _x(dtype=C128), _x((64, 64))
STALE = {
    "function": (lambda: tfft.fft(X), lambda: tfft.ifft(X), ("ifft", X, (64,), None)),
    "shape": (lambda: tfft.fft(X), lambda: tfft.fft(X2), ("fft", X2, (64,), None)),
    "dtype": (lambda: tfft.fft(X), lambda: tfft.fft(X128), ("fft", X128, (64,), None)),
    "device": (lambda: tfft.fft(X.to("meta")), lambda: tfft.fft(X), ("fft", X, (64,), None)),
    "n": (lambda: tfft.fft(X), lambda: tfft.fft(X, n=32), ("fft", X[:, :32], (32,), None)),
    "n's type": (lambda: tfft.fft(X, n=64), lambda: tfft.fft(X, n=64.0), TypeError),
    "s": (lambda: tfft.fft2(XSQ), lambda: tfft.fft2(XSQ, s=(64, 32)), ("fft2", XSQ[:, :32], (64, 32), None)),
    "s's type": (lambda: tfft.rfft2(XSQ.real, s=(64, 64)), lambda: tfft.rfft2(XSQ.real, s=(64.0, 64)), TypeError),
    "dim": (lambda: tfft.fft(XSQ, dim=-1), lambda: tfft.fft(XSQ, dim=0), ("fft", XSQ.T, (64,), None)),
    "dim's type": (lambda: tfft.fft(X, dim=1), lambda: tfft.fft(X, dim=True), TypeError),
    "norm": (lambda: tfft.fft(X), lambda: tfft.fft(X, norm="ortho"), ("fft", X, (64,), "ortho")),
}


@pytest.mark.parametrize("field", list(STALE))
def test_a_change_in_any_field_of_the_key_is_not_answered_by_a_stale_entry(field):
    seen, changed, want = STALE[field]
    seen()
    seen()  # its key is in the plan cache now
    if isinstance(want, type):
        with pytest.raises(want, match="must be int"):  # the full path's refusal, as for a first call
            changed()
        return
    name, x, logical, norm = want
    y = changed()
    if field == "dim":
        y = y.T  # transformed along dim 0 of XSQ: compare along the last dim of its transpose
    _close(y, _want(name, x, logical, norm))
