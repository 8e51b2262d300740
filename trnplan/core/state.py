"""Process-wide state in one place: every module-level cache or setting registers its reset here.

DESIGN.md §2: "process state in one place, with one reset, so any test order gives the same
result". A module that keeps something across calls at module level (a dict of live objects, a
memo of a probe, a ``functools`` cache, a setting made with a ``set_*`` function) registers a
function that puts it back to a fresh process's state::

    _PROBES: dict = {}
    state.register("backends.probes", _PROBES.clear)

:func:`reset` calls them all, in registration order (import order: lower layers first). The
tests' per-test fixture (tests/conftest.py) calls it after every test, so no test sees what
another left behind whatever order they run in (issue 26; commits 4f93dbd and ed07dfd were
order-dependent failures of state nobody reset). :func:`registered` lists the names, and a test
checks that every module-level mutable object of the package is accounted for.

Not registered, on purpose: constant tables (built at import, never written), locks and
``contextvars`` (a ``with`` block sets and restores them), counters that only make names unique
(``plan.traffic``), and the per-process scratch directory of extracted AOT packages
(``backends.artifacts``: its files are named by content and it is removed at exit; nothing read
from it depends on what ran before).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

_RESETS: dict[str, Callable[[], None]] = {}
_LOCK = threading.Lock()


def register(name: str, reset_fn: Callable[[], None]) -> None:
    """Register ``reset_fn`` (no arguments) as the way back to a fresh process for ``name``.

    Parameters
    ----------
    name : str
        Where the state lives, e.g. ``"cache.default"`` (unique; registering a name again, as a
        reloaded module does, replaces its function and keeps its place in the order).
    reset_fn : callable
        Puts the state back as a fresh process has it; must be safe to call at any time no plan
        is running, and any number of times.
    """
    if not callable(reset_fn):
        raise TypeError(f"state.register({name!r}, ...) takes a callable; got {type(reset_fn).__name__}")
    with _LOCK:
        _RESETS[name] = reset_fn


def registered() -> tuple[str, ...]:
    """The registered names, in the order :func:`reset` resets them."""
    with _LOCK:
        return tuple(_RESETS)


def reset(keep: Iterable[str] = ()) -> None:
    """Put every registered piece of process-wide state back as a fresh process has it.

    Parameters
    ----------
    keep : iterable of str, optional
        Names to leave alone (e.g. ``("plan.memo",)`` for tests that share ready plans on purpose).

    Raises
    ------
    KeyError
        ``keep`` names something that is not registered (a typo would otherwise keep nothing).
    """
    keep = frozenset(keep)
    with _LOCK:
        unknown = keep - set(_RESETS)
        if unknown:
            raise KeyError(f"state.reset(keep=...): not registered: {', '.join(sorted(unknown))} "
                           f"(registered: {', '.join(_RESETS)})")
        resets = [fn for name, fn in _RESETS.items() if name not in keep]
    for fn in resets:  # outside the lock: a reset may take its module's own lock
        fn()


__all__ = ["register", "registered", "reset"]
