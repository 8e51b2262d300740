"""The process-wide in-process plan cache: ready Plans, bounded LRU, one per process.

There is one such cache (DESIGN.md: "no global mutable state beyond the cache and the
process-wide plan LRU"). ``plan_many`` keys it by the validated request (problem digest,
strategy, device, tol, cache directory, compile mode, ...). Front ends that call it per
transform (trnplan.fft, trnplan.stft) add an *alias*: a key of their raw arguments that skips
validating the request again. plan_many's own hit costs 48–71 µs here (Problem validation and
digest), a third of a 64 × 1024 complex64 transform on this CPU; an alias hit is a dict lookup
(trnplan.fft's whole per-call work measured ~5 µs). An alias answers only while the cache holds
the same plan under the key it names, so :meth:`PlanMemo.clear` and eviction reach it too.

Entries are made outside the lock and re-checked after, as pocketfft's plan cache does: two
threads that build the same plan keep the first.

The planner's memo (``Planner._memo``) is not a third cache: it lives for one planning request
(the sub-problems one search shares), and is dropped with its planner.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from trnplan.core import config, state

#: aliases kept at most (the oldest inserted goes first; the cache itself ranks plans by use)
MAX_ALIASES = 256


class PlanMemo:
    """A bounded LRU of ready plans (capacity ``TRNPLAN_PLAN_LRU_SIZE``, re-read on each insert)."""

    def __init__(self):
        self._plans: OrderedDict = OrderedDict()
        self._aliases: dict = {}  # alias -> (plan, key)
        self._lock = threading.Lock()

    def get(self, key):
        """The plan under ``key`` (now the most recently used), or None; counts the hit on the plan."""
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                plan.cache_hits += 1
            return plan

    def add(self, key, plan):
        """Keep ``plan`` under ``key`` and return it, or return the plan another thread kept first."""
        with self._lock:
            existing = self._plans.get(key)
            if existing is not None:
                existing.cache_hits += 1
                return existing
            self._plans[key] = plan
            while len(self._plans) > config.plan_lru_size():
                self._plans.popitem(last=False)
            return plan

    def by_alias(self, alias):
        """The plan an alias names, if the cache still holds it under the same key; else None."""
        hit = self._aliases.get(alias)
        if hit is None:
            return None
        plan, key = hit
        return plan if self._plans.get(key) is plan else None

    def add_alias(self, alias, plan) -> None:
        """Let ``alias`` answer for ``plan`` while the cache holds it (no-op if it does not)."""
        with self._lock:
            key = next((k for k, v in self._plans.items() if v is plan), None)
            if key is None:
                return
            if len(self._aliases) >= MAX_ALIASES:
                del self._aliases[next(iter(self._aliases))]
            self._aliases[alias] = (plan, key)

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()
            self._aliases.clear()

    def info(self) -> dict:
        with self._lock:
            return {"size": len(self._plans), "maxsize": config.plan_lru_size()}


#: the process's in-process plan cache
PLANS = PlanMemo()
state.register("plan.memo", PLANS.clear)

__all__ = ["PLANS", "PlanMemo"]
