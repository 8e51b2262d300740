"""Precompiling from manifests, the `trnplan precompile` and `trnplan cache` commands, bundles."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import exported_bundle_meta
from support import BAR, random_complex, reference, rel_l2

import trnplan
from trnplan.cache import CacheWarning, PlanCache
from trnplan.cache.bundle import import_bundle
from trnplan.tools.cli import main
from trnplan.tools.precompile import ManifestError, load_manifest, precompile, summary_table

REPO = Path(__file__).resolve().parents[1]

MANIFEST = """
[defaults]
compile = "eager"

[[plan]]
shape = [256]
batch = 4

[[plan]]
shape = [256]
batch = 4
inverse = true
norm = "ortho"

[[plan]]
shape = 97
batch = 2
strategy = "bluestein"

[[plan]]
shape = [100]
batch = 3
precision = "fp64"
dtype = "complex128"
"""


def write(tmp_path, text, name="plans.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shipped_example_manifest_is_valid():
    entries = load_manifest(REPO / "examples" / "plans.toml")
    assert len(entries) == 5 and all(e["device"] == "cpu" for e in entries)


@pytest.mark.parametrize("text,match", [
    ("[[plan]]\nshape = [64]\nbatchsize = 2\n", r"\[\[plan\]\] #1: unknown key 'batchsize'; allowed keys: shape, batch"),
    ("[[plan]]\nbatch = 2\n", r"'shape' is required"),
    ("[[plan]]\nshape = [64]\nbatch = \"two\"\n", r"batch must be int, got 'two'"),
    ("[[plan]]\nshape = [64]\ninverse = 1\n", r"inverse must be bool, got 1"),
    ("[[plan]]\nshape = [64]\nbatch = true\n", r"batch must be int, got True"),
    ("[[plan]]\nshape = [64]\ndtype = \"float32\"\n", r"dtype must be 'complex64' or 'complex128'"),
    ("[defaults]\nfoo = 1\n[[plan]]\nshape = [64]\n", r"\[defaults\]: unknown key 'foo'"),
    ("[plans]\nshape = [64]\n", r"unknown top-level table\(s\) \['plans'\]"),
    ("title = 'x'\n", r"unknown top-level"),
    ("", r"lists no \[\[plan\]\] entries"),
    ("[[plan]\nshape = 1", r"is not valid TOML"),
])
def test_manifest_errors_name_the_entry_and_the_fix(tmp_path, text, match):
    with pytest.raises(ManifestError, match=match):
        load_manifest(write(tmp_path, text))


def test_missing_manifest_is_a_clear_error(tmp_path):
    with pytest.raises(ManifestError, match="cannot read manifest"):
        load_manifest(tmp_path / "absent.toml")


@pytest.mark.slow
def test_precompile_then_wisdom_only_in_a_fresh_process(tmp_path):
    cache_dir = tmp_path / "cache"
    results = precompile(write(tmp_path, MANIFEST), cache=PlanCache(cache_dir), progress=False)
    assert [r.ok for r in results] == [True] * 4
    assert results[2].tree.startswith("(bluestein 97")
    assert len(PlanCache(cache_dir).records()) == 4
    code = (
        "import numpy as np, torch, trnplan\n"
        "p = trnplan.plan_many(97, batch=2, strategy='bluestein', compile='eager')\n"
        "x = np.random.default_rng(0).standard_normal((2, 97)) + 0j\n"
        "y = p(torch.from_numpy(x).to(torch.complex64)).numpy()\n"
        "err = np.linalg.norm(y - np.fft.fft(x)) / np.linalg.norm(np.fft.fft(x))\n"
        "print(p.provenance.origin, err)\n"
    )
    env = {"TRNPLAN_CACHE_DIR": str(cache_dir), "TRNPLAN_WISDOM_ONLY": "1", "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    origin, err = out.stdout.split()[-3:-1], float(out.stdout.split()[-1])
    assert " ".join(origin) == "wisdom hit" and err <= BAR["fp32"]


def test_precompile_reports_failures_and_keeps_going(tmp_path):
    entries = [{"shape": [64], "batch": 2}, {"shape": [97], "strategy": "stockham"}, {"shape": [32]}]
    results = precompile(entries, cache=PlanCache(tmp_path / "c"), progress=False)
    assert [r.ok for r in results] == [True, False, True]
    assert "PlanningError" in results[1].error and "not a power of two" in results[1].error


def test_precompile_reports_an_artifact_asked_for_and_not_had(tmp_path, monkeypatch):
    """compile='aot' whose build fails: the plan is stored (it runs eagerly), but the entry is a
    failure, so a container build does not ship eager plans where artifacts were asked for."""
    from trnplan.backends import get_backend

    def failing_build(module, example, mode):
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setattr(get_backend("cpu"), "build_artifact", failing_build)
    cache = PlanCache(tmp_path / "c")
    with pytest.warns(CacheWarning, match="could not build the aot artifact"):
        results = precompile([{"shape": [64], "batch": 2, "compile": "aot"}, {"shape": [32], "batch": 2}],
                             cache=cache, progress=False)
    assert [r.ok for r in results] == [False, True]
    assert results[0].compile_mode == "eager"
    assert ("compile='aot' asked for, but the plan is stored without an artifact and runs eagerly: aot failed "
            "to build (RuntimeError: no C++ compiler found)") in results[0].error
    assert len(PlanCache(tmp_path / "c").records()) == 2
    assert "FAILED: compile='aot' asked for" in summary_table(results)


@pytest.mark.slow
def test_precompile_with_two_jobs(tmp_path):
    entries = [{"shape": [n], "batch": 2} for n in (16, 32, 64, 128)]
    results = precompile(entries, cache=PlanCache(tmp_path / "c"), jobs=2, progress=False)
    assert [r.index for r in results] == [0, 1, 2, 3] and all(r.ok for r in results)
    assert len(PlanCache(tmp_path / "c").records()) == 4


def test_precompile_cli_prints_a_summary_and_exit_code(tmp_path, capsys):
    cache_dir = str(tmp_path / "cache")
    assert main(["precompile", str(write(tmp_path, MANIFEST)), "--cache-dir", cache_dir]) == 0
    captured = capsys.readouterr()
    assert "4 of 4 plan(s) stored" in captured.out and "(bluestein 97" in captured.out
    assert "[#" not in captured.err  # standard error is no terminal here: no progress bar
    bad = write(tmp_path, '[[plan]]\nshape = [97]\nstrategy = "stockham"\n', "bad.toml")
    assert main(["precompile", str(bad), "--cache-dir", cache_dir, "--quiet"]) == 1
    assert "FAILED" in capsys.readouterr().out
    assert main(["precompile", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read manifest" in capsys.readouterr().err


def test_cache_cli_info_list_export_import_clear(tmp_path, capsys):
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    precompile(write(tmp_path, MANIFEST), cache=PlanCache(src), progress=False)
    assert main(["cache", "info", "--cache-dir", src]) == 0
    info = capsys.readouterr().out
    assert "wisdom_entries         4" in info and "compile_seconds_saved" in info
    assert main(["cache", "list", "--cache-dir", src]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 4
    bundle = str(tmp_path / "plans.zip")
    assert main(["cache", "export", bundle, "--cache-dir", src]) == 0
    assert "exported 4 plan(s)" in capsys.readouterr().out
    assert main(["cache", "import", bundle, "--cache-dir", dst]) == 0
    assert "imported 4 plan(s)" in capsys.readouterr().out
    plan = trnplan.plan_many(256, batch=4, compile="eager", effort="wisdom_only", cache=PlanCache(dst))
    assert plan.provenance.origin == "wisdom hit"
    x = random_complex((4, 256))
    assert rel_l2(plan(torch.from_numpy(x).to(torch.complex64)), reference(x, False)) <= BAR["fp32"]
    assert main(["cache", "clear", "--cache-dir", dst]) == 0
    assert PlanCache(dst).records() == []
    assert main(["cache", "export", "--cache-dir", dst]) == 2
    assert "needs a FILE" in capsys.readouterr().err


def test_import_rejects_tampered_entries(tmp_path):
    # plant a fake artifact claim with a wrong sha256 and a garbage record into a bundle
    bundle, meta = exported_bundle_meta(tmp_path)
    good = meta["entries"][0]
    forged = json.loads(json.dumps(good))
    forged["key"] = good["key"] + "x"
    forged["record"]["artifacts"] = {"aot": {"key": "artifact:x:y:aot", "sha256": "0" * 64}}
    forged["files"] = {"aot": "artifacts/0.bin"}
    meta["entries"] += [forged, {"key": "wisdom:junk", "record": {"format": 99}}]
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr("bundle.json", json.dumps(meta))
        zf.writestr("artifacts/0.bin", b"not the artifact")
    report = import_bundle(PlanCache(tmp_path / "dst"), bundle, trust_artifacts=True)
    assert report.wisdom == 1 and len(report.rejected) == 2
    reasons = " ".join(why for _, why in report.rejected)
    assert "sha256 does not match" in reasons and "not a valid wisdom record" in reasons
    with pytest.raises(ValueError, match="not a trnplan cache bundle"):
        with zipfile.ZipFile(tmp_path / "empty.zip", "w") as zf:
            zf.writestr("other.txt", "x")
        import_bundle(PlanCache(tmp_path / "dst"), tmp_path / "empty.zip")


def test_precompile_python_api_validates_entries(tmp_path):
    with pytest.raises(ManifestError, match=r"problem #1: unknown key 'size'"):
        precompile([{"size": 64}], cache=PlanCache(tmp_path / "c"), progress=False)
    with pytest.raises(ValueError, match="jobs must be a positive int"):
        precompile([{"shape": [64]}], cache=PlanCache(tmp_path / "c"), jobs=0, progress=False)


@pytest.mark.slow
def test_three_processes_precompiling_one_manifest_at_once(tmp_path):
    manifest = write(tmp_path, MANIFEST)
    cache_dir = tmp_path / "shared"
    cmd = [sys.executable, "-m", "trnplan", "precompile", str(manifest), "--cache-dir", str(cache_dir), "--quiet"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert all("4 of 4 plan(s) stored" in out for out, _ in outs)
    records = PlanCache(cache_dir).records()
    assert len(records) == 4  # one consistent entry per problem, whoever won
    plan = trnplan.plan_many(256, batch=4, inverse=True, norm="ortho", compile="eager", effort="wisdom_only",
                             cache=PlanCache(cache_dir))
    x = random_complex((4, 256))
    assert rel_l2(plan(torch.from_numpy(x).to(torch.complex64)), reference(x, True, "ortho")) <= BAR["fp32"]


def test_cache_size_is_bounded_by_eviction(tmp_path):
    cache = PlanCache(tmp_path / "small", size_limit=200_000)
    for i in range(40):
        cache.add_artifact(f"artifact:{i}:x:aot", bytes([i]) * 50_000)  # 2 MB offered in all
    volume = cache.stats()["bytes"]
    assert volume < 600_000, volume  # culled back near the 200 kB limit (diskcache culls in steps)
    assert cache.stats()["artifact_entries"] < 40


def _precompiled(tmp_path):
    src = tmp_path / "ro"
    precompile([{"shape": [256], "batch": 4}], cache=PlanCache(src), progress=False)
    trnplan.clear_plan_cache()  # the in-process LRU would answer before the disk cache
    return src


def test_cache_that_cannot_be_opened_for_writing_is_read_directly(tmp_path, monkeypatch):
    """A read-only image: diskcache cannot open it (it writes on open), the plans still load."""
    import sqlite3

    import diskcache

    src = _precompiled(tmp_path)

    def refuse(*args, **kwargs):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(diskcache, "Cache", refuse)
    cache = PlanCache(src)
    plan = trnplan.plan_many(256, batch=4, effort="wisdom_only", cache=cache)
    assert plan.provenance.origin == "wisdom hit"
    x = random_complex((4, 256))
    assert rel_l2(plan(torch.from_numpy(x).to(torch.complex64)), reference(x, False)) <= BAR["fp32"]
    with pytest.warns(trnplan.cache.CacheWarning, match="read-only .*readonly database.*; new plans are not stored"):
        trnplan.plan_many(512, cache=cache)  # a miss: planned, not stored
    assert len(cache.records()) == 1


@pytest.mark.slow
def test_real_read_only_mount(tmp_path):
    """The same on a read-only bind mount, where the kernel refuses every write (needs root)."""
    src = _precompiled(tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "--bind", str(src), str(mnt)], check=False, capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (not root, or no mount capability)")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(mnt)], check=False, capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        code = ("import torch, trnplan\n"
                "p = trnplan.plan_many(256, batch=4)\n"
                "print(p.provenance.origin)\n")
        env = {"TRNPLAN_CACHE_DIR": str(mnt), "TRNPLAN_WISDOM_ONLY": "1", "PATH": ""}
        out = subprocess.run([sys.executable, "-c", code], env=env, check=False, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "wisdom hit"
    finally:
        subprocess.run(["umount", str(mnt)], check=False, capture_output=True)


# ---------------------------------------------------------------- training under wisdom_only: the adjoint plans


def _train_step(kind, n, batch, seed=3):
    """One forward + backward of L = Re(Σ conj(c)·plan(x)); returns (c, x.grad, plan)."""
    rng = np.random.default_rng(seed)
    if kind == "r2c":
        x = torch.from_numpy(rng.standard_normal((batch, n))).to(torch.float32).requires_grad_()
        m = n // 2 + 1
    else:
        x = torch.from_numpy(random_complex((batch, n), seed)).to(torch.complex64).requires_grad_()
        m = n
    c = random_complex((batch, m), seed + 1)
    plan = trnplan.plan_many(n, batch, kind=kind)
    y = plan.execute(x)
    (y * torch.from_numpy(c).to(torch.complex64).conj()).real.sum().backward()
    return c, x.grad, plan


def _grad_reference(kind, n, c):
    """∂L/∂Re x + i ∂L/∂Im x in float64: Fᴴ c, with F the forward DFT matrix (c2c); its real part,
    with F's first n//2+1 rows, for r2c."""
    k = np.arange(c.shape[-1])[:, None]
    f = np.exp(-2j * np.pi * ((k * np.arange(n)[None, :]) % n) / n)
    g = c @ f.conj()
    return g.real if kind == "r2c" else g


@pytest.mark.parametrize("kind", ["c2c", "r2c"])
def test_backward_key_lets_training_run_under_wisdom_only(kind, tmp_path, monkeypatch):
    cache_dir = tmp_path / "prod"
    results = precompile([{"shape": [64], "batch": 3, "kind": kind, "backward": True}], cache=cache_dir,
                         progress=False)
    assert [r.ok for r in results] == [True, True]  # the forward entry and its adjoint
    adjoint_kind = {"c2c": "c2c", "r2c": "c2r"}[kind]
    assert results[1].problem.startswith(f"{adjoint_kind} inverse (64,) × batch 3")
    assert "norm forward" in results[1].problem  # the adjoint of the unscaled forward: the unscaled inverse
    monkeypatch.setenv("TRNPLAN_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("TRNPLAN_WISDOM_ONLY", "1")  # production: nothing may be planned
    trnplan.clear_plan_cache()
    c, grad, plan = _train_step(kind, 64, 3)
    assert plan.provenance.origin == "wisdom hit" and plan.adjoint().provenance.origin == "wisdom hit"
    assert rel_l2(grad, _grad_reference(kind, 64, c)) <= BAR["fp32"]


def test_without_the_backward_key_the_miss_names_the_backward_pass(tmp_path, monkeypatch):
    cache_dir = tmp_path / "prod"
    assert all(r.ok for r in precompile([{"shape": [64], "batch": 3}], cache=cache_dir, progress=False))
    monkeypatch.setenv("TRNPLAN_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("TRNPLAN_WISDOM_ONLY", "1")
    trnplan.clear_plan_cache()
    with pytest.raises(trnplan.WisdomMiss, match=r"backward pass \(autograd\).*backward = true"):
        _train_step("c2c", 64, 3)


def test_backward_key_in_a_toml_manifest(tmp_path):
    manifest = tmp_path / "m.toml"
    manifest.write_text('[defaults]\nbackward = true\n\n[[plan]]\nshape = [32, 16]\nkind = "c2r"\nnorm = "ortho"\n')
    results = precompile(manifest, cache=tmp_path / "c", progress=False)
    assert [r.ok for r in results] == [True, True]
    cache = PlanCache(tmp_path / "c")
    kinds = sorted((rec["problem"]["kind"], rec["problem"]["norm"]) for _, rec in cache.records())
    assert kinds == [("c2r", "ortho"), ("r2c", "ortho")]


# ---------------------------------------------------------------- problems on the command line (fftw-wisdom style)


@pytest.mark.parametrize("text, entry", [
    ("4096", {"kind": "c2c", "shape": [4096]}),
    ("c2c:4096@64", {"kind": "c2c", "shape": [4096], "batch": 64}),
    ("c2c-inv:1024", {"kind": "c2c", "inverse": True, "shape": [1024]}),
    ("r2c:256x256@8", {"kind": "r2c", "shape": [256, 256], "batch": 8}),
    ("c2r:32x64x64@2", {"kind": "c2r", "shape": [32, 64, 64], "batch": 2}),
])
def test_parse_problem(text, entry):
    from trnplan.tools.precompile import parse_problem

    assert parse_problem(text) == entry


@pytest.mark.parametrize("text", ["c2q:64", "c2c:64@0", "c2c:0x4", "c2c:64@x", "c2c:", "r2c:64@", "abc"])
def test_parse_problem_refuses_with_the_syntax(text):
    from trnplan.tools.precompile import ManifestError, parse_problem

    with pytest.raises(ManifestError, match=r"neither a manifest file nor a problem \[KIND:\]SHAPE\[@BATCH\]"):
        parse_problem(text)


def test_precompile_problems_on_the_command_line(tmp_path, capsys):
    cache_dir = tmp_path / "c"
    code = main(["precompile", "c2c:64@2", "r2c:16x16@3", "--precision", "fp64", "--norm", "ortho", "--backward",
                 "--cache-dir", str(cache_dir), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "4 of 4 plan(s) stored" in out
    problems = sorted((r["problem"]["kind"], tuple(r["problem"]["shape"]), r["problem"]["batch"], r["problem"]["dtype"],
                       r["problem"]["norm"]) for _, r in PlanCache(cache_dir).records())
    assert problems == [("c2c", (64,), 2, "complex128", "ortho")] * 2 + [("c2r", (16, 16), 3, "complex128", "ortho"),
                                                                         ("r2c", (16, 16), 3, "complex128", "ortho")]
    plan = trnplan.plan_many((16, 16), 3, kind="r2c", dtype=torch.complex128, norm="ortho", effort="wisdom_only",
                             cache=PlanCache(cache_dir))
    assert plan.provenance.origin == "wisdom hit"


def test_precompile_mixes_a_manifest_and_problems(tmp_path, capsys):
    manifest = tmp_path / "m.toml"
    manifest.write_text("[[plan]]\nshape = [32]\nbatch = 2\n")
    code = main(["precompile", str(manifest), "c2c:48", "--cache-dir", str(tmp_path / "c"), "--quiet"])
    assert code == 0 and "2 of 2 plan(s) stored" in capsys.readouterr().out


def test_precompile_help_prints_a_manifest_example(capsys):
    with pytest.raises(SystemExit):
        main(["precompile", "--help"])
    out = capsys.readouterr().out
    for needle in ("[[plan]]", "[defaults]", "backward = true", "c2c:4096@64", "TRNPLAN_WISDOM_ONLY=1"):
        assert needle in out, needle
    assert "examples/" not in out and "docs/" not in out  # nothing the wheel does not ship
