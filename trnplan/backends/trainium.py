"""Cost profiles of the Trainium NeuronCores, from the published hardware figures.

A plan on a NeuronCore runs as one compiled graph (a NEFF): one launch per graph, not one per op
(../shared/neuron/runtimes.md §6 rule 4). These profiles price that: ``graph_us`` once per plan,
``launch_us`` per op *inside* the graph, GEMMs at the Tensor Engine's rate for the tiles they
fill (:class:`~trnplan.core.cost.TensorEngine`), every byte the graph moves at the core's DMA
bandwidth, and transposes as the Tensor Engine's transpose work. The rates are per NeuronCore:
one plan runs on one core.

Engine time and DMA time overlap (``CostProfile.overlaps``): each node of a plan (one stage: a
pass of GEMMs over one axis, a copy, a twiddle multiply) costs its fixed costs plus the larger of
its compute-engine time and its DMA time, not their sum. [OVERLAP]: a NeuronCore's DMA engines
"can operate in parallel to compute"; its compute engines run independent instruction streams
"asynchronously in parallel", synchronised by semaphores; a kernel tuned as the NKI performance
guide says ends "strictly compute-bound or memory-bound", its DMA overlapped with compute; the
spectral DNS sample issues its loads before compute for exactly this (3.18 against 11.94 µs per
tile when a rolled loop serialises them). Per node, not per graph: a pass over the next axis
reads what the last pass wrote, so only the tiles inside one stage are known to pipeline (a
per-graph max would predict less, and nothing has measured which neuronx-cc achieves). The
pipeline's fill, the first tile's load and the last one's store, is the per-op DMA latency
(``OP_US``), added like the graph launch.

fp32 GEMMs are priced at the fp32 rate. The bf16 precision modes run as fp32 GEMMs on these
devices (trnplan emits a bf16 dot with fp32 accumulation only on CUDA: ``kernels.gemm.
native_bf16_matmul``), so the profiles carry no bf16 rate and ``gemm_work`` prices those GEMMs at
the fp32 rate too; ``*_BF16_TFLOPS`` record the published rate for when a bf16 dot is emitted.

Sources (each figure below names its own):

* [ARCH2] aws-neuron/aws-neuron-sdk@81ce03ae nki/guides/architecture/trainium_inferentia2_arch.rst:
  NeuronCore-v2 Tensor Engine 92 TFLOPS BF16/FP16/TF32/cFP8, 23 TFLOPS FP32; 128×128 PE array;
  MM initiation interval max(N, 64) cycles; FP32 "roughly 4x" the cost of BF16.
* [ARCH3] the same repository, nki/guides/architecture/trainium2_arch.rst: NeuronCore-v3 Tensor
  Engine 79 BF16 and 20 FP32 dense TFLOPS; transpose mode, "2x speedup in FP32 transpose".
* [CHIP] docs: Trainium (trn1) and Inferentia2 chips, two NeuronCore-v2 each, 190 BF16 / 47.5
  FP32 TFLOPS and 820 GiB/s of HBM per chip; Trainium2, eight NeuronCore-v3, 667 BF16 / 181 FP32
  TFLOPS and 2.9 TB/s per chip (about-neuron/arch/neuron-hardware/trainium.rst,
  inferentia2.rst, trainium2.rst).
* [DMA] the same repository, nki/deep-dives/nki-dma-bandwidth-guide.rst: 16 DMA engines per
  NeuronCore, aggregate 272 GB/s (TRN1) and 368 GB/s (TRN2); every transfer pays descriptor
  setup and ~1300 ns semaphore-to-start latency.
* [DNS] aws-samples/sample-spectral-dns-on-aws-neuron docs/results.md §4: its fp32 NKI DFT
  kernels run at about 40 % of fp32 matmul peak on one NeuronCore-v2.
* [TE-T] transposes on the Tensor Engine: nki.isa.nc_transpose ("PF-transpose on Tensor Engine is
  done by performing a matrix multiplication between data as the stationary tensor and an
  identity matrix as the moving tensor"), and aws-neuron-sdk#1336 (Inf2: a dot_general whose
  operand layout needs it lowers to "large TensorE transpose FLOPs"). aws-neuron-sdk#632, which the
  issue names, is not in the stored corpus and was not read. Whether neuronx-cc transposes a given
  copy on the Tensor Engine, by DMA (Trainium2) or on the Vector Engine is unmeasured.
* [OVERLAP] the same repository: nki/get-started/about/nki-dma-overview.rst ("DMA Engines can
  operate in parallel to compute, allowing asynchronous data movement independent from compute
  operations"); nki/guides/architecture/trainium_inferentia2_arch.rst ("The four compute engines
  execute four independent instruction streams asynchronously in parallel"; the Sync Engine
  triggers DMA "without interfering with compute engine instruction scheduling");
  nki/deep-dives/nki_perf_guide.rst (a tuned kernel is "strictly compute-bound or memory-bound";
  Opt #4 "Overlap data loading with computation": "DMA engines can move data in parallel to
  compute engine execution"); the DNS sample's rule 7 (../shared/neuron/runtimes.md §5).
* [SEED] ../shared/FACTS.md: the seed project (trnfft) measured ~0.67 ms per XLA dispatch on
  trn1 — one graph execution from PyTorch, whatever the graph holds.

Nothing here is measured by trnplan: docs/trainium.md ("Predicted against published figures")
sets the predictions these profiles give beside the published run times, as predictions.
"""

from __future__ import annotations

from trnplan.core.cost import CostProfile, TensorEngine

#: [DNS]: the fraction of the Tensor Engine's fp32 peak an fp32 DFT kernel reached on a
#: NeuronCore-v2 (tiles full, DMA and PSUM eviction included); assumed for compiled graphs too
GEMM_FRACTION = 0.4
#: [ARCH2] per NeuronCore-v2 (half of [CHIP]'s 47.5 / 190 per chip)
TRN1_FP32_TFLOPS, TRN1_BF16_TFLOPS = 23.0, 92.0
#: [ARCH3] per physical NeuronCore-v3 (dense)
TRN2_FP32_TFLOPS, TRN2_BF16_TFLOPS = 20.0, 79.0
#: [DMA] aggregate DMA bandwidth of one NeuronCore, GB/s (below [CHIP]'s HBM share: 820 GiB/s
#: over two cores is 440 GB/s each; 2.9 TB/s over eight is 363 GB/s)
TRN1_DMA_GBS, TRN2_DMA_GBS = 272.0, 368.0
#: Trainium2 pairs two physical cores into one logical NeuronCore by default (LNC=2), which is
#: what a TorchNeuron process sees as one device (runtimes.md §2, Multi-core)
TRN2_LNC = 2
#: [DMA]: one op inside a graph moves its data with at least one DMA transfer in and one out,
#: each ~1.3 µs of fixed latency before its first byte (unmeasured for trnplan's graphs)
OP_US = 2 * 1.3
#: [SEED]: the fixed cost of one graph execution from PyTorch on trn1; assumed the same on trn2
#: (no published figure for TorchNeuron)
GRAPH_US = 670.0


def _profile(name: str, fp32_tflops: float, dma_gbs: float, engine: TensorEngine, source: str) -> CostProfile:
    fp32 = GEMM_FRACTION * fp32_tflops * 1e3  # GFLOP/s
    return CostProfile(
        name=name,
        launch_us=OP_US,
        graph_us=GRAPH_US,
        fuses_elementwise=True,  # compiled whole: elementwise chains fuse (XLA, neuronx-cc)
        # "float64" only for meta plans of fp64 problems (a NeuronCore has no FP64: such a plan is
        # refused on a device); a placeholder at a quarter of the fp32 rate
        gemm_gflops={"float32": fp32, "float64": fp32 / 4},
        fft_gflops={},
        bandwidth_gbs=dma_gbs,
        # a transposed byte moves at the DMA rate like any other; the Tensor Engine's transpose work
        # is priced on top (TensorEngine.transpose_us_per_byte). Whether neuronx-cc transposes on
        # the Tensor Engine, by DMA (Trainium2) or on the Vector Engine (32×32 blocks) is its choice:
        # the crossover is unmeasured.
        transpose_penalty=(1.0, 1.0),
        engine=engine,
        overlaps=True,  # [OVERLAP]: DMA engines run in parallel to the compute engines
        source=source,
    )


#: NeuronCore-v2: one core of a trn1 (Trainium) or inf2 (Inferentia2) chip
TRN1_PROFILE = _profile(
    "trn1", TRN1_FP32_TFLOPS, TRN1_DMA_GBS, TensorEngine(small_tile=64, transpose_speedup=1.0),
    "published NeuronCore-v2 figures (NKI architecture guide, DMA bandwidth guide), 40 % of fp32 peak as the "
    "spectral DNS sample measured, 0.67 ms per graph as the seed project measured; not measured by trnplan",
)
#: NeuronCore-v3: one logical core (LNC=2, two physical cores) of a trn2 (Trainium2) chip
TRN2_PROFILE = _profile(
    "trn2", TRN2_LNC * TRN2_FP32_TFLOPS, TRN2_LNC * TRN2_DMA_GBS, TensorEngine(small_tile=32, transpose_speedup=2.0),
    "published NeuronCore-v3 figures per logical core (LNC=2), the trn1 profile's 40 % and 0.67 ms per graph "
    "assumed; not measured by trnplan",
)

PROFILES = {"trn1": TRN1_PROFILE, "trn1n": TRN1_PROFILE, "inf2": TRN1_PROFILE, "trn2": TRN2_PROFILE,
            "trn3": TRN2_PROFILE}


def profile_for(target: str | None, default: str = "trn1") -> CostProfile:
    """The profile of an instance family (``trn1``, ``trn1n``, ``inf2``: NeuronCore-v2; ``trn2``,
    and ``trn3`` until it has its own: NeuronCore-v3), else ``default``'s."""
    return PROFILES.get(target or default, PROFILES[default])


__all__ = ["GEMM_FRACTION", "GRAPH_US", "OP_US", "PROFILES", "TRN1_PROFILE", "TRN2_PROFILE", "profile_for"]
