"""The cost model learns: measured times recalibrate a backend profile's constants.

Every timed candidate of measured planning (:mod:`trnplan.planner.measure`) is a sample: the
tree's work by cost-model term (:attr:`PlanNode.terms <trnplan.core.node.PlanNode.terms>`:
launches, library calls, GEMM and FFT flops per dtype, bytes) and its measured time. The
prediction is linear in the terms, ``t = Σ_j w_j · p_j`` with the profile's price ``p_j`` of term
``j`` (µs per launch, per flop, per byte), so the calibration is one multiplier ``s_j`` per price,
fitted in log space (relative errors, so a 10 µs plan weighs as much as a 10 ms one)::

    minimise  Σ_i (log Σ_j w_ij p_j s_j − log t_i)²  +  λ Σ_j (log s_j)²

The ridge term ``λ`` keeps a constant that the samples barely constrain at its prior (the
profile measured by bench/calibrate.py), so a handful of timings nudges the model rather than
overturning it; multipliers are clipped to [1/20, 20]. The fit is a damped Gauss–Newton in a few
unknowns (one per term seen), done with numpy.

The samples and the fitted multipliers live in the plan cache under
``calibration:<fingerprint digest>:<device>``, so they are per machine and installation; later
plans on the same machine, in any process, are priced with the calibrated profile
(:func:`calibrated_profile`), and ``explain()`` says so. This module only computes: the cache
layer reads and writes the record (:mod:`trnplan.cache.records`).

The library leaves have a second, separate calibration: the leaf model fitted by
``bench/calibrate.py --fit`` on a training grid and scored on a held-out one
(:mod:`trnplan.planner.leafcost`). A fitted leaf stays at its fitted cost whatever the
multipliers here say, and the estimate's margin rule takes its sigma from that held-out error,
never from ``rms_after`` here (an in-sample error over whatever happened to be measured).
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from trnplan.core.cost import CostProfile

#: ridge weight pulling each log-multiplier towards 0 (the prior profile)
RIDGE = 0.05
#: multipliers are kept within [1/CLIP, CLIP] of the prior
CLIP = 20.0
#: samples kept per machine (the oldest are dropped)
MAX_SAMPLES = 512


@attrs.frozen
class Calibration:
    """Fitted multipliers of a profile's prices, and how well they fit.

    Attributes
    ----------
    scales : dict
        term → multiplier of its price (2.0: that term costs twice what the prior profile says).
    samples : int
        Timings the fit used.
    rms_before, rms_after : float
        Root-mean-square of log(predicted / measured) over the samples, with the prior profile
        and with the calibrated one (0.69 is a factor of 2).
    """

    scales: dict = attrs.Factory(dict)
    samples: int = 0
    rms_before: float = 0.0
    rms_after: float = 0.0

    def apply(self, profile: CostProfile) -> CostProfile:
        """``profile`` with every price scaled by its multiplier (rates divided, latencies multiplied)."""
        s = self.scales
        if not s:
            return profile
        gemm = {k: v / s.get(f"gemm:{k}", 1.0) for k, v in profile.gemm_gflops.items()}
        fft = {k: v / s.get(f"fft:{k}", 1.0) for k, v in profile.fft_gflops.items()}
        short, long = profile.penalties()
        return attrs.evolve(
            profile,
            launch_us=profile.launch_us * s.get("launches", 1.0),
            graph_us=profile.graph_us * s.get("graphs", 1.0),
            # a transposed byte's price beyond the byte itself is the penalty's excess (the engine's
            # transpose work, on a profile with one, is left as the profile states it)
            transpose_penalty=(1.0 + (short - 1.0) * s.get("transposed", 1.0),
                               1.0 + (long - 1.0) * s.get("strided", 1.0)),
            fft_launch_us=profile.fft_launch_us * s.get("fft_calls", 1.0),
            gemm_gflops=gemm,
            fft_gflops=fft,
            bandwidth_gbs=profile.bandwidth_gbs / s.get("bytes", 1.0),
            source=f"{profile.source}; calibrated from {self.samples} measured plan timings",
        )

    def describe(self) -> str:
        if not self.scales:
            return "not calibrated"
        moved = ", ".join(f"{k} ×{v:.2g}" for k, v in sorted(self.scales.items()) if abs(math.log(v)) > 0.01)
        return (f"calibrated from {self.samples} measured timings (prices: {moved or 'unchanged'}; "
                f"rms log-error {self.rms_before:.2f} → {self.rms_after:.2f})")


def fit(samples, profile: CostProfile, ridge: float = RIDGE) -> Calibration:
    """Fit price multipliers of ``profile`` to ``samples``, a list of (terms dict, measured µs).

    Samples with a non-positive time or no priced term are ignored.
    """
    rows, times = [], []
    if not profile.fuses_elementwise:  # the eager traffic of elementwise chains is traffic like any other
        samples = [(_fold_unfused(terms), t) for terms, t in samples]
    names = sorted({k for terms, _ in samples for k in terms})
    # the overlap term (µs an overlapping profile takes off engine + data-movement time) is no
    # price to scale: it stays as the prior profile states it, an offset of each sample's prediction
    names = [k for k in names if k != "overlap" and _priced(profile, k)]
    offsets = []
    for terms, t in samples:
        if not (t and t > 0):
            continue
        row = [terms.get(k, 0.0) * profile.price(k) for k in names]
        offset = terms.get("overlap", 0.0) * profile.price("overlap")
        if sum(row) + offset > 0:
            rows.append(row)
            offsets.append(offset)
            times.append(t)
    if not rows or not names:
        return Calibration()
    A, logt, off = np.asarray(rows), np.log(np.asarray(times)), np.asarray(offsets)
    theta = np.zeros(len(names))

    def residual(th):
        # where an overlap is taken off, scaled prices could take more than it hides: such a
        # prediction stays above a tenth of the prior's (no sample without overlap is touched)
        raw = A @ np.exp(th) + off
        pred = np.where(off < 0, np.maximum(raw, 0.1 * (A.sum(axis=1) + off)), raw)
        return np.concatenate([np.log(pred) - logt, math.sqrt(ridge) * th]), pred

    r, pred = residual(theta)
    before = float(np.sqrt(np.mean(r[: len(times)] ** 2)))
    cost, mu = float(r @ r), 1e-3
    for _ in range(50):
        J = np.vstack([(A * np.exp(theta)) / pred[:, None], math.sqrt(ridge) * np.eye(len(names))])
        g, H = J.T @ r, J.T @ J
        step = np.linalg.solve(H + mu * np.eye(len(names)), -g)
        trial = np.clip(theta + step, -math.log(CLIP), math.log(CLIP))
        r_new, pred_new = residual(trial)
        if float(r_new @ r_new) < cost:
            theta, r, pred, cost, mu = trial, r_new, pred_new, float(r_new @ r_new), mu / 3
            if np.max(np.abs(step)) < 1e-6:
                break
        else:
            mu *= 10
            if mu > 1e8:
                break
    after = float(np.sqrt(np.mean(r[: len(times)] ** 2)))
    return Calibration({k: float(math.exp(v)) for k, v in zip(names, theta)}, len(times), before, after)


def _fold_unfused(terms) -> dict:
    terms = dict(terms)
    if "unfused" in terms:
        terms["bytes"] = terms.get("bytes", 0.0) + terms.pop("unfused")
    return terms


def _priced(profile: CostProfile, term: str) -> bool:
    try:
        profile.price(term)
    except KeyError:
        return False
    return True


def _finite(x, low: float = 0.0) -> bool:
    """A JSON number (not a bool), finite and ≥ ``low``."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= low


def parse_record(record) -> dict:
    """A stored ``calibration:`` record, checked field by field; raises ValueError/TypeError if it
    is not one (the plan cache then forgets it with a warning: PlanCache.get_record).

    The fit clips every multiplier to [1/CLIP, CLIP] (a multiplier of 0 would divide by zero in
    :meth:`Calibration.apply`), counts are integers ≥ 0, timings positive and finite.
    """
    if not isinstance(record, dict) or not isinstance(record.get("samples"), list) \
            or not isinstance(record.get("scales"), dict):
        raise TypeError("missing samples or scales")
    slack = 1 + 1e-9  # exp(log(CLIP)) rounds
    for term, scale in record["scales"].items():
        if not (_finite(scale) and 1 / (CLIP * slack) <= scale <= CLIP * slack):
            raise ValueError(f"scale {term}={scale!r} is not a number in [1/{CLIP:g}, {CLIP:g}]")
    for sample in record["samples"]:
        if not (isinstance(sample, list) and len(sample) == 2 and isinstance(sample[0], dict)
                and all(isinstance(k, str) and _finite(v) for k, v in sample[0].items())
                and _finite(sample[1]) and sample[1] > 0):
            raise ValueError(f"sample {str(sample)[:80]} is not [terms, positive µs]")
    count = record.get("count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count {count!r} is not an integer ≥ 0")
    if not all(_finite(record.get(k, 0.0)) for k in ("rms_before", "rms_after")):
        raise ValueError("rms_before / rms_after are not numbers ≥ 0")
    return record


def calibration(record: dict | None) -> Calibration | None:
    """The calibration a stored record (checked by :func:`parse_record`) holds, or None."""
    if record is None:
        return None
    return Calibration(record["scales"], record.get("count", 0), float(record.get("rms_before", 0.0)),
                       float(record.get("rms_after", 0.0)))


def calibrated_profile(profile: CostProfile, record: dict | None) -> tuple[CostProfile, Calibration | None]:
    """(the profile to price plans on, the calibration applied or None), from the stored record
    (:func:`parse_record`'s result, or None: there is none)."""
    cal = calibration(record)
    return (cal.apply(profile), cal) if cal is not None and cal.scales else (profile, None)


def merged(old: dict | None, samples, profile: CostProfile) -> dict:
    """The record that adds ``samples`` (terms, measured µs) to the stored ``old`` one (None: none
    yet), keeping the last :data:`MAX_SAMPLES`, refitted against the *prior* ``profile``.

    Pure: the plan cache reads, merges and writes in one transaction
    (:func:`trnplan.cache.records.add_calibration_samples`), so processes measuring at once all
    keep their samples; the fit of 512 samples takes ~20 ms."""
    new = [[dict(t), float(us)] for t, us in samples]
    kept = ((old or {"samples": []})["samples"] + new)[-MAX_SAMPLES:]
    cal = fit([(t, us) for t, us in kept], profile)
    return {"samples": kept, "scales": cal.scales, "count": cal.samples,
            "rms_before": cal.rms_before, "rms_after": cal.rms_after}


__all__ = ["Calibration", "calibrated_profile", "calibration", "fit", "merged", "parse_record"]
