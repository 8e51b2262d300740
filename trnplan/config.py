"""Settings that can be overridden from the environment — all of them, in one place.

=========================  =======  =====================================================
variable                   default  meaning
=========================  =======  =====================================================
TRNPLAN_PLAN_LRU_SIZE      256      ready plans kept by the in-process plan cache
=========================  =======  =====================================================
"""

from __future__ import annotations

import os


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} must be a positive integer") from None
    if value < 1:
        raise ValueError(f"environment variable {name}={raw!r} must be a positive integer")
    return value


def plan_lru_size() -> int:
    return _int_env("TRNPLAN_PLAN_LRU_SIZE", 256)
