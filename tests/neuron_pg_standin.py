"""A stand-in for TorchNeuron's ``neuron`` torch.distributed backend, over gloo, for tests only.

Use it in spawned ranks after :func:`neuron_device_standin.install` (the ``neuron`` device). It
registers a backend named ``"neuron"`` (``init_process_group(backend="neuron")``, as the
TorchNeuron distributed guide launches workers) whose collectives run on gloo on the stand-in
tensors' CPU data, and which refuses what the Neuron documentation says the hardware and its
collectives refuse. Its rules come from the documents, not from trnplan's code:

* **device**: collectives take ``neuron`` tensors (the guide's example puts its tensor on
  ``torch.device("neuron")``); a CPU tensor is refused, so nothing silently runs on the host.
* **dtypes**: no complex dtype on a NeuronCore (NCC_EVRF004), no FP64 in hardware, and INT64
  "becomes INT32" (data-types.rst): complex, float64 and int64 buffers are refused (the stand-in
  is stricter than a silent cast).
* **no send/recv**: point-to-point send, recv, isend, irecv are refused (runtimes.md §2: one
  device per process, no send/recv, replica groups aligned to 4/8/16/32 — a third-party note).
* **replica groups**: a group of more than one rank must have a power-of-two size (inf2 ran
  all_to_all in groups of 2/4/8, the DNS sample, runtimes.md §5) and be either a contiguous run of
  ranks aligned to its size ([0,1], [2,3], [0..3], …; "aligned to 4/8/16/32", runtimes.md §2), or
  a strided group of one stride inside one chip, taken as 4 consecutive logical cores (Trn2: 8
  NeuronCore-v3 per chip, LNC=2 → 4 logical cores, runtimes.md §2). Strided groups across chips
  are refused (trn1.32xlarge "refuses strided cross-chip groups", the DNS sample, runtimes.md §5).
  Whether a NeuronCore accepts a strided group inside a chip is not documented; the stand-in
  accepts it (the pencil's grid columns at 4 ranks are such groups).
* **distinct buffers**: a collective whose send and receive buffers share memory is refused
  (the DNS sample's rule: give each collective its own send and receive buffers).

Every collective that passes is recorded in :data:`CALLS` (op, dtype, elements, global members).
What it does not model: collective latency or bandwidth, NEFF compilation, EFA, or whether
TorchNeuron's compiled graphs can hold these collectives.
"""

from __future__ import annotations

import itertools

import neuron_device_standin as devsi
import torch
import torch.distributed as dist

#: logical NeuronCores per chip on Trn2 with the default LNC=2 (runtimes.md §2, Multi-core)
CORES_PER_CHIP = 4
#: (op, dtype, elements, global ranks of the group) of every collective that ran
CALLS: list[tuple[str, str, int, tuple]] = []
_REFUSED_DTYPES = (torch.complex32, torch.complex64, torch.complex128, torch.float64, torch.int64)


class NeuronCollectiveRefused(RuntimeError):
    """What the stand-in raises where the Neuron collectives refuse (the message names the rule)."""


def group_reason(members: list[int]) -> str | None:
    """Why the hardware refuses a replica group of these global ranks, or None when it accepts it."""
    size = len(members)
    if size <= 1:
        return None
    if size & (size - 1):
        return f"replica group {members} has {size} ranks; Neuron collectives take groups of 2/4/8/16/32"
    start = members[0]
    if members == list(range(start, start + size)):
        if start % size:
            return f"replica group {members} is not a contiguous run aligned to its size ({size})"
        return None
    strides = {b - a for a, b in itertools.pairwise(members)}
    if len(strides) == 1 and len({m // CORES_PER_CHIP for m in members}) == 1:
        return None  # a strided group (a mesh column) inside one chip
    return (f"replica group {members} is strided across chips ({CORES_PER_CHIP} logical cores each): "
            f"strided cross-chip groups are refused")


def _check_tensors(op: str, tensors) -> None:
    for t in tensors:
        if not isinstance(t, devsi.NeuronTensor):
            raise NeuronCollectiveRefused(f"[stand-in neuron backend] {op}: a {t.device} tensor was given; the neuron "
                                          f"backend's collectives take neuron tensors")
        if t.dtype in _REFUSED_DTYPES:
            raise NeuronCollectiveRefused(f"[stand-in neuron backend] {op}: dtype {t.dtype} is not supported on a "
                                          f"NeuronCore (no complex, no FP64; INT64 becomes INT32)")


def _elem(t):
    return t.elem if isinstance(t, devsi.NeuronTensor) else t


class NeuronProcessGroupStandIn(dist.ProcessGroup):
    """The ``neuron`` backend's process group: the rules above, then gloo on the CPU data."""

    def __init__(self, opts):
        super().__init__(opts.group_rank, opts.group_size)
        world = dist.get_world_size() if dist.is_initialized() else opts.group_size
        self.members = list(opts.global_ranks_in_group) or list(range(world))
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("standin-gloo", opts.store), opts.group_rank,
                                           opts.group_size, opts.timeout)

    def getBackendName(self):
        return "neuron"

    def _admit(self, op: str, tensors, dtype, numel: int) -> None:
        reason = group_reason(self.members)
        if reason is not None:
            raise NeuronCollectiveRefused(f"[stand-in neuron backend] {op}: {reason}")
        _check_tensors(op, tensors)
        CALLS.append((op, str(dtype), numel, tuple(self.members)))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        self._admit("all_to_all_single", (output, input), input.dtype, input.numel())
        if _elem(output).untyped_storage().data_ptr() == _elem(input).untyped_storage().data_ptr():
            raise NeuronCollectiveRefused("[stand-in neuron backend] all_to_all_single: the send and receive buffers "
                                          "share memory; give each collective its own buffers")
        return self._gloo.alltoall_base(_elem(output), _elem(input), output_split_sizes, input_split_sizes)

    def allgather(self, output_tensors, input_tensors, opts=None):
        flat = [t for group in output_tensors for t in group] + list(input_tensors)
        self._admit("all_gather", flat, input_tensors[0].dtype, input_tensors[0].numel())
        return self._gloo.allgather([[_elem(t) for t in group] for group in output_tensors],
                                    [_elem(t) for t in input_tensors])

    def allreduce(self, tensors, opts=None):
        self._admit("all_reduce", tensors, tensors[0].dtype, tensors[0].numel())
        return self._gloo.allreduce([_elem(t) for t in tensors])

    def barrier(self, opts=None):
        reason = group_reason(self.members)
        if reason is not None:
            raise NeuronCollectiveRefused(f"[stand-in neuron backend] barrier: {reason}")
        return self._gloo.barrier()

    def _p2p(self, op):
        raise NeuronCollectiveRefused(f"[stand-in neuron backend] {op}: point-to-point send/recv is not supported by "
                                      f"the neuron backend; use a collective (all_to_all_single)")

    def send(self, tensors, dst, tag=0):
        self._p2p("send")

    def recv(self, tensors, src, tag=0):
        self._p2p("recv")

    def recv_anysource(self, tensors, tag=0):
        self._p2p("recv")


def _create(opts, backend_options):
    return NeuronProcessGroupStandIn(opts)


def install() -> None:
    """Register the stand-in ``neuron`` backend for the ``neuron`` device (call after the device stand-in)."""
    dist.Backend.register_backend("neuron", _create, extended_api=True, devices=["neuron"])
    if isinstance(devsi.NeuronTensor(torch.zeros(1)).cpu(), devsi.NeuronTensor):
        _host_copies()


def _host_copies() -> None:
    """``.cpu()`` of a stand-in tensor as a host tensor (as on a NeuronCore; the device stand-in
    wrapped every result back onto ``neuron``, copies to the host included)."""
    device_run = devsi._run

    def run(func, args, kwargs):
        if func is torch.ops.aten._to_copy.default and torch.device(kwargs.get("device") or "neuron").type == "cpu":
            devsi.OPS.append(("aten::_to_copy", (), devsi._IN_GRAPH[0]))
            return func(*(a.elem if isinstance(a, devsi.NeuronTensor) else a for a in args), **kwargs)
        return device_run(func, args, kwargs)

    devsi._run = run
