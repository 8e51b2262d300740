"""What a collective costs: the all-to-all model of trnplan's distributed plans, per interconnect.

An all-to-all in which every rank sends ``b`` bytes costs ``latency + b / bandwidth`` (the
alpha-beta model of Hockney, 1994). Each profile's two numbers name where they come from:
documented figures from the AWS spectral-DNS sample on trn1 (the only published Neuron collective
timings: ../shared/neuron/runtimes.md §5), or figures measured here on a busy 2-core machine
(noisy: trust the order of magnitude). The compute side of a distributed plan comes from its local
plans' own cost model (``PlanNode.time_us``), or, for a device no process here can plan for, from
a documented sustained matmul rate (:data:`DFT_RATES`).

References
----------
.. [1] R. W. Hockney, "The communication challenge for MPP: Intel Paragon and Meiko CS-2",
       Parallel Computing 20 (1994).
"""

from __future__ import annotations

import attrs

__all__ = ["DFT_RATES", "PROFILES", "CollectiveProfile", "profile_for"]


@attrs.frozen
class CollectiveProfile:
    """The alpha-beta cost of one all-to-all on an interconnect.

    Attributes
    ----------
    name : str
        The interconnect and scale the figures hold for.
    latency_us : float
        Cost of an all-to-all whatever its size, in microseconds.
    bandwidth_gbs : float
        Bytes each rank sends per second, in GB/s (1e9 bytes).
    source : str
        Where the two figures come from.
    """

    name: str
    latency_us: float
    bandwidth_gbs: float
    source: str

    def all_to_all_us(self, bytes_sent: float) -> float:
        """Predicted microseconds of one all-to-all in which each rank sends ``bytes_sent`` bytes."""
        return self.latency_us + bytes_sent / (self.bandwidth_gbs * 1e3)


PROFILES = {
    "trn1": CollectiveProfile(
        "trn1.32xlarge, 32 NeuronCores over NeuronLink", 2000.0, 26.6,
        "AWS spectral-DNS sample on trn1 (runtimes.md §5): one all-to-all across 16 chips ~2 ms regardless of "
        "size; 25.7-27.5 GB/s per rank at 32 ranks (midpoint)"),
    "gloo": CollectiveProfile(
        "gloo over TCP loopback, 2 ranks on one 2-vCPU host", 0.0, 0.13,
        "measured here (docs/distributed.md's table, busy machine): 4.2 MB per rank per fft2 1024^2 in "
        "about 33 ms of transposes, ~130 MB/s; no latency term resolved at that noise"),
    "xla-cpu": CollectiveProfile(
        "XLA:CPU, 4 virtual SPMD devices in one process", 246.0, 0.62,
        "measured here (bench/spmd_collectives.py: 6 kB-1.6 MB sent per device, least-squares fit over the "
        "fastest of 30 calls per size, 2-vCPU machine at load average ~6): 0.23 ms at 6 kB, 2.7 ms at 1.6 MB; "
        "the medians ran 0.29-6.4 ms"),
}

#: sustained rate of a dense DFT-as-matmul pass, in flop/s per rank, where no local plan can be
#: made here: trn1's kernel reached ~40% of fp32 matmul peak (DNS sample, runtimes.md §5), and a
#: trn1 chip is 47.5 fp32 TFLOP/s over 2 NeuronCores (FACTS.md): 0.4 · 23.75e12 per core
DFT_RATES = {"trn1": 0.4 * 47.5e12 / 2}


def profile_for(backend: str, device_type: str) -> CollectiveProfile | None:
    """The profile a distributed plan on this process-group backend and device is priced with.

    The neuron backend runs on Trn2/Trn3 (TorchNeuron), for which no collective timing is
    published: it is priced with trn1's documented figures, and explain() says so. NCCL has no
    profile yet (None: exchanges are listed without a time).
    """
    if backend == "neuron" or device_type == "neuron":
        return PROFILES["trn1"]
    if device_type == "xla":
        return PROFILES["xla-cpu"]
    if backend == "gloo":
        return PROFILES["gloo"]
    return None
