"""Measured planning on a busy machine: five fresh-cache processes in a row, part of the time
with another process keeping one core busy.

Each process plans every row of a batched c2c grid with ``effort="measure"`` in a fresh plan cache
(planning is what is measured), then times the measured plan side by side with every library a
user could call instead (torch.fft, numpy.fft, scipy.fft with 1 and 2 workers, pyFFTW with 1 and
2 threads, mkl_fft: :func:`trnplan.tools.benchsuite.run_row`), in that process. Per row the table gives
the worst and the median, over the processes, of the measured plan's time over the best library's
(the goals: worst ≤ 1.10, median ≤ 1.03), and which tree each process picked.

The ratio of a row in one process is paired per round (:func:`trnplan.tools.benchsuite.per_round_ratio`):
every column is timed once per round, in many short rounds, so a load burst lands on all columns
alike; per library column the median over the rounds of the plan's time over that library's, and
the largest of those — the ratio to the library that is fastest against the plan, of all library
columns in that process (with torch threads > 1 including torch.fft and mkl_fft at one thread,
the calls measured planning may pick). The ratio of the columns' medians is kept in the JSON too
(``ratio_of_medians``).

The background load is a spinning interpreter, started at a random moment of each process's run
and stopped half a run later, so some rows are planned under load and some timed under it.

Usage::

    python bench/measure_busy.py                       # 5 processes, load on, 2 torch threads
    python bench/measure_busy.py --runs 5 --no-load    # the quiet-machine run
    python bench/measure_busy.py --malloc-env          # glibc's malloc thresholds fixed (MALLOC_ENV)
    python bench/measure_busy.py --null                # and the null: the statistic's floor (each library twice)
    python bench/measure_busy.py --markdown docs/benchmarks.md --plot docs/measure_busy.png
    python bench/measure_busy.py --replot bench/out/measure_busy.json --plot docs/measure_busy.png
    python bench/measure_busy.py --ab --out bench/out/adaptive_ab.json   # adaptive vs fixed thread counts
    python bench/measure_busy.py --queue-ab --out bench/out/queue_ab.json   # the leaf with/without the run queue

Prints a table and writes JSON (``--out``); ``--markdown`` rewrites the section between its
markers in that file. A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

#: the grid: (batch, n), the batch chosen so that the best library's one-thread call takes roughly
#: 150 µs–1.5 ms on this 2-vCPU machine (so a per-call overhead of 2 µs is ≤ ~1 % of it); the
#: per-transform times are the quiet single-thread figures of trnplan/planner/library.py's table
#: and earlier runs of this script (the machine was too loaded to re-time them on 2026-11-27:
#: load average 8):
#:
#: - 192: ~0.06–0.08 µs per transform (mkl_fft; 512×192 took 30–43 µs) → 4096: ~250–350 µs
#:   (512×192's ~35 µs was under the 40 µs floor, where the plan's per-call cost dominates)
#: - 1024: ~0.3–0.5 µs (64×1024 took 18–33 µs) → 512: ~150–250 µs
#: - 4099 (prime): ~40 µs (mkl_fft 4×4093: 171 µs; torch.fft 16×4099 0.7 ms) → 16: ~0.6–0.7 ms
#: - 16385 = 5·29·113: ~150–250 µs → 4: ~0.6–1 ms (8×16385 ran up to 2 ms)
#: - 65537 (prime): pyFFTW ~1.25 ms, mkl_fft ~2.8 ms → 1
#: - 262144: pyFFTW ~0.9 ms at one thread (0.49 ms at two) → 1
GRID = [(4096, 192), (512, 1024), (16, 4099), (4, 16385), (1, 65537), (1, 262144)]
BEGIN, END = "<!-- measure_busy:begin -->", "<!-- measure_busy:end -->"
#: the background load: spins until its parent is gone (a killed run leaves no spinner behind; one
#: left by a killed run loaded every later run here, 2026-11-27)
SPINNER = "import os\np = os.getppid()\nwhile os.getppid() == p: pass"
GOAL_WORST, GOAL_MEDIAN = 1.10, 1.03
#: ``--malloc-env``: glibc's malloc tunables (mallopt(3): M_MMAP_THRESHOLD, M_TRIM_THRESHOLD) fixed
#: for the children, every column alike. By default glibc raises its mmap threshold as large blocks
#: are freed and trims the heap top past twice it, so whether a call's multi-MB output is fresh
#: memory (a minor page fault per 4 KiB page) depends on the process's history: one 4096×192 row of
#: this bench took 20 k, 455 k, 952 k and 458 k minor faults in four processes (~6 000 calls; the
#: 952 k process ran every column 1.5-2× slower), and 11-17 k with these two set (2026-11-27)
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


def child(args) -> int:
    """One process: every row planned with effort="measure" in this process's fresh cache, then timed."""
    import numpy as np
    import torch

    from trnplan import plan_many
    from trnplan.tools.benchsuite import MEAS, Row, run_row

    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    rows = []
    for batch, n in GRID[: args.rows]:
        t0 = time.perf_counter()
        rec = run_row(Row(f"fft-{batch}x{n}", "fft", (n,), batch), args.threads, args.cell_seconds, 20, rng,
                      rounds=args.rounds, forced=False, one_thread=True, null=args.null)
        d = rec["derived"]
        per_round = d.get("measure_vs_best_per_round")
        rows.append({"id": rec["id"], "label": rec["label"], "tree": rec["cells"][MEAS].get("tree"),
                     "measure_us": rec["cells"][MEAS].get("us"), "best_library": d["best_library"],
                     "best_us": d["best_library_us"],
                     "ratio": per_round if per_round is not None else d["measure_vs_best"],
                     "ratio_of_medians": d["measure_vs_best"], "mean_ratio": d.get("measure_vs_best_mean"),
                     "calls": rec["cells"][MEAS].get("repeats"),
                     "null_ratio": d.get("null_vs_best_per_round"), "null_library": d.get("null_library"),
                     "seconds": time.perf_counter() - t0, "decision": _decision(plan_many, batch, n)})
        null = (f", null {rows[-1]['null_ratio']:.2f} ({rows[-1]['null_library']} again)"
                if rows[-1]["null_ratio"] is not None else "")
        print(f"  {rec['label']}: measure {rows[-1]['measure_us']:.1f} µs ({rows[-1]['tree']}), best "
              f"{d['best_library']} {d['best_library_us']:.1f} µs, ratio {rows[-1]['ratio']:.2f} per round "
              f"({d['measure_vs_best']:.2f} of medians){null}, {rows[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    with open(args.child_json, "w", encoding="utf-8") as f:
        json.dump(rows, f)
    return 0


def _decision(plan_many, batch: int, n: int) -> list:
    """The measured plan's rule, confirmation and load lines from explain() (the plan this process
    just measured: plan_many returns it from the in-process memo, nothing is timed again)."""
    m = plan_many((n,), batch=batch, kind="c2c", effort="measure").provenance.measurement
    if m is None:
        return []
    from trnplan.planner.measure import describe

    return [line.strip() for line in describe(m) if line.startswith(("  rule:", "  contender", "  under load",
                                                                      "  confirmation", "  machine busy",
                                                                      "  default's threads"))]


def _load_for(start_s: float, length_s: float, stop: threading.Event, log: list) -> None:
    """Keep one core busy from ``start_s`` for ``length_s`` seconds (or until ``stop``)."""
    if stop.wait(start_s):
        return
    proc = subprocess.Popen([sys.executable, "-S", "-c", SPINNER])
    log.append(start_s)
    stop.wait(length_s)
    proc.kill()
    proc.wait()


def one_run(args, i: int, expected_s: float) -> dict:
    """Run one fresh-cache process (with the load for half of it, at a random moment)."""
    cache = tempfile.mkdtemp(prefix="trnplan-measure-busy-")
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, TRNPLAN_CACHE_DIR=cache, OMP_NUM_THREADS=str(args.threads),
               MKL_NUM_THREADS=str(args.threads))
    if args.malloc_env:
        env.update(MALLOC_ENV)
    stop, log = threading.Event(), []
    loader = None
    if args.load:
        start = random.Random(i).uniform(0, expected_s / 2)
        loader = threading.Thread(target=_load_for, args=(start, expected_s / 2, stop, log), daemon=True)
        loader.start()
    t0 = time.perf_counter()
    try:
        cmd = [sys.executable, __file__, "--child-json", path, "--threads", str(args.threads),
               "--cell-seconds", str(args.cell_seconds), "--rows", str(args.rows), "--rounds", str(args.rounds)]
        if args.null:
            cmd.append("--null")
        subprocess.run(cmd, env=env, check=True)
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)
    finally:
        stop.set()
        if loader is not None:
            loader.join()
        shutil.rmtree(cache, ignore_errors=True)
        os.unlink(path)
    wall = time.perf_counter() - t0
    return {"run": i, "wall_s": wall, "load_started_s": log[0] if log else None, "rows": rows}


def summarise(runs: list) -> list:
    """Per row: worst and median ratio over the runs, and the trees picked."""
    out = []
    for j in range(len(runs[0]["rows"])):
        cells = [r["rows"][j] for r in runs]
        ratios = [c["ratio"] for c in cells if c["ratio"] is not None]
        means = [c["mean_ratio"] for c in cells if c.get("mean_ratio") is not None]
        nulls = [c["null_ratio"] for c in cells if c.get("null_ratio") is not None]
        out.append({"label": cells[0]["label"], "worst": max(ratios), "median": statistics.median(ratios),
                    "ratios": ratios, "mean_ratios": means, "trees": [c["tree"] for c in cells],
                    "best": sorted({c["best_library"] for c in cells}),
                    **({"null_worst": max(nulls), "null_median": statistics.median(nulls), "null_ratios": nulls,
                        "null_libraries": [c.get("null_library") for c in cells]} if nulls else {})})
    return out


def markdown(summary: list, meta: dict) -> str:
    lines = [BEGIN, "",
             (f"`python bench/measure_busy.py` ({meta['runs']} fresh-cache processes in a row, torch threads "
             f"{meta['threads']}, background load {'on for half of each run' if meta['load'] else 'off'}"
             f"{', glibc malloc thresholds fixed (--malloc-env)' if meta.get('malloc_env') else ''}; "
             f"{meta['when']}, load average before {meta['loadavg'][0]:.1f}). Ratio: the measured plan's time "
             f"over the best library's in the same process, paired per round-robin round (per library the median "
             f"of the rounds' ratios; the largest over the libraries) (goals: worst ≤ {GOAL_WORST}, median ≤ "
             f"{GOAL_MEDIAN}). Mean-time ratio: the plan's mean time per call over the library with the least "
             f"mean, the same rounds (what a loop of calls costs in total, stalls included; not judged)."),
             ]
    null = any("null_ratios" in s for s in summary)
    if null:
        lines[-1] += (" Null: the same statistic for a second call of the library that scored best in that "
                      "process (built anew, timed in the same rounds, `--null`): a planner that picked it in "
                      "hindsight and added no cost; the ratio's floor.")
    lines += ["", "| row | worst | median | per run | mean-time ratio per run |"
              + (" null worst | null median | null per run |" if null else "") + " best library | picks |",
              "|---|---|---|---|---|" + ("---|---|---|" if null else "") + "---|---|"]
    for s in summary:
        picks = "; ".join(sorted({t or "—" for t in s["trees"]}))
        ok = "" if s["worst"] <= GOAL_WORST and s["median"] <= GOAL_MEDIAN else " ✗"
        means = ", ".join(f"{r:.2f}" for r in s.get("mean_ratios", [])) or "—"
        nulls = ""
        if null:
            nok = ("" if s.get("null_worst", 0) <= GOAL_WORST and s.get("null_median", 0) <= GOAL_MEDIAN
                   else " ✗")
            nulls = (f" {s['null_worst']:.2f}{nok} | {s['null_median']:.2f} | "
                     f"{', '.join(f'{r:.2f}' for r in s['null_ratios'])} |" if "null_ratios" in s else " — | — | — |")
        lines.append(f"| {s['label']} | {s['worst']:.2f}{ok} | {s['median']:.2f} | "
                     f"{', '.join(f'{r:.2f}' for r in s['ratios'])} | {means} |{nulls} {', '.join(s['best'])} | {picks} |")
    met = sum(s["worst"] <= GOAL_WORST and s["median"] <= GOAL_MEDIAN for s in summary)
    lines += ["", f"{met} of {len(summary)} rows meet both goals."]
    if null:
        nmet = sum(s.get("null_worst", 9) <= GOAL_WORST and s.get("null_median", 9) <= GOAL_MEDIAN for s in summary)
        lines[-1] += f" The null meets both on {nmet} of {len(summary)}."
    lines += ["", END]
    return "\n".join(lines)


def plot(summary: list, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    for j, s in enumerate(summary):
        ax.scatter([j] * len(s["ratios"]), s["ratios"], color="tab:blue", s=18)
        ax.scatter([j], [s["median"]], color="tab:red", marker="_", s=300)
    if max(max(s["ratios"]) for s in summary) > 3:  # a stalled run (50×) would flatten the rest
        ax.set_yscale("log")
    ax.axhline(GOAL_WORST, color="gray", ls="--", lw=1)
    ax.axhline(1.0, color="black", lw=0.5)
    ax.set_xticks(range(len(summary)), [s["label"] for s in summary], rotation=20, fontsize=8)
    ax.set_ylabel("measured plan / best library")
    ax.set_title("effort='measure', fresh cache per process (dots: runs; red: median)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def replace_section(path: str, text: str) -> None:
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    if BEGIN in doc and END in doc:
        doc = doc[: doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n## Measured planning on a busy machine\n\n" + text + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)


#: the A/B rows (``--ab``): (library solver, batch, n), where a two-thread call wins quietly and
#: stalls under load (pyFFTW 16×4099: 524 µs at 2 threads vs 784 at 1; 1×65537: 1.69 ms quiet,
#: 8.4 ms under load, busy32's runs of 2026-11-27)
#: seconds of calls per sample of the A/B
AB_BLOCK_S = 0.01
AB_ROWS = [("pyfftw", 16, 4099), ("pyfftw", 1, 65537), ("native", 512, 1024), ("scipy", 512, 1024)]


def _shuffled_rounds(runners: list, rounds: int) -> list:
    """Round-robin samples (seconds per call) in an order shuffled every round (seeded), so that no
    leaf always follows the stalled two-thread block (its threads still run for a while after it;
    a rotation would not do: it keeps who follows whom)."""
    samples = [[] for _ in runners]
    rng = random.Random(0)
    for _ in range(rounds):
        for k in rng.sample(range(len(runners)), len(runners)):
            fn, inner = runners[k]
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[k].append((time.perf_counter() - t0) / inner)
    return samples


def ab(args) -> dict:
    """The adaptive leaf against the fixed one- and two-thread leaves, in this process, quiet and
    then with a spinner process holding a core: per row and condition each leaf's median and mean
    µs per call over short rounds, their order shuffled (a block of ~10 ms of calls a sample), the
    adaptive leaf's stalls and the share of its calls that ran two threads. T1 is the one-thread
    leaf's lower quartile timed here first."""
    import torch

    from trnplan.kernels.hostlib import installed

    torch.set_num_threads(2)
    out = []
    for solver, batch, n in AB_ROWS[: args.rows]:
        if solver in ("pyfftw", "scipy") and installed(solver) is None:
            continue
        out.append(_ab_row(solver, batch, n, args.ab_rounds))
    return {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "loadavg": os.getloadavg(), "rows": out}


def _ab_row(solver: str, batch: int, n: int, rounds: int) -> dict:
    """One row of :func:`ab`."""
    import numpy as np
    import torch

    from trnplan import plan_many

    x = torch.from_numpy((np.random.default_rng(0).standard_normal((batch, n, 2)) @ [1, 1j]).astype(np.complex64))

    def plan(extra):
        return plan_many((n,), batch=batch, strategy=f"({solver} {n}{extra})")

    fixed = {"1": plan(" threads=1"), "2": plan(" threads=2")}
    t1 = statistics.quantiles(_shuffled_rounds([(lambda: fixed["1"].execute(x), 1)], 30)[0], n=4)[0]
    leaves = {**fixed, "adaptive": plan(f" threads=2 adapt={max(1, round(t1 * 1e6))}")}
    same = torch.equal(torch.view_as_real(fixed["1"].execute(x)), torch.view_as_real(fixed["2"].execute(x)))
    row = {"row": f"{solver} {batch}×{n}", "t1_us": t1 * 1e6, "bitwise_identical": same}
    leaf, twos = leaves["adaptive"]._native, []

    def adaptive_call():
        twos.append(leaf.threads_now)
        return leaves["adaptive"].execute(x)

    # a sample is a block of calls (~10 ms): the leaf's state machine runs as in a loop, and a
    # stalled two-thread block's spinning OpenMP/FFTW threads touch one neighbour sample, not each
    inner = max(1, round(AB_BLOCK_S / t1))
    runners = [(lambda p=p: p.execute(x), inner) for p in fixed.values()] + [(adaptive_call, inner)]
    for cond in ("quiet", "loaded"):
        spin = subprocess.Popen([sys.executable, "-S", "-c", SPINNER]) if cond == "loaded" else None
        try:
            if spin is not None:
                time.sleep(0.05)
            stalls0 = leaf.stalls
            twos.clear()
            samples = _shuffled_rounds(runners, rounds)
        finally:
            if spin is not None:
                spin.kill()
                spin.wait()
        med = {k: statistics.median(s) * 1e6 for k, s in zip(leaves, samples)}
        mean = {k: statistics.fmean(s) * 1e6 for k, s in zip(leaves, samples)}
        row[cond] = {**{f"{k}_us": v for k, v in med.items()}, **{f"{k}_mean_us": v for k, v in mean.items()},
                     "stalls": leaf.stalls - stalls0, "two_thread_share": twos.count(2) / len(twos),
                     "adaptive_vs_best_fixed": med["adaptive"] / min(med["1"], med["2"]),
                     "adaptive_vs_best_fixed_mean": mean["adaptive"] / min(mean["1"], mean["2"])}
        c = row[cond]
        print(f"{row['row']} {cond}: T1 {t1 * 1e6:.0f} µs, identical {same}; median/mean µs 1t {c['1_us']:.0f}/"
              f"{c['1_mean_us']:.0f} 2t {c['2_us']:.0f}/{c['2_mean_us']:.0f} adaptive {c['adaptive_us']:.0f}/"
              f"{c['adaptive_mean_us']:.0f} ({c['adaptive_vs_best_fixed']:.2f}×/{c['adaptive_vs_best_fixed_mean']:.2f}× "
              f"the best fixed; {c['two_thread_share']:.0%} of calls on 2 threads, {c['stalls']} stalls)", flush=True)
    return row


def queue_ab(args) -> dict:
    """The adaptive leaf with the run queue against the same leaf on the time-only rules, in one
    process, while a spinning process is stopped and continued at random (seeded, 50-800 ms a
    phase): per row both leaves and the fixed one- and two-thread plans in shuffled rounds of
    ~10 ms blocks; each leaf's median per-round ratio to the fixed two- and one-thread plans, its
    mean time over the better fixed plan's (what a loop costs, stalls included), and its stalls,
    back-offs ended early by the run queue and slow calls it took for hiccups."""
    import signal

    import torch

    from trnplan.kernels.hostlib import installed
    from trnplan.kernels.hostlib.occupancy import occupancy
    from trnplan.kernels.hostlib.threads import adaptive

    if occupancy() is None:
        raise SystemExit("--queue-ab: this machine's run queue does not describe this process's cores (or "
                         "TRNPLAN_RUN_QUEUE=0)")
    torch.set_num_threads(2)
    out = []
    spin = subprocess.Popen([sys.executable, "-S", "-c", SPINNER])
    os.kill(spin.pid, signal.SIGSTOP)
    try:
        for solver, batch, n in AB_ROWS[: args.rows]:
            if solver in ("pyfftw", "scipy") and installed(solver) is None:
                continue
            out.append(_queue_row(solver, batch, n, args.ab_rounds, spin, adaptive, occupancy().room))
    finally:
        spin.kill()
        spin.wait()
    return {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "loadavg": os.getloadavg(), "rows": out}


def _queue_row(solver, batch, n, rounds, spin, adaptive, room) -> dict:
    """One row of :func:`queue_ab` (``rounds`` × 4 shuffled rounds, the spinner toggled meanwhile)."""
    import signal

    import numpy as np
    import torch

    from trnplan import plan_many

    x = torch.from_numpy((np.random.default_rng(0).standard_normal((batch, n, 2)) @ [1, 1j]).astype(np.complex64))
    fixed = {k: plan_many((n,), batch=batch, strategy=f"({solver} {n} threads={k})") for k in (1, 2)}
    one, two = (lambda: fixed[1].execute(x)), (lambda: fixed[2].execute(x))
    t1 = statistics.quantiles(_shuffled_rounds([(one, 1)], 30)[0], n=4)[0]
    leaves = {"run queue": adaptive(one, two, t1, 2, room=room), "time only": adaptive(one, two, t1, 2, room=None)}
    inner = max(1, round(AB_BLOCK_S / t1))
    runners = [(one, inner), (two, inner)] + [(leaf, inner) for leaf in leaves.values()]
    stop = threading.Event()

    def toggle():
        r, on = random.Random(1), False
        while not stop.wait(r.uniform(0.05, 0.8)):
            on = not on
            os.kill(spin.pid, signal.SIGCONT if on else signal.SIGSTOP)
        os.kill(spin.pid, signal.SIGSTOP)

    thread = threading.Thread(target=toggle, daemon=True)
    thread.start()
    try:
        samples = _shuffled_rounds(runners, 4 * rounds)
    finally:
        stop.set()
        thread.join()
    s1, s2 = samples[0], samples[1]
    row = {"row": f"{solver} {batch}×{n}", "t1_us": t1 * 1e6}
    for (name, leaf), s in zip(leaves.items(), samples[2:]):
        row[name] = {"vs_two": statistics.median(a / b for a, b in zip(s, s2)),
                     "vs_one": statistics.median(a / b for a, b in zip(s, s1)),
                     "mean_vs_better": statistics.fmean(s) / min(statistics.fmean(s1), statistics.fmean(s2)),
                     "stalls": leaf.stalls, "early": leaf.early, "blips": leaf.blips}
        c = row[name]
        print(f"{row['row']} {name:9s}: per round {c['vs_two']:.2f}× two threads, {c['vs_one']:.2f}× one; mean "
              f"{c['mean_vs_better']:.2f}× the better fixed count; {c['stalls']} stalls, {c['early']} back-offs "
              f"ended early, {c['blips']} hiccups", flush=True)
    return row


def measure_runs(args) -> tuple:
    """The runs, one fresh-cache process after another, written to ``args.out``: (summary, meta)."""
    runs, expected = [], 60.0
    for i in range(args.runs):
        print(f"run {i + 1}/{args.runs}", file=sys.stderr, flush=True)
        runs.append(one_run(args, i, expected))
        expected = runs[-1]["wall_s"]
    summary = summarise(runs)
    meta = {"runs": args.runs, "threads": args.threads, "load": args.load, "malloc_env": args.malloc_env,
            "null": args.null,
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "loadavg": os.getloadavg()}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "runs": runs, "summary": summary}, f, indent=1)
    return summary, meta


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cell-seconds", type=float, default=0.2, help="timed seconds per column of a row")
    p.add_argument("--rounds", type=int, default=30,
                   help="the least number of round-robin rounds per row (many short rounds: a load burst hits all columns)")
    p.add_argument("--no-load", dest="load", action="store_false")
    p.add_argument("--malloc-env", action="store_true",
                   help="fix glibc's malloc mmap and trim thresholds in the children (MALLOC_ENV)")
    p.add_argument("--rows", type=int, default=len(GRID), help="the first ROWS rows of the grid (a smoke run)")
    p.add_argument("--null", action="store_true",
                   help="also time every library column a second time (a call built anew, the same rounds) and "
                        "report the null: the statistic for the best library's second call (the ratio's floor)")
    p.add_argument("--out", default="bench/out/measure_busy.json")
    p.add_argument("--markdown")
    p.add_argument("--plot")
    p.add_argument("--replot", metavar="JSON", help="render the table and plot of an earlier --out file; run nothing")
    p.add_argument("--ab", action="store_true",
                   help="instead: the adaptive leaf vs fixed 1- and 2-thread leaves, quiet and with a spinner, in "
                        "this process (AB_ROWS; --rows limits them), JSON to --out")
    p.add_argument("--ab-rounds", type=int, default=30, help="round-robin rounds per condition of --ab")
    p.add_argument("--queue-ab", action="store_true",
                   help="instead: the adaptive leaf with the run queue vs on the time-only rules, under a load "
                        "toggled at random, in this process (AB_ROWS; --rows limits them), JSON to --out")
    p.add_argument("--child-json", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child_json:
        return child(args)
    if args.ab or args.queue_ab:
        result = queue_ab(args) if args.queue_ab else ab(args)
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
        return 0
    if args.replot:
        with open(args.replot, encoding="utf-8") as f:
            saved = json.load(f)
        summary, meta = saved["summary"], saved["meta"]
    else:
        summary, meta = measure_runs(args)
    text = markdown(summary, meta)
    print(text)
    if args.markdown:
        replace_section(args.markdown, text)
    if args.plot:
        plot(summary, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
