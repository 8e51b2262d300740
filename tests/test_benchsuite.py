"""The benchmark suite (trnplan.tools.benchsuite): structure of its JSON, markdown and docs section.

A tiny grid (two small rows, one thread, one timed call per cell) runs through the real entry
point, table subprocess included. No test asserts a time: only the shape of the outputs and that
every timed trnplan cell was checked against numpy.fft in complex128.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pytest
import torch

import trnplan
from trnplan.tools import benchsuite

ROWS = ("fft-1x256", "rfft-1x1024", "rfftn-3x64x64x64")
CELL_KEYS = {"us", "min_us", "repeats", "status"}
DERIVED_KEYS = {"best_library", "best_library_us", "measure_vs_best", "estimate_vs_best", "regret",
                "overhead_us", "measure_overhead_us", "flagged", "measure_goal", "estimate_goal",
                "estimate_vs_torch", "measure_vs_torch"}


#: the tests of the module-scoped `suite_run` fixture, on one pytest-xdist worker (`make test` runs
#: --dist loadgroup): split over two workers, each ran the fixture, paying its cost twice
ONE_WORKER = pytest.mark.xdist_group("benchsuite_run")


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    docs = out / "doc.md"
    docs.write_text("# Title\n\n<!-- bench-summary:start -->\nOLD SUMMARY\n<!-- bench-summary:end -->\n\nbefore\n\n"
                    "<!-- bench-suite:start -->\nOLD\n<!-- bench-suite:end -->\n\nafter\n")
    args = benchsuite._standalone_parser().parse_args(
        ["--rows", ",".join(ROWS), "--threads", "1", "--cell-seconds", "0", "--min-repeats", "1", "--fit-seconds", "2",
         "--out", str(out), "--docs", str(docs)])
    assert benchsuite.main(args) == 0
    return out, docs


@ONE_WORKER
def test_json_schema(suite_run):
    out, _ = suite_run
    result = json.loads((out / "results.json").read_text())
    m = result["machine"]
    assert {"cpu", "cores", "versions", "torch_threads"} <= set(m)
    assert {"python", "torch", "numpy", "scipy", "pyfftw", "mkl_fft"} <= set(m["versions"])
    assert m["torch_threads"] == {"1": 1}
    assert [t["threads"] for t in result["tables"]] == [1]
    table = result["tables"][0]
    assert [r["id"] for r in table["rows"]] == list(ROWS)
    # the cost model was fitted in the table's process first and scored on its held-out grid
    fit = table["cost_model"]
    assert fit["stored"] and fit["train_points"] > 0 and fit["heldout_points"] > 0
    assert fit["rms_heldout"] >= 0 and fit["rms_default"] >= 0
    expected_cols = {benchsuite.EST, benchsuite.MEAS, *benchsuite.LIBRARIES, benchsuite.PYFFTW_EXECUTE,
                     *(f"forced {n}" for n in trnplan.solver_names())}
    for row in table["rows"]:
        assert set(row["cells"]) == expected_cols
        assert set(row["derived"]) == DERIVED_KEYS
        for col, cell in row["cells"].items():
            if cell["us"] is None:  # not timed: says why (n/a, absent, not available)
                assert cell["status"] in ("n/a", "absent", "not available") and cell["reason"], (col, cell)
            else:
                assert CELL_KEYS <= set(cell) and cell["status"] == "ok"
                assert cell["repeats"] >= 1 and 0 < cell["min_us"] <= cell["us"]
        est = row["cells"][benchsuite.EST]
        assert est["us"] is not None and est["tree"].startswith("(")
        if row["derived"]["best_library"] is not None:
            assert row["derived"]["estimate_vs_best"] > 0


@ONE_WORKER
def test_trnplan_cells_verified_against_numpy(suite_run):
    out, _ = suite_run
    result = json.loads((out / "results.json").read_text())
    assert result["settings"]["error_flag"] == benchsuite.ERROR_FLAG
    for row in result["tables"][0]["rows"]:
        timed = {c: v for c, v in row["cells"].items() if v["us"] is not None
                 and c.startswith(("trnplan", "forced "))}
        assert benchsuite.EST in timed
        for col, cell in timed.items():
            assert 0 <= cell["error"] < 1e-5 and cell["error_flag"] is False, (row["id"], col, cell)
        assert row["derived"]["flagged"] == []


@ONE_WORKER
def test_markdown_table_shape(suite_run):
    out, _ = suite_run
    text = (out / "results.md").read_text()
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| row | trnplan (estimate)"))
    header, sep, *rest = lines[start:]
    body = [ln for ln in rest[: len(ROWS)]]
    ncols = header.count("|")
    assert sep.count("|") == ncols and all(ln.count("|") == ncols for ln in body)
    for name in ("best library", "measure / best", "estimate / torch.fft", "estimate / measure", "overhead µs",
                 "torch.fft", "pyfftw w1", "pyfftw w2"):
        assert f"| {name} |" in header
    assert [ln.split("|")[1].strip() for ln in body] == [benchsuite.ROWS_BY_ID[r].label for r in ROWS]
    assert "forced precision" not in header  # a column with no timed cell is left out of the table
    for goal in ("within 1.05× the best library (≥ 50 µs) or 3 µs of it", "within 1.05× torch.fft",
                 "regret estimate / measure ≤ 1.5", "≤ 1.1", "overhead ≤ 2 µs", "cost model"):
        assert goal in text
    assert ("time_per_size.png" in text)


@ONE_WORKER
def test_docs_section_replaced_rest_kept(suite_run):
    out, docs = suite_run
    text = docs.read_text()
    assert text.startswith("# Title\n\n<!-- bench-summary:start -->\n`trnplan bench` of ")
    assert "<!-- bench-summary:end -->\n\nbefore\n\n<!-- bench-suite:start -->\n" in text
    assert text.endswith("<!-- bench-suite:end -->\n\nafter\n")
    assert "OLD" not in text and (out / "results.md").read_text().rstrip() in text
    summary = text[: text.index("<!-- bench-summary:end -->")]
    assert "1 thread(s):" in summary and "trnplan (measure) within 1.05×" in summary


def test_docs_section_appended_when_absent(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("keep me\n")
    benchsuite.replace_docs_section(str(doc), "NEW TABLE\n")
    head = f"keep me\n\n{benchsuite.DOCS_HEADING}\n\n"
    assert doc.read_text() == head + "<!-- bench-suite:start -->\nNEW TABLE\n<!-- bench-suite:end -->\n"
    benchsuite.replace_docs_section(str(doc), "NEWER")
    assert doc.read_text() == head + "<!-- bench-suite:start -->\nNEWER\n<!-- bench-suite:end -->\n"


def test_plot_skipped_without_matplotlib(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    line = benchsuite.plot({"tables": []}, str(tmp_path / "p.png"))
    assert "skipped" in line and "trnplan[plot]" in line
    assert not (tmp_path / "p.png").exists()


def test_add_parser_wires_bench_subcommand():
    ap = argparse.ArgumentParser(prog="trnplan")
    sub = ap.add_subparsers(dest="command")
    benchsuite.add_parser(sub)
    args = ap.parse_args(["bench", "--quick", "--out", "x"])
    assert args.command == "bench" and args.quick and args.out == "x" and args.docs is None
    with pytest.raises(SystemExit):
        ap.parse_args(["bench", "--rows", "no-such-row"])
    assert ap.parse_args(["bench", "--rows", "planner"]).rows == list(benchsuite.ROW_SETS["planner"])
    assert ap.parse_args(["bench", "--rows", "seed,fft-512x192"]).rows == [*benchsuite.ROW_SETS["seed"], "fft-512x192"]


def test_derive_handles_missing_columns():
    cells = {benchsuite.EST: {"us": 10.0, "overhead_us": 2.0}, benchsuite.MEAS: {"us": None},
             "torch.fft": {"us": 8.0}, "pyfftw w1": {"us": None}, benchsuite.PYFFTW_EXECUTE: {"us": 0.5}}
    d = benchsuite.derive(cells)
    # FFTW's execute-only floor is not a competitor: torch.fft is the best library here
    assert d["best_library"] == "torch.fft" and d["estimate_vs_best"] == pytest.approx(1.25)
    assert d["estimate_vs_torch"] == pytest.approx(1.25) and d["estimate_goal"] is True  # 10 ≤ 8 + 3 µs
    assert d["measure_vs_best"] is None and d["regret"] is None and d["overhead_us"] == 2.0
    assert d["measure_goal"] is None


@pytest.mark.parametrize("us, best, met", [
    (52.4, 50.0, True), (52.6, 50.0, False),  # ≥ 50 µs: within 5 %
    (12.9, 10.0, True), (13.1, 10.0, False),  # below: within 3 µs
    (None, 10.0, None), (10.0, None, None),
])
def test_best_goal_is_the_issues(us, best, met):
    assert benchsuite.meets_best_goal(us, best) is met


def test_best_library_uses_at_most_the_tables_threads():
    cells = {"torch.fft": {"us": 10.0}, "scipy.fft w2": {"us": 6.0}, "pyfftw w1": {"us": 8.0}}
    assert benchsuite.derive(cells, threads=1)["best_library"] == "pyfftw w1"  # w2 uses 2 threads
    assert benchsuite.derive(cells, threads=2)["best_library"] == "scipy.fft w2"


def test_per_round_ratio_pairs_each_library_round_by_round_and_takes_the_worst():
    """A load burst in rounds 2-3 slows every column of those rounds alike and cancels in each
    round's ratio. Against mkl_fft the plan is 1.1× in every round; against torch.fft 0.92× in
    three rounds of five: the result is 1.1, the ratio to the library that is fastest against the
    plan."""
    ours = [11.0, 11.0, 110.0, 110.0, 13.2]
    libs = {"mkl_fft": [10.0, 10.0, 100.0, 100.0, 12.0], "torch.fft": [12.0, 12.0, 120.0, 100.0, 10.0]}
    assert benchsuite.per_round_ratio(ours, libs) == pytest.approx(1.1)
    assert benchsuite.per_round_ratio([30.0, 10.0], {"a": [10.0, 10.0, 10.0]}) == pytest.approx(2.0)  # common rounds
    assert benchsuite.per_round_ratio([], libs) is None and benchsuite.per_round_ratio(ours, {}) is None


def test_null_ratio_scores_the_second_call_of_the_library_the_first_calls_rank_best():
    """The best library is chosen from the first calls alone (mkl_fft: 1.0 against every column,
    torch.fft 1.2 against it); its second call, 1.05× mkl_fft's first in every round, scores
    1.05 however lucky torch.fft's second call was."""
    libs = {"mkl_fft": [10.0, 10.0, 20.0, 10.0], "torch.fft": [12.0, 12.0, 24.0, 12.0]}
    again = {"mkl_fft": [10.5, 10.5, 21.0, 10.5], "torch.fft": [1.0, 1.0, 1.0, 1.0]}
    assert benchsuite.null_ratio(libs, again) == ("mkl_fft", pytest.approx(1.05))
    # only torch.fft has a second call: scored against every first call, its worst is mkl_fft's 0.1
    assert benchsuite.null_ratio(libs, {"torch.fft": again["torch.fft"]}) == ("torch.fft", pytest.approx(0.1))
    assert benchsuite.null_ratio(libs, {}) == (None, None)


def test_run_row_with_null_times_every_library_twice_and_reports_the_floor():
    """run_row(null=True): the second calls are timed (not cells of the row) and the floor is the
    best library's second call, paired with the first calls of the same rounds."""
    before = torch.get_num_threads()
    try:
        rec = benchsuite.run_row(benchsuite.Row("r", "fft", (64,), 4), 1, 0.002, 3, np.random.default_rng(0),
                                 rounds=3, forced=False, one_thread=True, null=True)
    finally:
        torch.set_num_threads(before)
    d = rec["derived"]
    assert not any(c.endswith(benchsuite.AGAIN) for c in rec["cells"])
    assert d["null_library"] in (*benchsuite.LIBRARIES, *benchsuite.ONE_THREAD_LIBRARIES)
    assert d["null_vs_best_per_round"] > 0


def test_one_thread_columns_run_at_one_thread_and_count_as_libraries(monkeypatch):
    """torch.fft w1 and mkl_fft w1 call the library with torch's count at 1 (the caller's count is
    kept), and derive() takes them as competitors."""
    seen = []
    real = torch.fft.fft
    monkeypatch.setattr(torch.fft, "fft", lambda *a, **k: (seen.append(torch.get_num_threads()), real(*a, **k))[1])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.randn(4, 64, dtype=torch.complex64)
        fns = benchsuite._library_fns(benchsuite.Row("r", "fft", (64,), 4), x, 2, one_thread=True)
        assert set(benchsuite.ONE_THREAD_LIBRARIES) <= set(fns)
        fns["torch.fft w1"]()
        fns["torch.fft"]()
        assert seen == [1, 2] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    cells = {"torch.fft": {"us": 10.0}, "torch.fft w1": {"us": 7.0}, "mkl_fft w1": {"us": 8.0}}
    assert benchsuite.derive(cells, threads=2)["best_library"] == "torch.fft w1"


def test_mean_time_ratio_counts_the_stalled_rounds_the_median_leaves_out():
    """A library that stalls in a third of its rounds (15 ms against 650 µs) has the better median
    per-round ratio against a leaf that stays at 1000 µs, and the far worse total."""
    ours = [1000.0] * 9
    stalling = [650.0, 650.0, 15000.0] * 3
    steady = [1100.0] * 9
    assert benchsuite.per_round_ratio(ours, {"stalling": stalling, "steady": steady}) == pytest.approx(1000 / 650)
    assert benchsuite.mean_time_ratio(ours, {"stalling": stalling, "steady": steady}) == pytest.approx(1000 / 1100)
    assert benchsuite.mean_time_ratio([], {"a": [1.0]}) is None and benchsuite.mean_time_ratio([1.0], {}) is None
