"""Fingerprints: everything a stored plan or artifact depends on, and how two of them differ.

A fingerprint is a flat dict of strings: the trnplan version, a digest of the solver registry
(names and versions, so changing a solver invalidates its wisdom), the torch version, the device
kind, and the backend's own facts (CPU ISA; GPU name, compute capability and CUDA version; Neuron
compiler version). Wisdom and artifacts are stored under its digest; on a miss the cache looks
for the same problem under another fingerprint and reports which fields differ.
"""

from __future__ import annotations

import hashlib
import json

import torch

from trnplan._version import __version__
from trnplan.backends import get_backend
from trnplan.planner.registry import SOLVERS


def fingerprint(device_kind: str, device: torch.device | None = None, backend=None) -> dict[str, str]:
    """The fingerprint of plans for ``device_kind`` on this machine and installation; ``device``
    (e.g. ``cuda:1``) picks the GPU whose facts it holds (default: the current one); ``backend``:
    the device kind's backend where the caller has it already."""
    fp = {
        "trnplan": __version__,
        "registry": SOLVERS.digest(),  # registry_digest(), one call nearer
        "torch": torch.__version__,
        "device": device_kind,
    }
    backend = get_backend(device_kind) if backend is None else backend
    for k, v in backend.fingerprint(device).items():  # the backend's facts, never over the common four
        fp.setdefault(k, str(v))
    return fp


def fingerprint_digest(fp: dict) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:16]


def diff(stored: dict, current: dict) -> list[str]:
    """Human-readable differences, e.g. ``["torch: 2.12.0 (stored) vs 2.13.0 (here)"]``."""
    out = []
    for key in sorted(set(stored) | set(current)):
        a, b = stored.get(key, "absent"), current.get(key, "absent")
        if a != b:
            out.append(f"{key}: {a} (stored) vs {b} (here)")
    return out
