"""trnplan.core.state: one registry of process-wide state, one reset (issue 26 item 5).

The check is behavioural: every trnplan module is imported, the state is reset and photographed
(every module-level container, scalar, functools cache and the containers inside trnplan objects
held at module level), a workload that touches the process-wide state runs, and after one more
reset the photograph must match. A new module-level cache that nobody registers fails it, naming
the module and the name.
"""

from __future__ import annotations

import copy
import functools
import importlib
import pkgutil
import sys
import threading
import types

import numpy as np
import pytest
import scipy.fft
import torch

import trnplan
import trnplan.conv
from trnplan.core import state
from trnplan.interfaces import scipy_fft
from trnplan.kernels import hostlib
from trnplan.planner import registry

#: modules that cannot be imported here: spmd needs torch-xla (the xla lane), __main__ runs the CLI
NOT_IMPORTED = {"trnplan.spmd", "trnplan.__main__"}
#: module globals that change and are not state (see trnplan/core/state.py's docstring)
NOT_STATE = {("trnplan.backends.artifacts", "_TMP_DIR")}
CONTAINERS = (dict, list, set, bytearray)


def _import_all() -> list:
    names = [m.name for m in pkgutil.walk_packages(trnplan.__path__, "trnplan.")]
    return [importlib.import_module(n) for n in sorted(names) if n not in NOT_IMPORTED]


def _container(value):
    """A comparable copy of a container: keys (or items) and the identity of the values."""
    if isinstance(value, dict):
        return ("dict", [(k, id(v)) for k, v in value.items()])
    if isinstance(value, set):
        return ("set", set(value))
    return (type(value).__name__, [id(v) for v in value])


def _ours(value) -> bool:
    return type(value).__module__.startswith("trnplan") and hasattr(value, "__dict__")


def _value_photo(name: str, value):
    """A comparable copy of one module-level value, or None where it is not state (a class, a function)."""
    if isinstance(value, CONTAINERS):
        return _container(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return ("value", value)
    if isinstance(value, threading.Event):
        return ("event", value.is_set())
    if isinstance(value, functools._lru_cache_wrapper):
        return ("memo", value.cache_info().currsize) if value.__module__ == name else None
    if isinstance(value, (type, types.ModuleType, types.FunctionType)):
        return None
    return ("id", id(value))  # rebinding a global (a sentinel, a lazily made object)


def _photo() -> dict:
    """(module, name[, attribute]) -> a comparable copy of everything a module keeps at module level,
    and of the containers inside trnplan objects held there (the plan LRU, the solver registry)."""
    out = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("trnplan") or module is None:
            continue
        for attr, value in vars(module).items():
            key = (name, attr)
            if key in NOT_STATE or attr.startswith("__"):
                continue
            photo = _value_photo(name, value)
            if photo is not None:
                out[key] = photo
            if photo is not None and photo[0] == "id" and _ours(value):
                out.update({(*key, field): _container(inner) for field, inner in vars(value).items()
                            if isinstance(inner, (*CONTAINERS, tuple))})
    return out


def _workload(tmp_path) -> None:
    """Touch the process-wide state the way a program does."""
    trnplan.set_timelimit(1.5)
    trnplan.set_plan_cache_size(3)
    plan = trnplan.plan_many(64, batch=2)
    x = torch.randn(2, 64, dtype=torch.complex64)
    plan.execute(x)
    trnplan.fft.fft(x)
    trnplan.fft.rfft(torch.randn(3, 48))
    trnplan.stft(torch.randn(400), 64, hop_length=16, window=torch.hann_window(64), return_complex=True)
    trnplan.plan_many(12, batch=4, cores=2).execute(torch.randn(4, 12, dtype=torch.complex64))
    toy = copy.copy(registry.SOLVERS["butterfly"])
    toy.name = "toy-state"
    registry.register(toy)
    registry.unregister("stockham")
    hostlib.installed("scipy")
    hostlib.library_module("scipy")
    with scipy.fft.set_backend(scipy_fft, only=True):  # the scipy.fft backend's seen-call shortcut
        scipy.fft.dct(np.ones((2, 16), dtype=np.float32))
    trnplan.conv.plan_conv(torch.randn(2, 4), 16, "causal")(torch.randn(1, 2, 16))  # the conv picks
    trnplan.cache.set_default_cache(trnplan.cache.PlanCache(tmp_path / "other"))


def test_one_reset_puts_every_module_level_state_back(tmp_path):
    _import_all()
    state.reset()
    before = _photo()
    _workload(tmp_path)
    during = _photo()
    state.reset()
    after = _photo()
    changed = {k for k in before if k in during and during[k] != before[k]}
    # the workload must reach the state this test is about, or the test proves nothing
    for needed in [("trnplan.plan.memo", "PLANS", "_plans"), ("trnplan.core.config", "_timelimit"),
                   ("trnplan.planner.registry", "SOLVERS", "_solvers"), ("trnplan.cache", "_override"),
                   ("trnplan.interfaces.scipy_fft", "_SEEN"), ("trnplan.conv", "_TREES")]:
        assert needed in changed, f"the workload did not change {needed}"
    left = sorted(str(k) for k in before if k in after and after[k] != before[k])
    assert not left, ("process-wide state that state.reset() does not put back (register a reset for it with "
                      f"trnplan.core.state.register, or list it in NOT_STATE if it is not state): {left}")
    new = sorted(str(k) for k in after if k not in before)
    assert not new, f"module-level names that appeared during the workload and survive a reset: {new}"


def test_reset_gives_a_fresh_process_settings_and_solvers():
    trnplan.set_timelimit(2.0)
    trnplan.set_plan_cache_size(5)
    trnplan.cache.set_default_cache(None)
    registry.unregister("butterfly")
    state.reset()
    assert trnplan.core.config.timelimit("measure") == trnplan.core.config.DEFAULT_TIMELIMIT["measure"]
    assert trnplan.plan_cache_info()["maxsize"] == 256
    assert trnplan.cache.default_cache() is not None
    assert "butterfly" in registry.SOLVERS
    assert registry.SOLVERS.snapshot() == registry._BUILTIN


def test_reset_keep_leaves_the_named_state():
    plan = trnplan.plan_many(32, batch=2)
    state.reset(keep=("plan.memo",))
    assert trnplan.plan_many(32, batch=2) is plan
    state.reset()
    assert trnplan.plan_cache_info()["size"] == 0


def test_reset_keep_refuses_an_unknown_name():
    with pytest.raises(KeyError, match="not registered: plan.mem"):
        state.reset(keep=("plan.mem",))


def test_register_refuses_a_non_callable():
    with pytest.raises(TypeError, match="takes a callable; got dict"):
        state.register("test.bad", {})
    assert "test.bad" not in state.registered()


def test_the_plan_cache_names_are_registered():
    names = state.registered()
    for name in ("core.config", "cache.default", "plan.memo", "backends.probes", "kernels.hostlib", "planner.solvers"):
        assert name in names
    assert len(set(names)) == len(names)
    assert np.all(np.diff([names.index("core.config"), names.index("plan.memo")]) > 0)  # lower layers first
