"""Buffers a CPU call keeps between calls, one per calling thread: :class:`PerThread`.

Three calls keep such a buffer: the truncated c2r's zero-filled spectrum
(:class:`trnplan.planner.truncated.TruncateFull`), the convolution's padded input
(:class:`trnplan.conv.ConvPlan`) and the spatial convolution's padded input
(:class:`trnplan.planner.conv.SpatialConv`). Why keep one: a fresh ~2 MB buffer a call is mapped
afresh by glibc's malloc whenever the heap's top was trimmed (mallopt(3): the trim threshold is twice
a dynamic mmap threshold that follows the largest block freed), and its page faults then cost as
much as the transform (the 1-D truncated round trip at 512 × 1024: 994 faults a call and ~2× its
time; a causal convolution at L = K = 256, 8 × 64: ~480 faults, about half of a ~1 ms call; this
2-vCPU machine, 2026-11-27). The rules they share, kept here once:

- one value per calling thread (a thread writes only its own), under the signature it was made for;
  a new signature replaces it;
- at most ``most`` threads' values (threads come and go: a few buffers, not one per thread ever);
- made as normal tensors even inside ``torch.inference_mode()`` (an inference tensor may not be
  written outside it, and every later normal call writes the buffer);
- this process's and this object's: a pickle or a deep copy starts empty (a copy's calls must not
  write the original's buffers);
- used only where writing a kept buffer is right (:func:`plain_cpu_call`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

import torch

__all__ = ["PerThread", "plain_cpu_call"]


def plain_cpu_call(t: torch.Tensor) -> bool:
    """Whether a call on ``t`` may write a kept buffer: a plain CPU tensor (not a fake, meta or
    functorch-wrapped one: vmap's batched tensors are ``torch.Tensor`` too, and the copy would be
    vmapped), no gradient to record, and no tracer or compiler recording the ops (the buffer would
    become a constant of the graph)."""
    return (t.device.type == "cpu" and type(t) is torch.Tensor and not (torch.is_grad_enabled() and t.requires_grad)
            and not torch._C._are_functorch_transforms_active() and not torch._C._is_tracing()
            and not torch.compiler.is_compiling())


class PerThread:
    """Values kept per calling thread, each under the key (signature) it was made for.

    Parameters
    ----------
    most : int, default 8
        The most threads whose values are kept; one more clears them all.
    """

    def __init__(self, most: int = 8):
        self.most = most
        self._kept: dict = {}  # thread id -> (key, value)

    def get(self, key: Hashable):
        """This thread's value if it was kept under ``key``, else None."""
        kept = self._kept.get(threading.get_ident())
        return kept[1] if kept is not None and kept[0] == key else None

    def mine(self):
        """This thread's value, whatever its key (None: none kept)."""
        kept = self._kept.get(threading.get_ident())
        return None if kept is None else kept[1]

    def put(self, key: Hashable, value):
        """Keep ``value`` for this thread under ``key`` (replacing its value); return it."""
        if threading.get_ident() not in self._kept and len(self._kept) >= self.most:
            self._kept.clear()
        self._kept[threading.get_ident()] = (key, value)
        return value

    def make(self, key: Hashable, factory: Callable[[], object]):
        """This thread's value under ``key``, made by ``factory()`` (outside inference mode) if
        there is none."""
        value = self.get(key)
        if value is None:
            with torch.inference_mode(False):
                value = self.put(key, factory())
        return value

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        self._kept.clear()

    def __getstate__(self) -> dict:
        return {"most": self.most}  # the buffers stay with this process and this object

    def __setstate__(self, state: dict) -> None:
        self.most, self._kept = state["most"], {}

    def __deepcopy__(self, memo) -> PerThread:
        return PerThread(self.most)
