"""glibc's malloc thresholds for a process whose FFTs return multi-MB outputs (:func:`tune_malloc`).

Every call of a plan (and of torch.fft) returns a new output tensor. glibc serves a block above
its mmap threshold with a fresh mapping, raises that threshold as such blocks are freed (up to
32 MiB on 64-bit), and returns the heap's top to the kernel past its trim threshold (twice the
mmap threshold while that moves); so whether a 6 MB output is memory the process already has, or
fresh pages that fault on first touch (one minor fault per 4 KiB), depends on what the process
allocated and freed before. Measured on the development machine (glibc 2.36, torch 2.13.0, 2
threads, torch.fft of 4096×192 complex64, 2026-11-27): 246 µs a call with no faults, 1439 µs with
the 1537 faults a call of a process in the faulting state (reproduced with
``MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=0``), and 240 µs in that process after
:func:`tune_malloc`; four fresh processes of bench/measure_busy.py's 4096×192 row took 20 k to
952 k faults, the last every column 1.5-2× slower.

trnplan does not change the process's memory policy by itself: the function is the user's
opt-in, like glibc's own environment variables (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``) before the process starts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

from trnplan.core.errors import InvalidArgument, NotSupportedYet

#: mallopt(3)'s parameter numbers (glibc's malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX: 4 MiB × sizeof(long))
MMAP_THRESHOLD_MAX = 32 << 20


def _libc():
    """glibc's shared library, or None (another C library, or not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    # glibc only: musl has mallopt as a stub that does nothing
    return libc if hasattr(libc, "gnu_get_libc_version") else None


def tune_malloc(mmap_threshold: int = MMAP_THRESHOLD_MAX, trim_threshold: int = 256 << 20) -> None:
    """Fix glibc's malloc thresholds, so that multi-MB outputs reuse the process's memory.

    Sets ``M_MMAP_THRESHOLD`` (blocks up to it come from the heap, not a fresh mapping, and the
    threshold no longer moves) and ``M_TRIM_THRESHOLD`` (free memory at the heap's top up to it
    stays in the process) with ``mallopt(3)``. The process then keeps up to ``trim_threshold``
    bytes of freed memory (its RSS does not fall back after a peak), and once the heap has grown
    to the working set (the first calls after it may still fault: 0-460 faults a call over 20
    calls, by the process) a call's outputs no longer page-fault on first touch: torch.fft of
    4096×192 complex64 went from 1439 µs (1537 minor faults a call) to 240 µs in a process that
    faulted (docs/user-guide.md, "Memory: page faults on multi-MB outputs"). Affects every
    allocation of the process (torch's, numpy's, the libraries'), not only trnplan's; call it
    once, early.

    Parameters
    ----------
    mmap_threshold : int, default 32 MiB
        Bytes; at most :data:`MMAP_THRESHOLD_MAX` (glibc's limit on 64-bit).
    trim_threshold : int, default 256 MiB
        Bytes, ≥ 0.

    Raises
    ------
    NotSupportedYet
        Not Linux with glibc (macOS, Windows, musl): nothing is changed; there, use the
        platform's allocator settings (or jemalloc / tcmalloc).
    InvalidArgument
        A threshold out of range, or one glibc refused.
    """
    for name, value in (("mmap_threshold", mmap_threshold), ("trim_threshold", trim_threshold)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgument(f"tune_malloc: {name} must be an int ≥ 0 (bytes), got {value!r}")
    if mmap_threshold > MMAP_THRESHOLD_MAX:
        raise InvalidArgument(f"tune_malloc: mmap_threshold {mmap_threshold} is over glibc's limit "
                              f"{MMAP_THRESHOLD_MAX} (32 MiB on 64-bit); pass at most that")
    libc = _libc()
    if libc is None:
        raise NotSupportedYet(f"tune_malloc needs Linux with glibc (mallopt(3)); this is {sys.platform} "
                              "without it: nothing was changed. Use the platform's allocator settings instead")
    for param, name, value in ((M_MMAP_THRESHOLD, "M_MMAP_THRESHOLD", mmap_threshold),
                               (M_TRIM_THRESHOLD, "M_TRIM_THRESHOLD", trim_threshold)):
        if libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)) != 1:
            raise InvalidArgument(f"tune_malloc: glibc refused mallopt({name}, {value})")
