"""Settings that can be overridden from the environment — all of them, in one place.

=========================  ==================  ==========================================
variable                   default             meaning
=========================  ==================  ==========================================
TRNPLAN_PLAN_LRU_SIZE      256                 ready plans kept by the in-process plan cache
TRNPLAN_CACHE_DIR          ~/.cache/trnplan    the on-disk plan cache (or $XDG_CACHE_HOME)
TRNPLAN_WISDOM_ONLY        0                   1: never plan or compile; a cache miss is an error
TRNPLAN_TRUST_CACHE        0                   1: load artifacts from a cache dir others can write
=========================  ==================  ==========================================
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


def wisdom_only() -> bool:
    """``TRNPLAN_WISDOM_ONLY=1``: the whole process behaves as ``effort="wisdom_only"``."""
    raw = os.environ.get("TRNPLAN_WISDOM_ONLY", "0")
    if raw not in ("0", "1", ""):
        raise ValueError(f"environment variable TRNPLAN_WISDOM_ONLY={raw!r} must be 0 or 1")
    return raw == "1"
