"""The device's precision probe for the build pipeline: from this process, the plan cache, or run
now and stored; and the Neuron probe's deferral (a host fallback plans under an assumed probe)."""

from __future__ import annotations

import torch

from trnplan.backends.base import PrecisionProbe
from trnplan.cache import records
from trnplan.cache.fingerprint import fingerprint_digest
from trnplan.cache.store import PlanCache


def precision_probe(backend, device: torch.device, cache: PlanCache | None, fpd: str):
    """(probe, origin): the device's precision probe, from this process, the plan cache (keyed by
    the fingerprint digest) or run now and stored there."""
    if backend.has_probe(device):
        return backend.precision_probe(device), "from this process"
    key = records.probe_key(fpd, device)
    stored = cache.get_record(key, PrecisionProbe.from_dict) if cache is not None else None
    if stored is not None:
        return backend.remember_probe(device, stored), "from the plan cache"
    probe = backend.precision_probe(device)
    if probe.transient:  # a failed probe's assumption is never stored: the next process probes again
        return probe, "assumed now (not stored)"
    if cache is not None:
        cache.add_record(key, probe.to_dict())
    return probe, "probed now"


def assumed_probe(request, fp: dict):
    """(probe, "assumed") where the device's probe may wait until a device plan wins, else None.

    The Neuron probe is a compile. For the precisions whose device plans the assumed probe favours
    (``backend.probe_can_wait``), a host fallback that wins under it wins under any probe result,
    so it is planned first under the assumption and the probe runs only if a NeuronCore plan wins.
    """
    backend, device, cache = request.backend, request.device, request.cache
    if request.effort != "estimate" or not backend.probe_can_wait(request.problem) or backend.has_probe(device):
        return None
    fpd = fingerprint_digest(fp)
    if cache is not None and cache.get_record(records.probe_key(fpd, device), PrecisionProbe.from_dict) is not None:
        return None
    return backend.assumed_probe("the host fallback runs this plan, so nothing was compiled to probe"), "assumed"


__all__ = ["assumed_probe", "precision_probe"]
