"""The cost model: predicted time of a node from its work, on a backend's profile.

Every solver describes the work of its *own* node (children excluded) as a :class:`Work`:

* ``launches`` — torch ops dispatched. In eager torch each op costs a fixed latency whatever
  its size (a few µs on the CPU here; ~0.7 ms per dispatch on Trainium), which is what makes
  small transforms dispatch-bound (../shared/FACTS.md: torch.fft 5.6 µs at N=256, pyFFTW 0.6 µs).
* ``gemm_flops`` — real multiply-adds ×2 done in matmuls, priced at the profile's GEMM rate for
  the compute dtype (the matrix engine's rate).
* ``fft_calls`` and ``fft_flops`` — calls into the native library (each with its own fixed
  setup cost) and the nominal 5·n·log2(n) flops of a native library FFT, priced at the native
  library's sustained rate.
* ``bytes`` — memory traffic of elementwise ops, copies and matmul operands, priced at the
  profile's effective bandwidth.

* ``transposed`` and ``strided`` — the part of ``bytes`` moved by transposing copies (runs of
  fewer than ``SHORT_RUN`` contiguous elements, and longer runs): priced at the profile's
  ``transpose_penalty`` over a contiguous byte, and on a matrix engine that transposes (a
  NeuronCore's Tensor Engine) also as its transpose work.
* ``unfused`` — the traffic an elementwise chain adds when its ops run one by one (eager torch
  writes and re-reads every intermediate); a compiled graph fuses the chain and moves only its
  inputs and outputs (``bytes``). Priced only on profiles that do not fuse.
* ``graphs`` — compiled graphs launched (one per plan where the device runs a plan compiled
  whole, priced at the profile's ``graph_us``; zero elsewhere).

``bytes`` is the traffic the graph really moves (trnplan.plan.traffic counts it on the lowered
graph); what a transposing byte costs beyond a contiguous one is the profile's price, not more
bytes. A node's own time is its fixed costs, ``graphs·graph + launches·launch +
calls·fft_launch``, plus its engine time, ``gemm/rate + fft/rate`` and the matrix engine's
transpose work, plus its data-movement time, ``bytes/bandwidth`` and a transposing byte's excess:
a plain sum where the two run one after the other (eager torch on the CPU or a GPU: the terms
rarely overlap, and a sum is easy to read off ``explain()``). On a profile that ``overlaps`` (a
NeuronCore, whose DMA engines move the next tiles while its compute engines work on the current
ones) the engine and data-movement times of one node run concurrently: the node costs its fixed
costs plus the larger of the two. The smaller is recorded as the node's ``overlap`` term, in µs,
priced at −1 µs, so a tree's time is still the sum of its terms' prices
(:meth:`CostProfile.terms_time_us`). A node's prediction is its own time plus its children's
(:meth:`CostProfile.priced`). The constants of each backend's profile live in ``trnplan/backends/``
with the measurement they came from.
"""

from __future__ import annotations

import collections
import math

import attrs

#: bump when the model prices the same work differently (part of the registry digest, so stored
#: wisdom planned under the old prices is planned again). 2: true traffic in ``bytes``, transposes
#: and unfused elementwise traffic priced by the profile, one launch per compiled graph, tile rules;
#: 3: the CPU profile's GEMM rates re-measured (3× faster: trnplan.backends.cpu); 4: a NeuronCore's
#: engine and DMA time of a node overlap (``CostProfile.overlaps``: their larger, not their sum);
#: 5: on the accelerators a root that cannot fold the norm scale pays its pass (solver.scale_pass)
COST_MODEL_VERSION = 5


#: the terms of a :class:`Work`, in the order of its tuple (and of the positional arguments)
WORK_TERMS = ("launches", "fft_calls", "gemm_flops", "fft_flops", "elementwise_flops", "bytes", "transposed",
              "strided", "graphs", "unfused")


class Work(collections.namedtuple("Work", WORK_TERMS, defaults=(0.0,) * len(WORK_TERMS))):
    """The own work of one node (children excluded).

    An immutable value of ten named terms: ``launches`` (torch ops dispatched), ``fft_calls`` (native
    library calls), ``gemm_flops``, ``fft_flops``, ``elementwise_flops``, ``bytes`` (memory traffic),
    ``transposed`` and ``strided`` (of ``bytes``: moved by transposing copies with short and long runs),
    ``graphs`` (compiled graphs launched) and ``unfused`` (beyond ``bytes``: what elementwise chains move
    when run op by op); see the module's docstring. Made with keywords (``Work(launches=2, bytes=4096)``;
    omitted terms are 0) and combined with ``+`` and ``* k``.

    A named tuple, not an attrs class: the planner makes ~600 of them per search (each stage's work,
    every sum), and a frozen attrs class sets each of its ten fields through ``object.__setattr__``:
    1.5 µs a Work against 0.5 µs here, a tenth of a search's time."""

    __slots__ = ()

    def __add__(self, other: Work) -> Work:
        if type(other) is not Work:
            return NotImplemented
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9 = self
        b0, b1, b2, b3, b4, b5, b6, b7, b8, b9 = other
        return tuple.__new__(Work, (a0 + b0, a1 + b1, a2 + b2, a3 + b3, a4 + b4, a5 + b5, a6 + b6, a7 + b7, a8 + b8,
                                    a9 + b9))

    def __mul__(self, k: float) -> Work:
        if isinstance(k, tuple):
            return NotImplemented
        return tuple.__new__(Work, tuple([v * k for v in self]))

    __rmul__ = __mul__

    def __eq__(self, other) -> bool:  # a Work equals a Work, not a tuple of the same numbers
        return type(other) is Work and tuple.__eq__(self, other)

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    @property
    def flops(self) -> float:
        return self[2] + self[3] + self[4]


@attrs.frozen
class TensorEngine:
    """The tile rules of a systolic matrix engine: a NeuronCore's Tensor Engine.

    A matmul instruction contracts over the partition axis (≤ ``partitions`` rows of the PE
    array), holds a *stationary* operand of free size ≤ ``stationary`` (the PE columns) and
    streams a *moving* operand of free size ≤ ``moving`` (one PSUM bank of fp32); it costs about
    ``max(moving free size, min_moving)`` cycles whatever the other two sizes, so a tile that
    fills fewer PE rows or columns wastes the rest. Row and column tiling run independent
    matmuls of ≤ ``small_tile`` rows or columns side by side, so small tiles waste at most down
    to that granularity. A transpose is a matmul of the data (stationary) with an identity
    (moving): ``2·partitions`` flops per element at the matrix rate, ``transpose_speedup`` times
    faster where the engine has a transpose mode.

    Sources: the NKI architecture guides (aws-neuron/aws-neuron-sdk@81ce03ae,
    nki/guides/architecture/trainium_inferentia2_arch.rst: 128×128 PE array, stationary free
    ≤ 128, moving free ≤ 512, MM initiation interval ``max(N, 64)`` cycles on NeuronCore-v2,
    fp32 4× the cost of bf16, transposes as a matmul with an identity; trainium2_arch.rst:
    NeuronCore-v3's transpose mode, 2× faster fp32 transposes) and nki.isa.nc_matmul's tiling
    modes (2×64 row/column tiles on NeuronCore-v2, 4×32 on v3).
    """

    partitions: int = 128
    stationary: int = 128
    moving: int = 512
    min_moving: int = 64
    small_tile: int = 64
    transpose_speedup: float = 1.0

    def transpose_us_per_byte(self, profile: CostProfile) -> float:
        """µs per byte of transposed traffic (read + write of fp32 elements: 8 bytes each) of the
        engine's transpose work, at the profile's fp32 matrix rate (no FP64 on the device)."""
        flops_per_byte = 2 * self.partitions / 8 / self.transpose_speedup
        return flops_per_byte / (profile.gemm_gflops["float32"] * 1e3)


def tile_efficiency(engine: TensorEngine, m: float, k: float, n: float) -> float:
    """The fraction of the engine's rate a GEMM ``(m × k) @ (k × n)`` gets from its tiles.

    The contraction ``k`` fills the partitions; of ``m`` and ``n`` the better assignment goes
    stationary (filling PE columns) and moving (each instruction at least ``min_moving`` cycles).
    """
    def fill(size: float, tile: int) -> float:
        size = max(1.0, size)
        step = engine.small_tile if size < tile else tile
        return size / (step * math.ceil(size / step))

    def stream(size: float) -> float:
        full, rest = divmod(max(1.0, size), engine.moving)
        return size / (full * engine.moving + (max(rest, engine.min_moving) if rest else 0.0))

    best = max(fill(a, engine.stationary) * stream(b) for a, b in ((m, n), (n, m)))
    return fill(k, engine.partitions) * best


@attrs.frozen
class CostProfile:
    """Throughput and latency constants of one device kind (see the backend modules).

    Attributes
    ----------
    name : str
    launch_us : float
        Fixed cost of one dispatched op, µs.
    gemm_gflops : dict
        Sustained matmul rate by real compute dtype name (``"float32"``, ``"float64"``), GFLOP/s.
    fft_gflops : dict
        Sustained nominal (5·n·log2 n) rate of the native FFT library by dtype, GFLOP/s;
        empty where the backend has no native FFT (Neuron).
    fft_launch_us : float
        Fixed cost of one native FFT call (plan lookup, descriptor setup), µs.
    threads : int
        Cores the throughput constants were measured with (the CPU profile: torch's 2 intra-op
        threads); a shard of the multicore solver runs on one of them.
    bandwidth_gbs : float
        Effective bandwidth of elementwise ops and copies, GB/s.
    source : str
        Where the numbers came from.
    native_bf16 : bool
        The device multiplies real bfloat16 tensors into fp32 (CUDA's ``torch.mm(..., out_dtype=)``):
        the bf16 modes' data slices are half-width tensors (:func:`gemm_work`).
    fuses_elementwise : bool
        Plans run compiled whole, elementwise chains fused: ``unfused`` traffic costs nothing.
    graph_us : float
        Fixed cost of launching one compiled graph, µs: where a plan runs compiled whole (the
        accelerators) ``launch_us`` is then the cost of one op *inside* the graph.
    transpose_penalty : tuple of float
        What a byte moved by a transposing copy costs, in contiguous bytes: (short runs, long
        runs). On the CPU a transposing copy is far slower than a contiguous one (see
        ``TRANSPOSE_PENALTY``); on a matrix engine it is priced as its transpose work instead.
    engine : TensorEngine or None
        The matrix engine's tile rules (a NeuronCore's Tensor Engine): GEMMs are priced at the
        rate the tiles they occupy give (:func:`tile_efficiency`), transposes as its work.
    overlaps : bool
        The device's data movement runs concurrently with its compute engines (a NeuronCore's DMA
        engines, double-buffered tiles in a compiled graph): a node's own time is its fixed costs
        plus the larger of its engine time and its data-movement time (:meth:`time_us`), not
        their sum.
    """

    name: str
    launch_us: float
    gemm_gflops: dict
    fft_gflops: dict
    bandwidth_gbs: float
    fft_launch_us: float = 0.0
    source: str = ""
    threads: int = 1
    native_bf16: bool = False
    #: fitted costs of the host FFT leaves by solver name (:class:`LeafCost`, from
    #: ``bench/calibrate.py --fit``); a leaf not in it is priced from the constants above
    leaves: dict = attrs.Factory(dict)
    #: the model's own log-error, rms of log(predicted / measured): the estimate's margin rule
    #: (trnplan.planner.planner) keeps the device's own FFT unless another candidate is predicted
    #: faster by more than exp(2·sigma) (Planner.MARGIN_SIGMAS); ``sigma_fitted`` covers trees of fitted leaves only
    sigma: float = 0.0
    sigma_fitted: float | None = None
    sigma_source: str = ""
    graph_us: float = 0.0
    fuses_elementwise: bool = False
    transpose_penalty: tuple = (None, None)  # (None, None): TRANSPOSE_PENALTY and LONG_RUN_PENALTY
    engine: TensorEngine | None = None
    overlaps: bool = False

    def time_us(self, work: Work, dtype: str) -> float:
        """The predicted time of one node's own ``work``, µs: fixed costs, plus engine time and
        data-movement time, the two overlapped where the profile ``overlaps``."""
        engine, moved = self.engine_us(work, dtype), self.dma_us(work)
        return self.fixed_us(work) + engine + moved - (min(engine, moved) if self.overlaps else 0.0)

    def fixed_us(self, work: Work) -> float:
        """The fixed costs of ``work``: graph launches, dispatched ops, library calls, µs."""
        return work.launches * self.launch_us + work.graphs * self.graph_us + work.fft_calls * self.fft_launch_us

    def engine_us(self, work: Work, dtype: str) -> float:
        """The compute engines' time of ``work``, µs: GEMM and library flops at their rates and
        the matrix engine's transpose work."""
        t = work.gemm_flops / (self.gemm_gflops[dtype] * 1e3) if work.gemm_flops else 0.0
        if work.fft_flops:
            t += work.fft_flops / (self.fft_gflops[dtype] * 1e3)
        if self.engine is not None and (work.transposed or work.strided):
            t += (work.transposed + work.strided) * self.engine.transpose_us_per_byte(self)
        return t

    def dma_us(self, work: Work) -> float:
        """The data-movement time of ``work``, µs: its bytes (and, where elementwise chains run
        op by op, their ``unfused`` traffic) at the profile's bandwidth, and what a transposing
        byte costs beyond a contiguous one (``transpose_penalty``)."""
        short, long = self.penalties()
        moved = work.bytes + work.unfused * (not self.fuses_elementwise)
        return (moved + work.transposed * (short - 1.0) + work.strided * (long - 1.0)) / (self.bandwidth_gbs * 1e3)

    def overlap_us(self, work: Work, dtype: str) -> float:
        """The time ``work``'s engine and data movement share where the profile ``overlaps``
        (the smaller of the two, µs; zero elsewhere): what :meth:`time_us` takes off their sum."""
        return min(self.engine_us(work, dtype), self.dma_us(work)) if self.overlaps else 0.0

    def priced(self, work: Work, dtype: str, children=(), folded=()) -> dict:
        """The cost fields of a plan node (:class:`~trnplan.core.node.PlanNode`): its own ``work``
        priced on this profile in ``dtype``, plus its ``children``'s totals (flops, bytes, launches,
        time_us and the cost-model terms). One call per node: the planner prices every candidate.

        ``folded`` holds ``(i, extra)`` pairs: work the node adds to (or, negative, takes off) the
        stage of its leaf child ``children[i]`` — the row-column lowering runs a GEMM pass on its
        buffer where it lies, without the copy the leaf prices (trnplan.planner.nd.rowcol_work).
        Such work is priced inside that child's stage: on a profile that ``overlaps`` the stage's
        engine and data movement overlap with the extra included, so a copy the lowering does not
        make comes off the stage's data movement, not off a separate stage of its own.
        """
        flops = moved = launches = time_us = 0  # the children's sums first, as sum() adds them
        for c in children:
            flops, moved, launches, time_us = flops + c.flops, moved + c.bytes, launches + c.launches, time_us + c.time_us
        own = work_terms(work, dtype)
        # time_us and overlap_us, their engine and data-movement times computed once
        engine, dma = self.engine_us(work, dtype), self.dma_us(work)
        overlap = min(engine, dma) if self.overlaps else 0.0
        if overlap:
            own["overlap"] = overlap
        t = self.fixed_us(work) + engine + dma - (min(engine, dma) if self.overlaps else 0.0)
        for i, extra in folded:
            child = children[i]
            if child.children:
                raise ValueError(f"work folded into {child.solver}'s stage: only a leaf is one stage")
            stage = add_terms(child.terms, work_terms(extra, dtype))
            merged = self.stage_overlap_us(stage)
            # the stage's time with the extra, less the child's own: the extra's price, less what
            # the overlap then hides beyond what it hid in the child alone
            own = add_terms(own, work_terms(extra, dtype), {"overlap": merged - dict(child.terms).get("overlap", 0.0)})
            t += self.terms_time_us(work_terms(extra, dtype)) - merged + dict(child.terms).get("overlap", 0.0)
            flops, moved, launches = flops + extra.flops, moved + extra.bytes, launches + extra.launches
        return {"flops": work.flops + flops, "bytes": work.bytes + moved, "launches": work.launches + launches,
                "time_us": t + time_us, "terms": add_terms(own, *(c.terms for c in children))}

    def stage_overlap_us(self, terms) -> float:
        """:meth:`overlap_us` of one stage's work given as cost-model terms (a leaf's
        :attr:`~trnplan.core.node.PlanNode.terms`; any ``overlap`` entry in them is ignored)."""
        if not self.overlaps:
            return 0.0
        parts = self.parts(terms)
        return min(parts["engine"], parts["dma"])

    def parts(self, terms) -> dict:
        """A node's :attr:`~trnplan.core.node.PlanNode.terms` priced by kind, µs: ``fixed``
        (graphs, ops, library calls), ``engine`` (the compute engines), ``dma`` (data movement)
        and ``overlap`` (what the overlap of the two hid, summed over the tree's stages): the
        predicted time is ``fixed + engine + dma − overlap`` (explain() prints them)."""
        out = dict.fromkeys(("fixed", "engine", "dma", "overlap"), 0.0)
        per_byte = self.engine.transpose_us_per_byte(self) if self.engine is not None else 0.0
        for name, value in (terms.items() if isinstance(terms, dict) else terms):
            if not value:
                continue
            if name == "overlap":
                out["overlap"] += value
            elif name in ("launches", "graphs", "fft_calls"):
                out["fixed"] += value * self.price(name)
            elif name in ("transposed", "strided"):  # the engine's transpose work, the penalty's excess moved
                out["engine"] += value * per_byte
                out["dma"] += value * (self.price(name) - per_byte)
            elif name in ("bytes", "unfused"):
                out["dma"] += value * self.price(name)
            else:  # gemm:<dtype>, fft:<dtype>
                out["engine"] += value * self.price(name)
        return out

    def penalties(self) -> tuple[float, float]:
        """(short-run, long-run) cost of a transposed byte in contiguous bytes."""
        short, long = self.transpose_penalty
        return (TRANSPOSE_PENALTY if short is None else short, LONG_RUN_PENALTY if long is None else long)

    def terms_time_us(self, terms) -> float:
        """The predicted time of a node's :attr:`~trnplan.core.node.PlanNode.terms`."""
        t = 0.0
        for name, value in (terms.items() if isinstance(terms, dict) else terms):
            if value:
                t += value * self.price(name)
        return t

    def price(self, term: str) -> float:
        """µs per unit of one work term (``launches``, ``fft_calls``, ``gemm:float32`` …)."""
        if term == "launches":
            return self.launch_us
        if term == "graphs":
            return self.graph_us
        if term == "fft_calls":
            return self.fft_launch_us
        if term == "overlap":  # µs of engine time hidden under data movement (or the reverse)
            return -1.0
        if term == "bytes":
            return 1.0 / (self.bandwidth_gbs * 1e3)
        if term == "unfused":
            return 0.0 if self.fuses_elementwise else 1.0 / (self.bandwidth_gbs * 1e3)
        if term in ("transposed", "strided"):
            # beyond the byte itself (already in "bytes"): the penalty's excess, plus the engine's
            # transpose work where the matrix engine transposes
            extra = self.penalties()[term == "strided"] - 1.0
            engine = self.engine.transpose_us_per_byte(self) if self.engine is not None else 0.0
            return extra / (self.bandwidth_gbs * 1e3) + engine
        kind, _, dtype = term.partition(":")
        rates = {"gemm": self.gemm_gflops, "fft": self.fft_gflops}.get(kind)
        if rates is None or dtype not in rates:
            raise KeyError(f"cost profile {self.name!r} has no price for the work term {term!r}")
        return 1.0 / (rates[dtype] * 1e3)


@attrs.frozen
class LeafCost:
    """The fitted cost of one FFT library leaf at one thread count (trnplan.planner.leafcost).

    ``t = call_us + F / (gflops[regime] · 10³ · gain(b))`` µs for a batch of ``b`` transforms of
    ``F`` nominal flops in all (5·n·log2 n each, halved for r2c/c2r, the large-prime part
    multiplied by the library's slowdown ``1 + (s − 1)·prime_scale``, r2c/c2r scaled by
    ``real_factor / 0.5``), with ``gain(b) = 1 + (batch_gain − 1)·(1 − 1/b)``: what a batch gains
    over one transform from threads and amortised setup; plus ``mem_us_per_mb`` per MB of data
    beyond the cache.

    Attributes
    ----------
    call_us : float
        Time of one call beyond its flops, glue included, µs.
    gflops : tuple of float
        Nominal complex64 rate of one transform per regime of the longest axis
        (trnplan.planner.leafcost.REGIMES), GFLOP/s.
    batch_gain : float
        Rate multiplier a large batch approaches.
    prime_scale : float
        Multiplier of the library's large-prime slowdown beyond 1.
    real_factor : float
        Flops of an r2c/c2r transform as a fraction of the c2c one's (nominally 0.5).
    mem_us_per_mb : float
        Time per MB of complex data beyond a core's cache (``leafcost.CACHE_BYTES``), µs.
    direct_scale : float
        Multiplier of the flops of a direct O(p²) pass per large prime factor p of a composite
        length (8·p² per p-point DFT): a library's generic-radix butterfly (torch.fft took
        8 × 16385 = 5·29·113 twice as long as 8 × 16411, a prime, here).
    """

    call_us: float
    gflops: tuple
    batch_gain: float = 1.0
    prime_scale: float = 1.0
    real_factor: float = 0.5
    mem_us_per_mb: float = 0.0
    direct_scale: float = 0.0


def work_terms(work: Work, dtype: str) -> dict:
    """A node's own work as cost-model terms (the non-zero ones), for :attr:`PlanNode.terms`."""
    launches, fft_calls, gemm, fft, _, moved, transposed, strided, graphs, unfused = work
    # in this order (graphs, launches, fft_calls, gemm, fft, bytes, transposed, strided, unfused):
    # terms_time_us sums a dict in its order
    named = (("graphs", graphs), ("launches", launches), ("fft_calls", fft_calls), ("gemm:" + dtype, gemm),
             ("fft:" + dtype, fft), ("bytes", moved), ("transposed", transposed), ("strided", strided),
             ("unfused", unfused))
    terms = {}
    for name, value in named:  # a loop, not a comprehension: no extra frame per node (tools/count_calls.py)
        if value:
            terms[name] = value
    return terms


def total(works) -> Work:
    """The sum of several Works, left to right (a solver's stages summed in one call)."""
    out = Work()
    for w in works:
        out = out + w
    return out


def add_terms(*terms) -> dict:
    """The sum of several term mappings (a node's own plus its children's)."""
    out: dict = {}
    for t in terms:
        for k, v in (t.items() if isinstance(t, dict) else t):
            out[k] = out.get(k, 0.0) + v
    return out


def elementwise(ops: int, elements: float, itemsize: int, operands: int = 3, arrays: int | None = None) -> Work:
    """``ops`` elementwise ops over ``elements`` values, each reading and writing ``operands`` arrays.

    Fused (a compiled graph) the chain reads its inputs and writes its outputs once: ``arrays``
    arrays in all (default: one op's ``operands``), its ``bytes``; run op by op (eager torch)
    every op moves its own operands, the rest ``unfused``."""
    fused = (operands if arrays is None else arrays) * elements * itemsize
    return Work(
        launches=ops,
        elementwise_flops=ops * elements,
        bytes=fused,
        unfused=max(0.0, ops * operands * elements * itemsize - fused),
    )


def copy(elements: float, itemsize: int, launches: int = 1) -> Work:
    """A copy (transpose, cat, pad) of ``elements`` values: one read, one write."""
    return Work(launches=launches, bytes=2 * elements * itemsize)


#: a transposing copy is far slower than a contiguous one in torch on the CPU here: 9.5× for a
#: 256×256 float32 matrix, 22× for 1024×1024, 7.6× for 64 × (1024×16) (bench/calibrate.py,
#: "transpose_vs_copy"); rows of ≥ 16 contiguous elements move at about half the contiguous rate
TRANSPOSE_PENALTY = 10.0
LONG_RUN_PENALTY = 2.0
SHORT_RUN = 16


def transpose(elements: float, itemsize: int, run: float = 1, launches: int = 1) -> Work:
    """A copy that permutes axes, reading contiguous runs of ``run`` elements: one read and one
    write of each element (``bytes``), marked as transposed traffic for the profile to price."""
    moved = 2 * elements * itemsize
    if run < SHORT_RUN:
        return Work(launches=launches, bytes=moved, transposed=moved)
    return Work(launches=launches, bytes=moved, strided=moved)


def cmul_work(elements: float, itemsize: int) -> Work:
    """A split-complex elementwise product: 4 multiplies and 2 adds on ``elements`` complex values
    (fused: the data's and the twiddles' re and im in, re and im out)."""
    return elementwise(6, elements, itemsize, arrays=6)


def format_si(value: float) -> str:
    """``value`` with an SI prefix and three significant digits (explain())."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def format_time(us: float) -> str:
    """A time in µs as explain() prints it: µs below a millisecond, ms above."""
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"


# ---------------------------------------------------------------- precision modes' GEMM price
# (the arithmetic itself is trnplan.kernels.gemm; these tables say what a mode costs)

#: the (data slice, constant slice) products each mode sums, 0-based slice indices; ordered
#: small terms first, so the fp32 accumulator adds the corrections before the leading product
PRODUCTS = {
    "fp32": ((0, 0),),
    "fp64": ((0, 0),),
    "tf32": ((0, 0),),
    "bf16": ((0, 0),),
    "bf16x3": ((1, 0), (0, 1), (0, 0)),
    "bf16x6": ((2, 0), (1, 1), (0, 2), (1, 0), (0, 1), (0, 0)),
}
#: how many bf16 slices each operand is split into (0: not split, the storage dtype is used)
SLICES = {"fp32": 0, "fp64": 0, "tf32": 0, "bf16": 1, "bf16x3": 2, "bf16x6": 3}
BF16_MODES = ("bf16", "bf16x3", "bf16x6")
#: the modes that change GEMM arithmetic only: solvers without a GEMM (native, butterfly) decline
REDUCED_GEMM_MODES = ("bf16", "bf16x3", "bf16x6", "tf32")
GEMM_MODES = tuple(PRODUCTS)


def products(mode: str) -> int:
    """Number of GEMM products a mode costs (1 for the plain modes)."""
    return len(PRODUCTS[mode])


def gemm_work(precision: str, profile, flops: float, data_elements: float, itemsize: int, shape=None):
    """The cost-model :class:`~trnplan.core.cost.Work` of one constant-operand GEMM in a mode.

    ``flops`` is the plain GEMM's count. A mode with P products multiplies it by P, priced at the
    profile's bf16 (or TF32) matrix rate where it has one (CUDA, Neuron) and at the fp32 rate
    where the mode is emulated with fp32 GEMMs (the CPU: ``gemm_flops`` is then counted at the
    fp32 rate). Splitting the data costs per slice a cast down, a cast back and (but the last) a
    subtraction over ``data_elements`` values, plus the concatenation of the P operand copies;
    on a profile with ``native_bf16`` (CUDA) no cast back, and the copies are half-width.

    ``shape`` is one GEMM's ``(m, k, n)`` (rows of data, contraction, output columns): on a
    profile with a matrix ``engine`` the flops are priced at the rate its tiles give
    (:func:`tile_efficiency`); ``gemm_flops`` then counts the engine's work, not the useful flops.
    """
    rate = "bfloat16" if precision in BF16_MODES else "tf32" if precision == "tf32" else None
    scale = profile.gemm_gflops["float32"] / profile.gemm_gflops[rate] if rate in profile.gemm_gflops else 1.0
    p = products(precision)
    slices = SLICES[precision]
    # where the device multiplies real bf16 tensors the slices are half-width and each costs one
    # cast (and a residual subtraction) instead of cast, cast back and subtract (split_bf16)
    native = slices and profile.native_bf16
    operand = itemsize // 2 if native else itemsize
    if shape is not None and profile.engine is not None:
        scale /= tile_efficiency(profile.engine, *shape)
    work = Work(gemm_flops=flops * p * scale, bytes=(p - 1) * data_elements * operand)
    if slices:
        work += elementwise((2 if native else 3) * slices - 1, data_elements, itemsize, operands=2)
        if p > 1:
            work += copy(p * data_elements, operand)
    return work
