"""The plan layer: the build pipeline (provide), Plan, plan_many and explain.

See docs/architecture.md for the layers: this package imports the cache, planner, backends,
kernels and core layers, and the front ends (fft, stft, distributed, cli, ...) import it.
"""

from trnplan.plan.api import clear_plan_cache, plan_cache_info, plan_many
from trnplan.plan.plan import Plan

__all__ = ["Plan", "clear_plan_cache", "plan_cache_info", "plan_many"]
