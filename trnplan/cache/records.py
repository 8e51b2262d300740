"""The plan cache's keys and typed records: every key format, and the records the planner's pure
functions compute.

The planner never holds a cache: the cost model's calibration (:mod:`trnplan.planner.learn`) and
the library leaves' fit (:mod:`trnplan.planner.leafcost`) are pure functions of the records read
here and return the records written here; the plan layer asks this module for them. Every read
goes through :meth:`PlanCache.get_record <trnplan.cache.store.PlanCache.get_record>` with the
record kind's own ``parse``, so a damaged record is forgotten with one warning and reads as a miss
(the one damaged-record policy of the cache).

Keys (``<kind>:<...>``; the fingerprint digest ``fpd`` makes each per machine and installation):

=================================================  ==========================================
``wisdom:<problem digest>:<fpd>:<variant>``        a plan (:func:`wisdom_key`)
``artifact:<tree hash>:<fpd>:<mode>``              a compiled artifact's bytes
``probe:<fpd>:<device>``                           a device's precision probe
``load_check:<fpd>:<mode>``                        why AOT artifacts crash at load here
``calibration:<fpd>:<device>``                     the cost model's fitted multipliers
``leafmodel:<fpd>:<threads>``                      the library leaves' fit at a thread count
``compiled:<wisdom key>``                          a compiled graph's record (:mod:`~trnplan.cache.compiled`)
=================================================  ==========================================
"""

from __future__ import annotations

import hashlib
import json
import time

from trnplan.planner import leafcost, learn

#: the stored efforts a request may use, best first: wisdom from a higher effort satisfies a
#: lower one (as in FFTW), never the reverse
USABLE_EFFORTS = {"patient": ("patient",), "measure": ("patient", "measure"),
                  "estimate": ("patient", "measure", "estimate"), "wisdom_only": ("patient", "measure", "estimate")}


def variant_digest(spec, tol, effort: str = "estimate", exportable: bool = False) -> str:
    """The last part of a wisdom key: the forced strategy, the bound, the effort and whether the plan
    is exportable (torch ops only)."""
    return _variants(spec, tol, ((effort, exportable),))[0]


def _variants(spec, tol, pairs) -> list[str]:
    """:func:`variant_digest` of each (effort, exportable) of ``pairs``."""
    head = [str(spec) if spec else None, tol]
    out = []
    for e, x in pairs:  # a loop, not a comprehension: no Python call of its own on every request
        # estimate's eager keys are those of the versions before efforts
        out.append(hashlib.sha256(json.dumps(head + [e, x] if e != "estimate" or x else head).encode()).hexdigest()[:8])
    return out


def wisdom_key(digest: str, fpd: str, spec, tol: float, effort: str, exportable: bool) -> str:
    """Where a plan of problem ``digest`` made at ``effort`` is stored."""
    return f"wisdom:{digest}:{fpd}:{variant_digest(spec, tol, effort, exportable)}"


def wisdom_keys(digest: str, fpd: str, spec, tol: float, effort: str, exportable: bool) -> tuple[str, ...]:
    """The wisdom keys a request may be answered from, best first (a plan is stored under its own
    effort's key). An exportable plan (torch ops only) also serves an eager request, not the reverse.
    """
    exports = (True,) if exportable else (False, True)
    pairs = [(e, x) for e in USABLE_EFFORTS[effort] for x in exports]
    return tuple([f"wisdom:{digest}:{fpd}:{v}" for v in _variants(spec, tol, pairs)])


def request_keys(digest: str, fpd: str, spec, tol: float, look: str, effort: str,
                 exportable: bool) -> tuple[tuple[str, ...], str]:
    """(:func:`wisdom_keys` for effort ``look``, :func:`wisdom_key` for ``effort``): the keys a request
    is answered from and the one its new plan is stored under, their variant digests made in one call."""
    exports = (True,) if exportable else (False, True)
    pairs = []
    for e in USABLE_EFFORTS[look]:  # loops, not comprehensions: no Python call of their own per request
        for x in exports:
            pairs.append((e, x))
    pairs.append((effort, exportable))
    keys = []
    for v in _variants(spec, tol, pairs):
        keys.append(f"wisdom:{digest}:{fpd}:{v}")
    return tuple(keys[:-1]), keys[-1]


def artifact_key(problem_digest: str, tree_digest: str, fpd: str, mode: str) -> str:
    """Where the ``mode`` artifact of a tree for a problem is stored."""
    return f"artifact:{hashlib.sha256((problem_digest + tree_digest).encode()).hexdigest()[:16]}:{fpd}:{mode}"


def probe_key(fpd: str, device) -> str:
    return f"probe:{fpd}:{device}"


def load_check_key(fpd: str, mode: str) -> str:
    return f"load_check:{fpd}:{mode}"


def calibration_key(fpd: str, device) -> str:
    return f"calibration:{fpd}:{device}"


def leafmodel_key(fpd: str, threads: int) -> str:
    return f"leafmodel:{fpd}:{threads}"


# ------------------------------------------------------------------ the planner's records
def planning_profile(profile, cache, fpd: str, device, threads: int):
    """(the profile to price plans on, the calibration applied or None): ``profile`` calibrated by
    this machine's stored measurements on ``device`` and with its library leaves fitted at
    ``threads`` threads, where the plan cache holds them (:func:`calibrated`, then :func:`fitted`)."""
    profile, calibration = calibrated(profile, cache, fpd, device)
    return fitted(profile, cache, fpd, threads), calibration


def calibrated(profile, cache, fpd: str, device):
    """(``profile`` calibrated by this machine's stored measurements on ``device``, the calibration
    applied or None), where the plan cache holds them."""
    stored = cache.get_record(calibration_key(fpd, device), learn.parse_record) if cache is not None else None
    return learn.calibrated_profile(profile, stored)


def fitted(profile, cache, fpd: str, threads: int):
    """``profile`` with its library leaves fitted at ``threads`` threads, where the plan cache holds a fit."""
    fit = leaf_fit(cache, fpd, threads) if profile.fft_gflops else None
    return leafcost.fitted_profile(profile, fit, threads)


def add_calibration_samples(cache, fpd: str, device, samples, profile):
    """Add measured ``samples`` (terms, µs) to this machine's calibration on ``device`` and refit
    against the prior ``profile`` (:func:`trnplan.planner.learn.merged`), read and written in one
    transaction of the cache, so processes measuring at once all keep their samples (4 processes
    measuring kept 210 of 400 samples otherwise, issue 34). The new calibration, or None without a
    cache or samples."""
    if cache is None or not samples:
        return None
    written = cache.update_record(calibration_key(fpd, device),
                                  lambda old: learn.merged(old, samples, profile), learn.parse_record)
    return learn.calibration(written)


def leaf_fit(cache, fpd: str, threads: int) -> dict | None:
    """The stored leaf fit of this machine at ``threads`` ({"leaves": {name: LeafCost}, ...}), or None
    (a damaged record is forgotten with a warning: refit with ``trnplan calibrate``)."""
    if cache is None:
        return None
    return cache.get_record(leafmodel_key(fpd, threads), leafcost.parse_record)


def store_leaf_fit(cache, fpd: str, threads: int, leaves: dict, report: dict) -> None:
    """Store fitted ``leaves`` (name → LeafCost) with the fit's ``report`` (rms_heldout, grid …)."""
    cache.set_record(leafmodel_key(fpd, threads), leafcost.fit_record(leaves, report, time.time()))


__all__ = ["USABLE_EFFORTS", "add_calibration_samples", "artifact_key", "calibrated", "calibration_key", "fitted",
           "leaf_fit",
           "leafmodel_key", "load_check_key", "planning_profile", "probe_key", "request_keys", "store_leaf_fit",
           "variant_digest", "wisdom_key", "wisdom_keys"]
