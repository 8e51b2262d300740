"""The plan cache as an attack surface and a fault domain (issue 34): value paths outside the
cache, trust of the database and value files, bundles with native code, damaged records,
a damaged database, concurrent calibration writers.

Each test builds the damage a tampered, shared or broken cache would hold, with sqlite3 and
the file system directly, and checks what trnplan does with it: refuse, warn once, forget,
never follow, never crash.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import warnings

import diskcache
import pytest
import torch
from support import BAR, random_complex, reference, rel_l2

import trnplan
from trnplan.backends import get_backend
from trnplan.backends.base import PrecisionProbe
from trnplan.cache import CacheWarning, PlanCache, UntrustedCacheError, fingerprint, fingerprint_digest, records
from trnplan.cache.bundle import UntrustedBundleError, export_bundle, import_bundle
from trnplan.cache.store import ReadOnlyStore
from trnplan.plan import artifact
from trnplan.planner import leafcost
from trnplan.tools.cli import main


def victim_file(tmp_path, name="secret.txt"):
    """A file of the user's outside the cache, in its own folder (diskcache's remove would
    also take the emptied folder)."""
    folder = tmp_path / "home" / "docs"
    folder.mkdir(parents=True)
    target = folder / name
    target.write_text("precious")
    return target


def point_row_at(cache_dir, key, filename, mode=diskcache.core.MODE_TEXT):
    """Rewrite the row of ``key`` so that its value lives in the file ``filename`` (as a
    tampered database would)."""
    con = sqlite3.connect(cache_dir / "cache.db")
    with con:
        n = con.execute("UPDATE Cache SET mode = ?, filename = ?, value = NULL WHERE key = ?",
                        (mode, str(filename), key)).rowcount
    con.close()
    assert n == 1


# ---------------------------------------------------------------------- item 3: value paths
def outside_name(form, target, cache_dir) -> str:
    """``target`` named absolutely, or relative to the cache (``../home/docs/secret.txt``)."""
    return str(target) if form == "absolute" else os.path.relpath(target, cache_dir)


@pytest.mark.parametrize("form", ["absolute", "dotdot"])
@pytest.mark.parametrize("mode", [diskcache.core.MODE_TEXT, diskcache.core.MODE_BINARY])
def test_value_path_outside_the_cache_is_never_read_nor_deleted(tmp_path, form, mode):
    target = victim_file(tmp_path)
    cache = PlanCache(tmp_path / "c")
    plan = trnplan.plan_many(64, batch=2, cache=cache)
    key = plan.provenance.wisdom_key
    cache.set_record("probe:x:cpu", {"a": 1})
    cache.close()
    name = outside_name(form, target, cache.path)
    point_row_at(cache.path, key, name, mode)
    point_row_at(cache.path, "probe:x:cpu", name, mode)
    trnplan.clear_plan_cache()
    cache = PlanCache(tmp_path / "c")
    with pytest.warns(CacheWarning, match="lies outside the cache directory"):
        again = trnplan.plan_many(64, batch=2, cache=cache)  # reads, forgets, re-plans
    assert again.provenance.origin == "planned now"
    with pytest.warns(CacheWarning, match="lies outside the cache directory"):
        assert cache.get_record("probe:x:cpu") is None
    assert target.read_text() == "precious"
    # and through every command that walks or empties the store
    cache.close()
    point_row_at(cache.path, key, name, mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        assert main(["cache", "list", "--cache-dir", str(cache.path)]) == 0
        assert main(["cache", "clear", "--cache-dir", str(cache.path)]) == 0
    assert target.read_text() == "precious" and target.parent.is_dir()


def test_value_path_through_a_symlinked_folder_is_refused(tmp_path):
    target = victim_file(tmp_path)
    cache = PlanCache(tmp_path / "c")
    cache.set_record("probe:x:cpu", {"a": 1})
    cache.close()
    (cache.path / "ab").symlink_to(target.parent)
    point_row_at(cache.path, "probe:x:cpu", "ab/secret.txt")
    cache = PlanCache(tmp_path / "c")
    with pytest.warns(CacheWarning, match="lies outside the cache directory"):
        assert cache.get_record("probe:x:cpu") is None
    assert cache.keys("probe:") == [] and target.read_text() == "precious"


def test_read_only_store_refuses_value_paths_outside(tmp_path):
    target = victim_file(tmp_path)
    cache = PlanCache(tmp_path / "c")
    cache.set_record("probe:x:cpu", {"a": 1})
    cache.close()
    point_row_at(cache.path, "probe:x:cpu", target)
    reader = ReadOnlyStore(cache.path)
    with pytest.raises(Exception, match="lies outside the cache directory"):
        reader.get("probe:x:cpu")
    reader.close()


def test_large_values_inside_the_cache_still_round_trip_and_are_removed(tmp_path):
    """The refusal leaves diskcache's own value files (``ab/cd/<hex>.val``) working."""
    cache = PlanCache(tmp_path / "c")
    big = os.urandom(100_000)  # over diskcache's 32 KiB min_file_size: stored in a file
    cache.add_artifact("artifact:a:b:aot", big)
    files = [p for p in cache.path.rglob("*.val")]
    assert len(files) == 1
    assert cache.get_artifact("artifact:a:b:aot", hashlib.sha256(big).hexdigest()) == big
    cache.forget("artifact:a:b:aot")
    assert not files[0].exists() and not files[0].parent.exists()
    assert (cache.path / "cache.db").is_file()


# ---------------------------------------------------------------------- item 4: trust of every file
def _filled_cache(tmp_path) -> PlanCache:
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(64, batch=2, cache=cache)
    cache.add_artifact("artifact:a:b:aot", os.urandom(100_000))  # a value file under ab/cd/
    cache.path.chmod(0o755)
    return cache


def _value_file(cache: PlanCache):
    (val,) = cache.path.rglob("*.val")
    return val


@pytest.mark.parametrize("what", ["cache.db", "cache.db-wal", "cache.db-shm", "value file", "value folder"])
@pytest.mark.parametrize("how", ["world", "group", "owner"])
def test_trust_check_covers_the_database_and_value_files(tmp_path, what, how):
    """A 0755 directory is not enough: under umask 000 the database and value files are
    world-writable, and whoever can write them chooses the artifact's bytes and sha256."""
    cache = _filled_cache(tmp_path)
    cache.check_trusted()
    val = _value_file(cache)
    target = {"value file": val, "value folder": val.parent}.get(what, cache.path / what)
    if not target.exists():  # diskcache keeps the WAL files while a connection is open
        target.write_bytes(b"")
    if how == "owner":
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(target, 4321, -1)
    else:
        target.chmod(target.stat().st_mode | (0o002 if how == "world" else 0o020))
    name = str(target.relative_to(cache.path))
    who = {"world": "other users", "group": "its group", "owner": "uid 4321"}[how]
    with pytest.raises(UntrustedCacheError, match=f"{name} can be written by {who}.*TRNPLAN_TRUST_CACHE=1"):
        cache.check_trusted()


def test_wisdom_from_an_untrusted_cache_warns_once(tmp_path):
    cache = _filled_cache(tmp_path)
    (cache.path / "cache.db").chmod(0o666)
    trnplan.clear_plan_cache()
    other = PlanCache(cache.path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            trnplan.clear_plan_cache()
            plan = trnplan.plan_many(64, batch=2, cache=other)
            assert plan.provenance.origin == "wisdom hit"
    untrusted = [w for w in caught if "cache.db can be written by other users" in str(w.message)]
    assert len(untrusted) == 1 and issubclass(untrusted[0].category, CacheWarning)
    assert "its artifacts are refused" in str(untrusted[0].message)


# ---------------------------------------------------------------------- item 5: artifacts are native code
def _bundle_with_a_broken_artifact(tmp_path, monkeypatch):
    """A bundle whose one plan names an AOT artifact that matches its sha256 and does not load
    (a stand-in for the compiler returns bytes that are no package: no real compile is needed)."""
    monkeypatch.setenv("TRNPLAN_AOT_LOAD_CHECK", "0")
    backend = type(get_backend("cpu"))
    monkeypatch.setattr(backend, "build_artifact", lambda self, module, example, mode: (b"not a package", {}))
    src = PlanCache(tmp_path / "src")
    with pytest.warns(CacheWarning, match="did not load .*running .* eagerly"):
        plan = trnplan.plan_many(64, batch=4, compile="aot", cache=src)
    assert plan.provenance.artifact is None and "did not load" in plan.provenance.artifact_error
    akey = plan.provenance.artifact_key
    assert src.keys("artifact:") == []  # the broken bytes were forgotten
    monkeypatch.undo()
    monkeypatch.setenv("TRNPLAN_AOT_LOAD_CHECK", "0")
    data = b"\x7fELF not really a shared library"
    src.add_artifact(akey, data)
    (key, record), = src.records()
    src.update_wisdom(key, {**record, "artifacts": {"aot": {"key": akey, "sha256": hashlib.sha256(data).hexdigest(),
                                                            "bytes": len(data), "compile_s": 1.0}}})
    bundle = tmp_path / "b.zip"
    assert export_bundle(src, bundle) == {"wisdom": 1, "artifacts": 1, "compiled": 0, "compiled_missing": []}
    return bundle, akey


def test_bundle_artifacts_need_trust_and_a_broken_one_runs_eagerly(tmp_path, monkeypatch, capsys):
    bundle, akey = _bundle_with_a_broken_artifact(tmp_path, monkeypatch)
    dst = PlanCache(tmp_path / "dst")
    with pytest.raises(UntrustedBundleError, match=r"holds compiled artifacts \(1 aot for cpu\): native code.*"
                                                   r"--trust-artifacts.*--plans-only.*nothing was imported"):
        import_bundle(dst, bundle)
    assert dst.keys() == []
    assert main(["cache", "import", str(bundle), "--cache-dir", str(dst.path)]) == 2
    assert "native code" in capsys.readouterr().err and dst.keys() == []
    # plans only: the plan, not the artifact
    report = import_bundle(dst, bundle, plans_only=True)
    assert (report.wisdom, report.artifacts, report.trusted) == (1, 0, "")
    assert dst.keys("artifact:") == [] and dst.records()[0][1]["artifacts"] == {}
    # trusted: said, and the artifact that does not load falls back to eager with a warning
    dst = PlanCache(tmp_path / "dst2")
    assert main(["cache", "import", str(bundle), "--trust-artifacts", "--cache-dir", str(dst.path)]) == 0
    assert "trusted as native code: 1 aot for cpu" in capsys.readouterr().out
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match=f"the aot artifact {akey} did not load .*running .* eagerly"):
        plan = trnplan.plan_many(64, batch=4, compile="aot", effort="wisdom_only", cache=dst)
    assert plan.provenance.origin == "wisdom hit" and plan.provenance.compile_mode == "eager"
    assert dst.keys("artifact:") == []
    x = random_complex((4, 64))
    assert rel_l2(plan.execute(torch.from_numpy(x).to(torch.complex64)), reference(x, False)) <= BAR["fp32"]


# ---------------------------------------------------------------------- item 6: damaged records
DEEP = "[" * 200_000 + "]" * 200_000  # past json's recursion limit: RecursionError, not ValueError


def _calibration_key():
    return f"calibration:{fingerprint_digest(fingerprint('cpu'))}:cpu"


def _good_calibration():
    return {"samples": [[{"launches": 3.0}, 12.5]], "scales": {"launches": 1.5}, "count": 1,
            "rms_before": 0.1, "rms_after": 0.05}


@pytest.mark.parametrize("damage", [
    {"scales": {"launches": 0}},  # ZeroDivisionError in every plan_many
    {"scales": {"launches": -2.0}},
    {"scales": {"launches": "2"}},
    {"scales": {"launches": float("inf")}},
    {"count": "3"},
    {"count": 1.5},
    {"samples": [[{"launches": "x"}, 1.0]]},
    {"samples": [[{"launches": 1.0}, 0]]},
    {"samples": [1, 2, 3]},
    "deep",
])
def test_a_damaged_calibration_record_is_forgotten_with_one_warning(tmp_path, damage):
    cache = PlanCache(tmp_path / "c")
    key = _calibration_key()
    if damage == "deep":
        cache._set(key, DEEP)
    else:
        cache.set_record(key, {**_good_calibration(), **damage})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = trnplan.plan_many(24, batch=2, cache=cache)
        trnplan.clear_plan_cache()
        trnplan.plan_many(40, batch=2, cache=cache)
    said = [w for w in caught if "calibration record" in str(w.message)]
    assert len(said) == 1 and issubclass(said[0].category, CacheWarning)
    assert "is not valid" in str(said[0].message) and "forgetting it" in str(said[0].message)
    assert cache.keys("calibration:") == []
    x = random_complex((2, 24))
    assert rel_l2(plan.execute(torch.from_numpy(x).to(torch.complex64)), reference(x, False)) <= BAR["fp32"]


def test_a_good_calibration_record_is_read():
    from trnplan.planner import learn

    assert learn.parse_record(_good_calibration()) == _good_calibration()


@pytest.mark.parametrize("kind,value", [
    ("probe", {"bf16_products_exact": "yes", "fp32_matmul": "fp32", "source": "x"}),
    ("probe", ["not", "a", "probe"]),
    ("probe", "deep"),
    ("load_check", {"why": 7}),
    ("load_check", "deep"),
    ("leafmodel", {"leaves": {"native": {"call_us": 1.0, "gflops": [0.0, 1.0, 1.0]}}, "rms_heldout": 0.1}),
    ("leafmodel", {"leaves": {"native": {"call_us": "1", "gflops": [1.0]}}, "rms_heldout": 0.1}),
    ("wisdom", "deep"),
])
def test_every_record_kind_is_validated_and_forgotten(tmp_path, kind, value):
    cache = PlanCache(tmp_path / "c")
    key = f"{kind}:x:cpu"
    if value == "deep":
        cache._set(key, DEEP)
    else:
        cache.set_record(key, value)
    parse = {"probe": PrecisionProbe.from_dict, "load_check": artifact._load_check_why,
             "leafmodel": leafcost.parse_record}.get(kind)
    with pytest.warns(CacheWarning, match=f"{kind} .*{key!r} is not valid.*forgetting it|wisdom entry"):
        got = cache.get_wisdom(key) if kind == "wisdom" else cache.get_record(key, parse)
    assert got is None and cache.keys(kind) == []


def test_damaged_records_through_plan_many(tmp_path):
    """The probe and load-check records as plan_many reads them: forgotten, the plan still made."""
    cache = PlanCache(tmp_path / "c")
    fpd = fingerprint_digest(fingerprint("cpu"))
    cache._set(f"load_check:{fpd}:aot", DEEP)
    cache.set_record(f"leafmodel:{fpd}:{torch.get_num_threads()}", {"leaves": {"x": {"gflops": "fast"}}})
    with pytest.warns(CacheWarning, match="is not valid"):
        plan = trnplan.plan_many(48, batch=2, cache=cache)
    assert cache.keys("leafmodel:") == []
    x = random_complex((2, 48))
    assert rel_l2(plan.execute(torch.from_numpy(x).to(torch.complex64)), reference(x, False)) <= BAR["fp32"]


@pytest.mark.parametrize("setting,value", [("disk_min_file_size", "big"), ("disk_foo", 1), ("size_limit", "abc"),
                                           ("eviction_policy", "bogus"), ("cull_limit", "x")])
def test_a_damaged_settings_row_does_not_break_the_cache(tmp_path, setting, value):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(64, batch=2, cache=cache)
    cache.close()
    con = sqlite3.connect(cache.path / "cache.db")
    with con:
        con.execute("INSERT OR REPLACE INTO Settings VALUES (?, ?)", (setting, value))
    con.close()
    trnplan.clear_plan_cache()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = PlanCache(cache.path)
        plan = trnplan.plan_many(64, batch=2, cache=again)
        again.set_record("probe:y:cpu", {"b": 2})
    assert plan.provenance.origin == "wisdom hit" and again.get_record("probe:y:cpu") == {"b": 2}
    assert all("Settings table is damaged" in str(w.message) for w in caught)


# ---------------------------------------------------------------------- item 7: a damaged database
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_database_is_said_and_rebuilt_by_clear(tmp_path, capsys, damage):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(64, batch=2, cache=cache)
    cache.add_artifact("artifact:a:b:aot", os.urandom(100_000))  # a value file the rebuild removes
    (tmp_path / "c" / "notes.txt").write_text("mine")  # not diskcache's: left alone
    cache.close()
    db = cache.path / "cache.db"
    if damage == "garbage":
        db.write_bytes(b"this is not sqlite " * 64)
    else:  # a header that promises pages the file no longer has
        db.write_bytes(db.read_bytes()[:100] + b"\x00" * 4000)
    trnplan.clear_plan_cache()
    damaged = PlanCache(cache.path)
    with pytest.warns(CacheWarning, match="its database is damaged .*`trnplan cache clear` moves it aside"):
        plan = trnplan.plan_many(64, batch=2, cache=damaged)
    assert plan.provenance.origin == "planned now" and damaged.damaged
    # info and list say so, as an error (not zeros with exit 0)
    for action in ("info", "list"):
        assert main(["cache", action, "--cache-dir", str(cache.path)]) == 2
        err = capsys.readouterr().err
        assert "is damaged" in err and "trnplan cache clear" in err
    # clear rebuilds: the damaged file is kept aside, the value files go, a fresh cache works
    assert main(["cache", "clear", "--cache-dir", str(cache.path)]) == 0
    out = capsys.readouterr().out
    assert "was damaged" in out and "moved it to cache.db.damaged-" in out and "1 value file(s)" in out
    assert "a new empty cache is ready" in out
    assert len(list(cache.path.glob("cache.db.damaged-*Z"))) == 1 and list(cache.path.rglob("*.val")) == []
    assert (cache.path / "notes.txt").read_text() == "mine"
    trnplan.clear_plan_cache()
    fresh = PlanCache(cache.path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        trnplan.plan_many(64, batch=2, cache=fresh)
        trnplan.clear_plan_cache()
        assert trnplan.plan_many(64, batch=2, cache=fresh).provenance.origin == "wisdom hit"


def test_rebuild_of_a_healthy_cache_does_nothing(tmp_path):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(64, batch=2, cache=cache)
    assert "not damaged; nothing rebuilt" in cache.rebuild()
    assert len(cache.records()) == 1


# ---------------------------------------------------------------------- item 12: the cache's clear errors
def test_cache_is_created_private_under_a_group_writable_umask(tmp_path):
    old = os.umask(0o002)  # Debian's and Ubuntu's default for users
    try:
        cache = PlanCache(tmp_path / "new" / "trnplan")
        trnplan.plan_many(64, batch=2, cache=cache)
    finally:
        os.umask(old)
    assert cache.path.stat().st_mode & 0o777 == 0o700
    assert cache.path.parent.stat().st_mode & 0o777 == 0o700
    cache.check_trusted()  # compile="aot" would accept it


def test_a_full_disk_is_not_called_read_only(tmp_path, monkeypatch):
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(64, batch=2, cache=cache)
    cache.close()

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(diskcache, "Cache", full)
    again = PlanCache(cache.path)
    with pytest.warns(CacheWarning, match="is on a full disk .*disk is full.*free some space; new plans are not"
                      ) as caught:
        trnplan.plan_many(128, batch=2, cache=again)
    assert not any("read-only" in str(w.message) for w in caught)


@pytest.mark.parametrize("action", ["info", "list", "clear", "drop"])
def test_cache_commands_never_create_the_directory(tmp_path, capsys, action):
    target = tmp_path / "system" / "dir"
    argv = ["cache", action, "--cache-dir", str(target)] + (["--measured"] if action == "drop" else [])
    assert main(argv) == 0
    assert f"no plan cache at {target}" in capsys.readouterr().out
    assert not target.exists()
    target.mkdir(parents=True)  # an existing directory that holds no cache: no cache.db written into it
    assert main(argv) == 0
    assert list(target.iterdir()) == []
    assert main(["cache", "export", str(tmp_path / "b.zip"), "--cache-dir", str(target)]) == 2
    assert "no plan cache at" in capsys.readouterr().err and list(target.iterdir()) == []


# ---------------------------------------------------------------------- item 8: concurrent calibration
def test_concurrent_calibration_writers_keep_every_sample(tmp_path):
    """Four writers (threads, each with its own PlanCache: its own SQLite connection, as a
    process has) add 25 one-sample measurements each; every sample is kept."""
    import threading

    from trnplan.backends.cpu import CPU_PROFILE

    path, fpd = tmp_path / "c", "f" * 16
    PlanCache(path).set_record("probe:x:cpu", {"a": 1})  # the database exists before the race
    start = threading.Barrier(4)
    errors = []

    def writer(w: int):
        try:
            cache = PlanCache(path)
            start.wait()
            for i in range(25):
                records.add_calibration_samples(cache, fpd, "cpu", [({"launches": 1.0 + w, "bytes": 1e3 * (i + 1)},
                                                                      10.0 + i)], CPU_PROFILE)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stored = PlanCache(path).get_record(f"calibration:{fpd}:cpu")
    assert len(stored["samples"]) == 100 and stored["count"] == 100


def test_files_inside_a_private_directory_are_out_of_reach(tmp_path):
    """Under umask 002 the value files come out group-writable (0664); inside a 0700 directory
    no one else can reach them, so the cache is trusted (a 0755 one is not: the test above)."""
    cache = _filled_cache(tmp_path)
    _value_file(cache).chmod(0o666)
    (cache.path / "cache.db").chmod(0o666)
    with pytest.raises(UntrustedCacheError):
        cache.check_trusted()
    cache.path.chmod(0o700)
    cache.check_trusted()
    (tmp_path / "c" / "compile").mkdir(mode=0o777)  # a compiler's work folder: nothing the cache reads
    cache.check_trusted()


# ---------------------------------------------------------------------- found by tests/test_fuzz.py
def test_a_file_mode_row_without_a_file_name_is_forgotten(tmp_path):
    """mode = binary (a value kept in a file) with a NULL filename: diskcache joined None to the
    directory (TypeError out of every plan_many)."""
    cache = PlanCache(tmp_path / "c")
    key = trnplan.plan_many(64, batch=2, cache=cache).provenance.wisdom_key
    cache.close()
    con = sqlite3.connect(cache.path / "cache.db")
    with con:
        con.execute("UPDATE Cache SET mode = ?, filename = NULL WHERE key = ?", (diskcache.core.MODE_BINARY, key))
    con.close()
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match="is unsafe to read .*not a path"):
        plan = trnplan.plan_many(64, batch=2, cache=PlanCache(cache.path))
    assert plan.provenance.origin == "planned now"


def test_text_that_is_not_utf8_inside_the_database_is_damage(tmp_path, capsys, monkeypatch):
    """Bytes flipped inside cache.db (tests/test_fuzz.py, 'flip-db') made diskcache's open raise
    UnicodeDecodeError — Python could not decode text SQLite handed it — out of every plan_many.
    Which flipped byte does it depends on the file's layout, so the open is made to raise it here."""
    cache = PlanCache(tmp_path / "c")
    trnplan.plan_many(64, batch=2, cache=cache)
    cache.close()
    real = diskcache.Cache

    def undecodable(*args, **kwargs):
        raise UnicodeDecodeError("utf-8", b"\xd4\xff", 0, 1, "invalid continuation byte")

    monkeypatch.setattr(diskcache, "Cache", undecodable)
    trnplan.clear_plan_cache()
    with pytest.warns(CacheWarning, match="its database is damaged \\(UnicodeDecodeError"):
        plan = trnplan.plan_many(64, batch=2, cache=PlanCache(cache.path))
    assert plan.provenance.origin == "planned now"
    damaged = PlanCache(cache.path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        assert damaged.damaged.startswith("UnicodeDecodeError")
    monkeypatch.setattr(diskcache, "Cache", real)  # the rebuilt database opens
    assert "a new empty cache is ready" in damaged.rebuild()
