"""What the build pipeline (:mod:`trnplan.plan.provide`) hands back: the plan's provenance, made once
at the end, and the provided tree, module and runner; and the cache warnings it raises, attributed to
the user's call."""

from __future__ import annotations

import sys
import warnings

import attrs
import torch

from trnplan.cache.store import CacheWarning
from trnplan.core.node import PlanNode


@attrs.frozen
class Provenance:
    """Where a plan came from, for explain() and tests: an immutable record made once, at the end
    of :func:`provide` (and completed with the Neuron bucket note by plan_many, with attrs.evolve)."""

    origin: str = "planned now"  # "planned now" | "wisdom hit"
    planning_ms: float = 0.0
    searches: int = 0
    cache_path: str | None = None
    wisdom_key: str | None = None
    fingerprint: dict = attrs.Factory(dict)
    fingerprint_note: str | None = None
    compile_mode: str = "eager"
    compile_reason: str = ""
    artifact: str | None = None  # "compiled now" | "artifact hit" | None
    artifact_key: str | None = None
    artifact_bytes: int = 0
    compile_s: float = 0.0
    load_ms: float = 0.0
    load_check_s: float = 0.0  # an AOT artifact's first load in a child process (artifacts.load_check)
    #: why an artifact mode that was asked for could not be had (a failed build or load check), so the
    #: plan runs eagerly; None when it was had or not asked for (precompile reports it as a failure)
    artifact_error: str | None = None
    dynamic_batch: bool | None = None
    effort: str = "estimate"  # the effort that made the plan (a wisdom hit: the stored one's)
    measurement: object | None = None  # trnplan.planner.measure.Measurement of a measured plan
    calibration: str = ""  # the cost profile's calibration, one line (explain)
    probe: str = ""  # the device's precision probe, one line (explain)
    #: why a reused measured record was re-measured and replaced (it lost to the default), or None
    replaced: str | None = None
    probe_origin: str = ""  # "probed now" | "from the plan cache" | "from this process"
    bucket: str = ""  # neuron: how the batch maps onto the compiled bucket and cores (explain)
    runtime: str = ""  # accelerators: the runtime driving the device, with versions (explain)
    compile_cache: str = ""  # accelerators: the runtime's compile cache and who set it (explain)
    runs_on: str = ""  # neuron: where the plan runs (NeuronCores, the host and why, or nowhere here)
    fallback: str = ""  # accelerators: the ATen ops the runtime ran on the CPU in this process (explain)


@attrs.frozen
class Provided:
    """What :func:`provide` made: the tree, its module and runner, where they came from, the bound,
    and what :func:`commit` stores (done by provide itself unless the request verifies first)."""

    tree: PlanNode
    candidates: object  # a tuple, or a call that gives it (a wisdom hit's stored list: Plan.candidates)
    module: torch.nn.Module
    runner: object | None
    provenance: Provenance
    tol: float
    pending: tuple = attrs.field(default=(), eq=False, repr=False)  # (context, decision, entries, planning_ms)


def warn(message: str) -> None:
    """A CacheWarning attributed to the user's call (the first frame outside trnplan)."""
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("trnplan."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, CacheWarning, stacklevel=level)


__all__ = ["Provenance", "Provided", "warn"]
