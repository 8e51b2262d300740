"""The on-disk plan cache: wisdom (plan trees as JSON) and compiled artifacts, keyed by fingerprint.

See docs/cache.md. The process-wide default is :func:`default_cache` (at ``$TRNPLAN_CACHE_DIR``
or ``~/.cache/trnplan``); ``plan_many(..., cache=PlanCache(path))`` overrides it per call and
``cache=None`` bypasses it; :func:`set_default_cache` overrides it for the process.
"""

from __future__ import annotations

import os
import threading

from trnplan.cache.fingerprint import diff, fingerprint, fingerprint_digest
from trnplan.cache.store import CacheWarning, PlanCache, UntrustedCacheError, default_cache_dir
from trnplan.core import state

_UNSET = object()
_override = _UNSET
_instances: dict = {}
#: (TRNPLAN_CACHE_DIR, XDG_CACHE_HOME, HOME) -> the default cache they name: plan_many asks on every
#: call, and an unchanged environment is one dictionary read
_by_environment: dict = {}
_lock = threading.Lock()


def default_cache() -> PlanCache | None:
    """The process-wide cache: the one set with :func:`set_default_cache`, else the one at
    :func:`default_cache_dir` (re-read each call, so changing ``TRNPLAN_CACHE_DIR`` takes effect)."""
    if _override is not _UNSET:
        return _override
    names = (os.environ.get("TRNPLAN_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))
    cache = _by_environment.get(names)
    if cache is not None:
        return cache
    path = default_cache_dir()
    with _lock:
        cache = _instances.get(path)
        if cache is None:
            cache = _instances[path] = PlanCache(path)
        _by_environment[names] = cache
        return cache


def set_default_cache(cache) -> None:
    """Use ``cache`` (a :class:`PlanCache`, or ``None`` for no cache) as the process default;
    ``set_default_cache("env")`` goes back to the directory named by the environment."""
    global _override
    if cache == "env":
        _override = _UNSET
    elif cache is None or isinstance(cache, PlanCache):
        _override = cache
    else:
        raise TypeError(f"set_default_cache takes a PlanCache, None or 'env'; got {type(cache).__name__}")


def _reset() -> None:
    """A fresh process: no set_default_cache, no PlanCache opened yet (the open ones are dropped,
    not closed: a plan may still hold one)."""
    global _override
    with _lock:
        _override = _UNSET
        _instances.clear()
        _by_environment.clear()


state.register("cache.default", _reset)


__all__ = ["CacheWarning", "PlanCache", "UntrustedCacheError", "default_cache", "default_cache_dir", "diff",
           "fingerprint", "fingerprint_digest", "set_default_cache"]
