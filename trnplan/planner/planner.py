"""The planner: FFTW's search over an ordered solver registry, with memoisation.

``Planner.search(problem)`` asks every registered solver for its best node, drops those that
do not apply or whose predicted error exceeds the accuracy bound, and keeps the cheapest by the
cost model. Composite solvers obtain their children *only* through ``Planner.plan``, so the
memo, the accuracy bound and the cost accounting apply at every level of the tree.

A strategy spec (:mod:`trnplan.core.spec`) restricts the search: its root names the solver,
its children constrain the children; anything left free is searched as usual.
"""

from __future__ import annotations

import functools
import math
import operator

import attrs
import torch

from trnplan.backends import get_backend
from trnplan.core import state
from trnplan.core.accuracy import DEFAULT_TOL
from trnplan.core.errors import OverBoundError, PlanningError
from trnplan.core.node import PlanNode
from trnplan.core.problem import check_fits
from trnplan.core.spec import Spec, parse_strategy
from trnplan.planner import registry
from trnplan.planner.solver import VARIANTS, BuildContext

CHOSEN = "chosen"
MORE_EXPENSIVE = "more expensive"
NOT_APPLICABLE = "not applicable"
OVER_BOUND = "over the accuracy bound"
WITHIN_MARGIN = "within the model's error"

#: the device's own FFT as trees, tried in order: the 1-D complex leaf, the 1-D real transform
#: through the library, the N-D transform through the library (torch.fft on the CPU, cuFFT on
#: CUDA). What a user of torch.fft would otherwise call; measured planning always times it and
#: only a candidate measured faster beyond the noise replaces it
DEFAULT_STRATEGIES = ("(native)", "(real method=lib)", "(nd method=lib)")
#: the same for a truncated transform (modes=): the library's whole transform, then the kept
#: frequencies cut out (c2r: zero-filled in first) — rfftn + slice + zero-fill + irfftn, what an FNO
#: layer written with torch.fft does (issue 30: the estimate is never slower than that call)
TRUNCATED_DEFAULTS = ("(truncated method=full (real method=lib))", "(truncated method=full (nd method=lib))")


#: a solver's name (C-level: the lowering's name -> solver map makes no Python call per solver)
_NAME = operator.attrgetter("name")


@functools.lru_cache(maxsize=64)
def _default_specs(names: tuple) -> tuple:
    """(:data:`DEFAULT_STRATEGIES`, :data:`TRUNCATED_DEFAULTS`) parsed for the solvers ``names``
    (those whose solvers are all there); once per registry, not per planner (one per plan_many)."""
    return tuple(tuple(parse_strategy(text, names) for text in texts
                       if all(node.split()[0] in names for node in text.replace(")", "").split("(")[1:]))
                 for texts in (DEFAULT_STRATEGIES, TRUNCATED_DEFAULTS))


state.register("planner.default_specs", _default_specs.cache_clear)


@attrs.frozen
class Candidate:
    """One solver's answer at one node of the search, kept for explain()."""

    solver: str
    verdict: str
    reason: str = ""
    node: PlanNode | None = None


class Planner:
    """Plans 1-D sub-problems on one backend; the :class:`~trnplan.planner.solver.PlanningContext`
    every solver plans in.

    Parameters
    ----------
    backend : Backend
        Supplies the cost profile and whether a native FFT exists.
    solvers : tuple of Solver, optional
        The solvers to search (default: the registry as it is now,
        :func:`trnplan.planner.registry.solvers`).
    tol : float, optional
        Relative L2 error bound every plan must be predicted to meet; default per precision
        from :data:`trnplan.core.accuracy.DEFAULT_TOL`.
    profile : CostProfile, optional
        The profile to price nodes on (default: the backend's).
    lazy_profile : callable, optional
        In place of ``profile``: a call (no arguments) giving it, made when :attr:`profile` is first
        read, so that a planner that only lowers a stored tree reads no calibration records.
    """

    def __init__(self, backend, *, solvers=None, tol: float | None = None, probe=None, device=None,
                 profile=None, exportable: bool = False, lazy_profile=None):
        self.backend = backend
        #: the plan must lower to torch ops only (an artifact is asked for): host-library leaves decline
        self.exportable = exportable
        if lazy_profile is None:
            self.profile = backend.profile if profile is None else profile
        self._lazy_profile = lazy_profile
        self.solvers = registry.SOLVERS.snapshot() if solvers is None else tuple(solvers)
        self.tol_override = tol
        self._probe = probe
        self._device = device
        self._memo: dict = {}
        self._native_fft: dict = {}  # precision -> backend.has_native_fft (has_native_fft)
        #: (problem, tol) of the searches in progress: a composite may plan its children to a
        #: tighter share of its own bound (Planner.plan(..., tol=)); they see it through tol()
        self._active: list = []
        self._share_depth = 0
        self._listing = False  # set while applicable() runs, so failures do not recurse into it
        #: the nesting depth (len(_active)) of a search whose failure message is thrown away
        #: (try_plan: default_node's tries): its failure skips the list of solvers that apply, 8 more
        #: searches (4 ms of each 7 ms r2r plan in scipy's DCT/DST tests)
        self._discarded_at = -1
        self.searches = 0
        #: the problem of the current top-level search: its module runs on the user's tensor
        self.root = None
        self._host: Planner | None = None  # on_host()

    @functools.cached_property
    def _specs(self) -> tuple:
        """(DEFAULT_STRATEGIES, TRUNCATED_DEFAULTS) parsed for this planner's solvers: read by every
        root search (default_node), made at the first (a planner that only lowers a stored tree
        never parses them)."""
        return _default_specs(tuple([s.name for s in self.solvers]))

    @functools.cached_property
    def profile(self):
        """The cost profile nodes are priced on: the backend's, or one calibrated from measurements.
        ``lazy_profile`` (a call giving it) is called when it is first read: the first priced node
        of a search (the lowering of a wisdom hit's tree reads none; its records go unread)."""
        return self._lazy_profile()

    def at_root(self, problem) -> bool:
        """Whether ``problem`` is the plan's own problem (or, for precision='auto', a mode of it),
        whose lowered module ``Plan.execute`` runs on the user's tensor.

        A library leaf there is called on that tensor directly (no packing), and any other tree's
        split result is packed into the complex output once (:func:`trnplan.planner.solver.root_output`).
        """
        root = self.root
        if root is None:
            return False
        if problem == root:
            return True
        # precision="auto": root with the mode's precision (attrs.evolve's 5 µs on every search of a plan)
        return root.precision == "auto" and problem.precision != "auto" and \
            attrs.evolve(root, precision=problem.precision) == problem

    def _top(self, problem) -> None:
        """A search that no other search is running: its problem is the plan's (the root)."""
        if not self._active:
            self.root = problem

    @property
    def depth(self) -> int:
        """How many searches are in progress: 1 inside the top-level search, more in a child's."""
        return len(self._active)

    def solver(self, name: str):
        """The solver called ``name`` among those this planner searches, or None."""
        for s in self.solvers:  # a loop, not next(genexpr): no generator call per solver passed
            if s.name == name:
                return s
        return None

    def has_native_fft(self, precision: str) -> bool:
        """The backend's :meth:`~trnplan.backends.base.Backend.has_native_fft`, asked once per
        precision for this planner (the solvers ask at every node of the search)."""
        known = self._native_fft.get(precision)
        if known is None:
            known = self._native_fft[precision] = self.backend.has_native_fft(precision)
        return known

    def on_host(self) -> Planner:
        """A planner for the host CPU (its uncalibrated profile, no artifact): host-only solvers price
        the host fallback of a device plan with it (trnplan.planner.library)."""
        if self._host is None:
            self._host = Planner(get_backend("cpu"), solvers=self.solvers)
        return self._host

    def host_fallback_reason(self, tree: PlanNode) -> str | None:
        """Why ``tree`` runs on the host with nothing compiled, or None: the one place that decides
        the host fallback (a host-only solver at the root of a plan for a device with a host link)."""
        solver = self.solver(tree.solver)
        if self.backend.host_link_gbs is None or solver is None or not solver.host_only:
            return None
        return (f"host fallback: the cost model prices the host library {tree.solver!r} (with the transfer both "
                f"ways) below the NeuronCore plan, so nothing is compiled")

    @property
    def probe(self):
        """The device's :class:`~trnplan.backends.base.PrecisionProbe` the accuracy model reads
        (given, or the backend's, run once per process)."""
        if self._probe is None:
            self._probe = self.backend.precision_probe(self._device)
        return self._probe

    def tol(self, problem) -> float:
        """The error bound of ``problem``: the given ``tol``, else the precision's default bar
        ("auto" targets the bar of its storage: fp32's for complex64, fp64's for complex128)."""
        if self._active and self._active[-1][0] == problem:
            return self._active[-1][1]
        if self.tol_override is not None:
            return self.tol_override
        if problem.precision == "auto":
            return DEFAULT_TOL["fp64" if problem.dtype == "complex128" else "fp32"]
        return DEFAULT_TOL[problem.precision]

    def plan(self, problem, spec: Spec | None = None, tol: float | None = None) -> PlanNode:
        """The cheapest node for ``problem`` that meets ``spec`` and the accuracy bound
        (``tol``, if given, instead of :meth:`tol`: a composite's share of its own bound)."""
        return self.search(problem, spec, tol)[0]

    #: how many budget-share re-plans may nest (a four-step inside a four-step re-planned to a
    #: share of a share ...): each level shrinks the bound by √2 and multiplies the search, so the
    #: failure path of an unreachable bound stays cheap (bf16 at n=4099 recursed 12 levels deep)
    MAX_SHARE_DEPTH = 2

    def plan_share(self, problem, spec: Spec | None, tol: float) -> PlanNode | None:
        """Re-plan a composite's child to ``tol``, a share of the composite's own bound; ``None``
        when shares are already nested :data:`MAX_SHARE_DEPTH` deep (the caller keeps its first
        children and is judged over the bound)."""
        if self._share_depth >= self.MAX_SHARE_DEPTH:
            return None
        self._share_depth += 1
        try:
            return self.plan(problem, spec, tol=tol)
        except PlanningError:  # nothing meets the share: the caller keeps its first children
            return None
        finally:
            self._share_depth -= 1

    def search(self, problem, spec: Spec | None = None,
               tol: float | None = None) -> tuple[PlanNode, tuple[Candidate, ...]]:
        """(best node, every solver's candidate with its verdict) for ``problem``."""
        tol = self.tol(problem) if tol is None else tol
        self._top(problem)
        # all frozen and hashable: cheaper than a digest per search; a node's price depends on
        # whether it is the root (at_root), so that is part of the key
        key = (problem, spec, tol, self.at_root(problem))
        if key in self._memo:
            return self._memo[key]
        check_fits(problem)  # before searching: a hopeless size failed after minutes of search
        self.searches += 1
        self._active.append((problem, tol))
        token = VARIANTS.set(None)  # a child's variants are not the enumerated problem's
        try:
            return self._search(problem, spec, tol, key)
        finally:
            VARIANTS.reset(token)
            self._active.pop()

    def enumerate(self, problem, spec: Spec | None = None, tol: float | None = None) -> list[PlanNode]:
        """Every complete tree for ``problem`` the solvers try at the top level, within the bound.

        Each solver's variants (a four-step's splits, Bluestein's padded lengths, the real and nd
        methods, the precision modes …) are collected as whole trees, their children chosen by the
        cost model as usual; duplicates are dropped. The efforts "measure" and "patient" time
        these. Sorted by predicted time, cheapest first.
        """
        tol = self.tol(problem) if tol is None else tol
        forced = spec.name if spec is not None else None
        seen: dict = {}
        self._top(problem)
        self._active.append((problem, tol))
        try:
            for solver in self.solvers:
                if forced is not None and solver.name != forced:
                    continue
                if self._why_not(solver, problem, spec) is not None:
                    continue
                sink: list = []
                token = VARIANTS.set(sink)
                try:
                    node = solver.plan(problem, self, spec)
                except PlanningError:
                    continue
                finally:
                    VARIANTS.reset(token)
                for cand in [*sink, node]:
                    if (cand is None or cand.solver != solver.name or cand.error > tol
                            or cand.n != problem.n or cand.batch != problem.batch):
                        continue
                    if spec is not None and len(spec.children) > len(cand.children):
                        continue
                    seen.setdefault(cand.digest(), cand)
        finally:
            self._active.pop()
        return sorted(seen.values(), key=lambda c: c.time_us)

    def default_node(self, problem) -> PlanNode | None:
        """The device's own FFT for ``problem`` as a tree (:data:`DEFAULT_STRATEGIES`: torch.fft
        on the CPU, cuFFT on CUDA; for a truncated problem :data:`TRUNCATED_DEFAULTS`, that FFT then
        the cut), within the bound; None where the backend has none that applies (Neuron, xla, a
        precision the library lacks) or it is over the bound."""
        for spec in self._specs[1] if problem.modes else self._specs[0]:
            node = self.try_plan(problem, spec)
            if node is not None:
                return node
        return None

    def try_plan(self, problem, spec: Spec | None = None) -> PlanNode | None:
        """:meth:`plan`, or None where it fails: the failure's message is not made (a forced
        strategy's names the solvers that apply, each one more search)."""
        outer, self._discarded_at = self._discarded_at, len(self._active) + 1
        try:
            return self.plan(problem, spec)
        except PlanningError:
            return None
        finally:
            self._discarded_at = outer

    def _why_not(self, solver, problem, spec) -> str | None:
        """Why ``solver`` does not apply to ``problem`` under ``spec`` (kind/rank, its own reason,
        then the strategy's constraints), or None."""
        forced = spec is not None and spec.name is not None
        reason = solver.why_not_kind(problem) or solver.why_not(problem, self, forced)
        if reason is None and spec is not None:
            reason = solver.why_not_spec(problem, spec)
        return reason

    def _search(self, problem, spec, tol, key):
        forced = spec.name if spec is not None else None
        candidates = []
        over = False  # a candidate here, or in a failed sub-plan, was over the bound (OverBoundError)
        for solver in self.solvers:
            if forced is not None and solver.name != forced:
                continue
            reason = self._why_not(solver, problem, spec)
            if reason is not None:
                candidates.append(Candidate(solver.name, NOT_APPLICABLE, reason))
                continue
            try:
                node = solver.plan(problem, self, spec)
            except PlanningError as exc:  # a sub-plan could not be made: this candidate fails, not the search
                over = over or isinstance(exc, OverBoundError)
                candidates.append(Candidate(solver.name, NOT_APPLICABLE, f"its sub-plan failed ({exc})"))
                continue
            if node is None:
                candidates.append(Candidate(solver.name, NOT_APPLICABLE, f"no variant fits the strategy {spec}"))
            elif spec is not None and len(spec.children) > len(node.children):
                candidates.append(Candidate(
                    solver.name, NOT_APPLICABLE,
                    f"the strategy gives {len(spec.children)} child spec(s) but {solver.name} has "
                    f"{len(node.children)} child plan(s)"))
            elif node.error > tol:
                candidates.append(Candidate(
                    solver.name, OVER_BOUND,
                    f"predicted error {node.error:.1e} exceeds the bound {tol:.0e}", node))
            else:
                candidates.append(Candidate(solver.name, CHOSEN, "", node))
        viable = [c for c in candidates if c.verdict == CHOSEN]
        if not viable:
            over = over or any(c.verdict == OVER_BOUND for c in candidates)
            error = OverBoundError if over else PlanningError
            raise error(self._failure(problem, spec, candidates), candidates=candidates, tol=tol)
        best = min(viable, key=lambda c: c.node.time_us)  # min() is stable: registry order breaks ties
        kept = None
        if spec is None and self.at_root(problem) and not self._listing:
            best, kept, candidates = self._margin_rule(problem, best, candidates)
        ranked = tuple(
            c if c is best or c.verdict != CHOSEN else Candidate(  # not attrs.evolve: 5 µs each, every search
                c.solver, WITHIN_MARGIN if c is kept else MORE_EXPENSIVE,
                (kept.reason if c is kept else "")
                or f"{c.node.time_us / max(best.node.time_us, 1e-9):.2f}× the chosen plan's predicted time", c.node)
            for c in candidates
        )
        self._memo[key] = (best.node, ranked)
        return best.node, ranked

    # ------------------------------------------------------------------ the estimate's margin rule
    def margin_sigma(self, *trees: PlanNode) -> tuple[float, str]:
        """(sigma, where it came from): the cost model's own rms log-error for comparing ``trees``.

        The fitted leaf model's held-out error where every node of every tree is a fitted library
        leaf (:mod:`trnplan.planner.leafcost`); where all trees are rooted in one solver that states
        its own for them on this profile (:meth:`~trnplan.planner.solver.Solver.margin_sigma`), that one;
        else the profile's uncalibrated error.
        """
        prof = self.profile
        roots = {t.solver for t in trees}
        own = self.solver(next(iter(roots))) if len(roots) == 1 else None
        if own is not None and (sigma := own.margin_sigma(trees, prof)) is not None:  # its methods compared, as measured
            return sigma, f"{own.name}'s methods compared on the {prof.name!r} profile, measured"

        def fitted(tree):
            return all(node.solver in prof.leaves and (node.solver not in ("real", "nd") or node.param("method") == "lib")
                       for _, node in tree.walk())

        if prof.sigma_fitted is not None and all(fitted(t) for t in trees):
            return prof.sigma_fitted, prof.sigma_source.split("; trees with other solvers")[0]
        source = prof.sigma_source.split("; trees with other solvers: ")[-1]
        return prof.sigma, source or f"the {prof.name!r} profile states no error of its own: a plain comparison"

    #: how many sigmas the estimate's margin is: 2, a bet the model wins about 19 times in 20 if its
    #: log-errors are normal. With one sigma, the quiet-machine `trnplan bench` of 2026-11-26
    #: (fitted sigma 0.46 at 2 threads: a margin of 1.58×) picked single-threaded pyFFTW for
    #: 1×262144 and 1×65536, measured 1.67× and 1.15× torch.fft's time
    MARGIN_SIGMAS = 2.0

    def _margin_rule(self, problem, best: Candidate, candidates: list):
        """The estimate never bets against the model's own error: at a plan's root, the device's
        own FFT (:meth:`default_node`) stays unless a candidate is predicted faster than it by
        more than exp(:data:`MARGIN_SIGMAS` · sigma), sigma that candidate's :meth:`margin_sigma` against the default; the
        cheapest such candidate replaces it. Returns (chosen, the cheapest candidate kept out or
        None, candidates with the chosen one's reason saying why)."""
        default = self.default_node(problem)
        if default is None:
            return best, None, candidates

        z = self.MARGIN_SIGMAS

        def margin(c):  # (sigma, its source, predicted ratio to the default)
            return (*self.margin_sigma(c.node, default), c.node.time_us / max(default.time_us, 1e-9))

        def rule(sigma, source):
            return (f"margin rule (sigma {sigma:.2f}, {source}): another tree replaces the default {default} only "
                    f"if predicted below exp(-{z:g}·sigma) = {math.exp(-z * sigma):.2f}× its time")

        if best.node.digest() == default.digest():
            return self._reason(best, candidates, f"{rule(*margin(best)[:2])}; cheapest predicted: {default} (the default)")
        viable = sorted((c for c in candidates if c.verdict == CHOSEN and c.node.digest() != default.digest()),
                        key=lambda c: c.node.time_us)
        winner = next((c for c in viable if margin(c)[2] * math.exp(z * margin(c)[0]) < 1.0), None)
        sigma, source, ratio = margin(best)
        why = f"predicted at {ratio:.2f}× the default's time, not below exp(-{z:g}·sigma) = {math.exp(-z * sigma):.2f}×"
        kept = None if winner is best else attrs.evolve(best, reason=why)
        if winner is not None:
            w_sigma, w_source, w_ratio = margin(winner)
            chosen = attrs.evolve(winner, reason=f"{rule(w_sigma, w_source)}; {winner.node} is predicted at "
                                                 f"{w_ratio:.2f}×: replaced")
        else:
            chosen = Candidate(default.solver, CHOSEN, f"{rule(sigma, source)}; kept: {best.node} is {why}", default)
        # the chosen tree takes its solver's row (the default's solver when kept), the row of the
        # cheapest kept out says why
        mine = winner or next((c for c in candidates if c.solver == default.solver and c.verdict == CHOSEN), None)
        out = [chosen if c is mine else kept if c is best and kept is not None else c for c in candidates]
        if mine is None:
            out.append(chosen)
        return chosen, kept, out

    @staticmethod
    def _reason(best, candidates, reason):
        chosen = attrs.evolve(best, reason=reason)
        return chosen, None, [chosen if c is best else c for c in candidates]

    def applicable(self, problem) -> list[str]:
        """Names of the solvers that can plan ``problem`` unforced within the bound."""
        out, self._listing = [], True
        try:
            for solver in self.solvers:
                try:
                    self.search(problem, Spec(name=solver.name))
                except PlanningError:
                    continue
                out.append(solver.name)
        finally:
            self._listing = False
        return out

    def _failure(self, problem, spec, candidates):
        """The failure's message, or at the root of a forced strategy a call that makes it when read
        (:class:`~trnplan.core.errors.PlanningError` takes either): the solvers that apply there are
        found by one search per solver, and a failed root is often tried and dropped (the drop-in
        tries torch.fft's strategies in turn). Made later, the list is found from the planner as it
        was at the failure (its searches in progress, root, share depth, memo), so the message is the
        one made at once; nothing runs on a root's planner after its search failed but that."""
        detail = "; ".join(f"{c.solver}: {c.reason}" for c in candidates)
        if spec is None or spec.name is None:
            return f"no solver can plan n={problem.n} ({problem.precision}, {problem.device}): {detail}"
        head = (f"strategy {str(spec)!r} does not apply to the sub-problem n={problem.n} "
                f"({'inverse' if problem.inverse else 'forward'}, batch {problem.batch}, {problem.precision}): "
                f"{detail}. Solvers that apply here: ")
        if self._listing or self._discarded_at == len(self._active):  # nobody reads it
            return head + "none"
        if len(self._active) > 1:
            return head + (", ".join(self.applicable(problem)) or "none")
        at_failure = (list(self._active), self.root, self._share_depth, dict(self._memo))

        def message() -> str:
            now = (self._active, self.root, self._share_depth, self._memo)
            self._active, self.root, self._share_depth, self._memo = at_failure
            try:
                return head + (", ".join(self.applicable(problem)) or "none")
            finally:
                self._active, self.root, self._share_depth, self._memo = now
                for key, found in at_failure[3].items():  # the listing's searches, kept as made at once
                    self._memo.setdefault(key, found)

        return message

    # ------------------------------------------------------------------ lowering
    def lower(self, node: PlanNode, problem, device):
        """Build the torch module of a node tree (unscaled) for ``problem``'s dtype on ``device``."""
        return self._context(problem, device).build(node)

    def _context(self, problem, device) -> BuildContext:
        """The BuildContext a tree of ``problem`` is lowered in on ``device`` (name -> solver made
        without a comprehension's call: a wisdom hit lowers, tools/count_calls.py counts it)."""
        builder = Builder(dict(zip(map(_NAME, self.solvers), self.solvers)))
        builder.ctx = BuildContext(dtype=problem.real_dtype, device=device, precision=problem.precision, build=builder)
        return builder.ctx

    def lower_plan(self, node: PlanNode, problem, device) -> PlanModule:
        """The whole transform as one module: the lowered tree, then ``problem``'s norm scale —
        folded into the tree's last GEMM where the backend compiles plans whole
        (``Backend.folds_scale``), or on every backend where the root's solver says so
        (``Solver.folds_scale_always``), and the root can (:meth:`Solver.build_scaled`): one read and
        write of the output fewer."""
        scale = problem.scale
        solver = None if scale == 1.0 else self.solver(node.solver)
        ctx = self._context(problem, device)
        if solver is not None and (self.backend.folds_scale or solver.folds_scale_always):
            folded = ctx.build.build_scaled(node, scale)
            if folded is not None:
                return PlanModule(folded, 1.0)
        return PlanModule(ctx.build(node), scale)


class Builder:
    """Lowers nodes with the solver registry; :meth:`context` makes the BuildContext a build runs in.

    A node builds its children through ``ctx.build``, which lowers them in the *same* context.
    The precision solver lowers its child in another precision mode with
    ``ctx.build.context(ctx.dtype, ctx.device, mode)``.
    """

    def __init__(self, by_name: dict, ctx: BuildContext | None = None):
        self.by_name, self.ctx = by_name, ctx

    def context(self, dtype, device, precision: str) -> BuildContext:
        builder = Builder(self.by_name)
        builder.ctx = BuildContext(dtype=dtype, device=device, precision=precision, build=builder)
        return builder.ctx

    def __call__(self, node: PlanNode) -> torch.nn.Module:
        return self.by_name[node.solver].build(node, self.ctx)

    def build_scaled(self, node: PlanNode, scale: float) -> torch.nn.Module | None:
        """``node``'s module with ``scale`` folded in (:meth:`Solver.build_scaled`), or None."""
        return self.by_name[node.solver].build_scaled(node, self.ctx, scale)


class PlanModule(torch.nn.Module):
    """The whole transform as one module on split tensors: the tree's root, then ``norm``'s scale.

    Inputs and outputs are flat ``(batch, points)`` real tensors: ``(re, im)`` on the complex
    side, one tensor on the real side (r2c input, c2r output); the result is always a tuple.
    """

    def __init__(self, root: torch.nn.Module, scale: float):
        super().__init__()
        self.root, self.scale = root, scale

    def forward(self, *inputs: torch.Tensor):
        out = tuple(self.root(*inputs))
        if self.scale != 1.0:
            out = tuple(t * self.scale for t in out)
        elif any(t is x for t in out for x in inputs):
            # an identity tree ((stockham 1): no stages) hands its inputs back; the plan's outputs
            # are new tensors, or an in-place op on them would change the caller's input (issue 34)
            out = tuple(t.clone() if any(t is x for x in inputs) else t for t in out)
        return out
