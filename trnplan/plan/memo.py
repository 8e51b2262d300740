"""The process-wide in-process plan cache: ready Plans keyed by their request, bounded LRU.

There is one such cache (DESIGN.md: "no global mutable state beyond the cache and the
process-wide plan LRU"), and one key: the :class:`~trnplan.plan.request.PlanRequest` a plan was
made for (FFTW's problem + flags). Entries are made outside the lock and re-checked after, as
pocketfft's plan cache does: two threads that build the same plan keep the first.

Making a request validates every argument (a Problem, its digest, the backend): 50–70 trnplan
calls. So the raw arguments a request was made from are *names* of it (:attr:`PlanMemo.names`):
``plan_many`` with arguments it has seen, in the same environment, goes from its arguments to the
request by one dictionary read and to the plan by a second (an in-process hit is 5 trnplan calls;
tools/count_calls.py). The front ends that call per transform (trnplan.fft's direct path, the
drop-in's ``cached_plan``) name requests by their own arguments the same way. A name answers only
while the cache holds a plan under the request it names, so :meth:`PlanMemo.clear` and eviction
reach it too; a name never holds a plan.

The planner's memo (``Planner._memo``) is not a third cache: it lives for one planning request
(the sub-problems one search shares), and is dropped with its planner.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from trnplan.core import config, state

#: names kept at most (the oldest inserted goes first; the cache itself ranks plans by use)
MAX_NAMES = 1024


class PlanMemo:
    """A bounded LRU of ready plans (capacity ``TRNPLAN_PLAN_LRU_SIZE``, re-read on each insert),
    keyed by :class:`~trnplan.plan.request.PlanRequest`, and the names of those requests."""

    def __init__(self):
        self._plans: OrderedDict = OrderedDict()
        #: raw arguments (a hashable tuple that identifies them, types included) -> the request
        #: they make; read without the lock (a dict read is atomic), written under it
        self.names: dict = {}
        #: names -> their plan's ready call (:attr:`Plan.direct_calls`) for the input the name
        #: describes: the drop-in's hot path reads one dict instead of two and the plan's table
        #: (~0.3 µs of its 2 µs budget, bench/dropin.py). Cleared with every eviction and by
        #: :meth:`clear`, so that a call answers only while its plan is cached
        self.calls: dict = {}
        self._lock = threading.Lock()
        #: the plan layer's build pipeline, ``request -> Plan`` (:func:`trnplan.plan.api._build_plan`),
        #: set once when that module is imported: what :meth:`plan` runs on a miss. Set there, not
        #: passed to each Plan, because the pipeline builds Plans (it imports the module that
        #: defines them, which therefore cannot import it)
        self.build = None

    def plan(self, request):
        """The plan of ``request``: the cached one, else one built by the pipeline (:attr:`build`) and kept."""
        plan = self.get(request)
        if plan is None:  # built outside the lock; another thread's plan for the same request wins
            plan = self.add(request, self.build(request))
        return plan

    def get(self, request):
        """The plan of ``request`` (now the most recently used), or None; counts the hit on the plan."""
        with self._lock:
            plan = self._plans.get(request)
            if plan is not None:
                self._plans.move_to_end(request)
                plan.cache_hits += 1
            return plan

    def add(self, request, plan):
        """Keep ``plan`` for ``request`` and return it, or return the plan another thread kept first."""
        with self._lock:
            existing = self._plans.get(request)
            if existing is not None:
                existing.cache_hits += 1
                return existing
            self._plans[request] = plan
            while len(self._plans) > config.plan_lru_size():
                self._plans.popitem(last=False)
                self.calls.clear()
            return plan

    def name(self, name, request) -> None:
        """Let the raw arguments ``name`` stand for ``request`` (bounded: the oldest name goes first)."""
        with self._lock:
            if len(self.names) >= MAX_NAMES:
                oldest = next(iter(self.names))
                del self.names[oldest]
                self.calls.pop(oldest, None)
            self.names[name] = request

    def by_alias(self, name):
        """The plan of the request ``name`` stands for, if the cache holds one; else None (no hit counted)."""
        request = self.names.get(name)
        return self._plans.get(request) if request is not None else None

    def add_alias(self, name, plan, call=None) -> None:
        """Let ``name`` stand for ``plan``'s request (:meth:`name`), and ``call`` (one of the plan's
        :attr:`~trnplan.plan.plan.Plan.direct_calls`, or None) run it on the input ``name`` describes."""
        self.name(name, plan.request)
        if call is not None:
            with self._lock:
                if name in self.names:
                    self.calls[name] = call

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()
            self.names.clear()
            self.calls.clear()

    def info(self) -> dict:
        with self._lock:
            return {"size": len(self._plans), "maxsize": config.plan_lru_size()}


#: the process's in-process plan cache
PLANS = PlanMemo()
state.register("plan.memo", PLANS.clear)

__all__ = ["PLANS", "PlanMemo"]
