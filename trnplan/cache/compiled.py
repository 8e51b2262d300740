"""The Neuron runtimes' compiled graphs that belong to a plan: recorded, exported and restored.

On a NeuronCore (TorchNeuron's ``neuron`` device, torch-neuronx 2.9's ``xla``) a plan's graph is
compiled by the runtime, which keeps the NEFF in its own compile cache (``TORCH_NEURONX_NEFF_CACHE_DIR``,
``NEURON_COMPILE_CACHE_URL``; runtimes.md §2, §3), not in trnplan's artifact store. trnplan points
those caches at ``<plan cache>/neff`` and ``<plan cache>/neuron-compile-cache`` unless the user set
them (:func:`trnplan.backends.accel.configure_compile_cache`), and a ``wisdom_only`` process that finds
no NEFF there compiles, which is a :class:`~trnplan.core.errors.WisdomMiss` (issue 27 item 4).

So that ``trnplan cache export`` / :func:`trnplan.export_wisdom` ships them, the files each compile
added to the runtime's cache (:func:`trnplan.backends.accel.tracked_compile`) are recorded with their
sha256 under ``compiled:<wisdom key>``. Only those: the runtime's cache may hold the user's other
models (the variable is process-wide), and they are neither exported nor touched. The runtimes'
cache layouts are not documented, so nothing is assumed about them: files are kept at the same path
relative to the cache directory, and a restored cache is the one the importing side's runtime reads.

What is not recorded: a graph the runtime found in its cache already (nothing was added, e.g. a
cache shared with another plan cache), and files another thread's compile outside trnplan added
while a plan's graph compiled (trnplan's own compiles are serialised for this; other code is not).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import tempfile

from trnplan.backends import accel

COMPILED_FORMAT = 1
#: the runtime cache variables a record may name (anything else is not a Neuron compile cache)
VARIABLES = tuple(var for var, _ in accel.RUNTIME_CACHE.values())


def key_of(wisdom_key: str) -> str:
    """The record key of a wisdom key's compiled files."""
    return f"compiled:{wisdom_key}"


def safe_relpath(rel) -> bool:
    """Whether ``rel`` is a plain relative path inside a directory (no ``..``, absolute, empty or
    backslash part): a bundle naming anything else would write outside the compile cache."""
    if not isinstance(rel, str) or not rel or len(rel) > 1024 or "\\" in rel or "\0" in rel:
        return False
    parts = rel.split("/")
    return not rel.startswith("/") and posixpath.normpath(rel) == rel and all(p not in ("", ".", "..") for p in parts)


def parse(record) -> dict:
    """Check a ``compiled:`` record; raises ValueError/TypeError on one that is not (the cache forgets it)."""
    if not isinstance(record, dict) or record.get("format") != COMPILED_FORMAT:
        raise ValueError("not a compiled-files record of this format")
    groups = record.get("groups")
    if not isinstance(groups, dict):
        raise TypeError("its groups is not a table")
    for group in groups.values():
        if (not isinstance(group, dict) or group.get("var") not in VARIABLES or not isinstance(group.get("root"), str)
                or not isinstance(group.get("in_cache"), bool) or not isinstance(group.get("files"), dict)):
            raise ValueError("a group without var, root, in_cache and files")
        for rel, meta in group["files"].items():
            if not safe_relpath(rel) or not isinstance(meta, dict) or not isinstance(meta.get("sha256"), str):
                raise ValueError(f"file entry {rel!r} is not a relative path with a sha256")
    return record


def _sha256_file(path: str) -> tuple[str, int] | None:
    digest, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
    except OSError:
        return None
    return digest.hexdigest(), size


def _stored_root(cache, root: str) -> tuple[str, bool]:
    """``root`` relative to the plan cache's directory when it is inside it (a copied or moved cache
    keeps its compile cache), else as it is."""
    base = os.path.realpath(cache.path)
    full = os.path.realpath(root)
    if full != base and os.path.commonpath([base, full]) == base:
        return os.path.relpath(full, base), True
    return full, False


def record(cache, wisdom_key: str | None, compiled) -> int:
    """Record the files of :class:`~trnplan.backends.accel.CompiledFiles` ``compiled`` (one or a list)
    as belonging to the plan under ``wisdom_key``, with their sha256; the number recorded."""
    groups = [compiled] if isinstance(compiled, accel.CompiledFiles) else list(compiled)
    if cache is None or wisdom_key is None:
        return 0
    found = {}
    for group in groups:
        if not group.files:
            continue
        root, in_cache = _stored_root(cache, group.root)
        for rel in group.files:
            got = _sha256_file(os.path.join(group.root, rel))
            if got is not None:
                found.setdefault((group.var, root, in_cache), {})[rel] = {"sha256": got[0], "size": got[1]}
    if not found:
        return 0

    def merge(current):
        out = current or {"format": COMPILED_FORMAT, "groups": {}}
        for (var, root, in_cache), files in found.items():
            group = out["groups"].setdefault(f"{var}@{root}", {"var": var, "root": root, "in_cache": in_cache,
                                                               "files": {}})
            group["files"].update(files)
        return out

    cache.update_record(key_of(wisdom_key), merge, parse)
    return sum(len(files) for files in found.values())


def stored(cache, wisdom_key: str) -> list[dict]:
    """The compiled files recorded for ``wisdom_key``: dicts of var, path (absolute), rel, sha256, size."""
    rec = cache.get_record(key_of(wisdom_key), parse)
    out = []
    for group in (rec or {}).get("groups", {}).values():
        root = os.path.join(cache.path, group["root"]) if group["in_cache"] else group["root"]
        for rel, meta in sorted(group["files"].items()):
            out.append({"var": group["var"], "path": os.path.join(root, rel), "rel": rel, "sha256": meta["sha256"],
                        "size": meta.get("size", 0)})
    return out


def read_verified(path: str, sha256: str) -> bytes | None:
    """The bytes of ``path`` if their sha256 is ``sha256`` (the file as compiled), else None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == sha256 else None


def restore_dir(cache, var: str) -> tuple[str | None, str]:
    """(directory, how it was chosen) where the importing side's runtime reads ``var``'s cache for
    plans of ``cache``: the value the user set in this process, else ``<plan cache>/<sub>`` (where
    trnplan points the runtime at its first Neuron plan). None where it is remote."""
    where, why = accel.compile_cache_target(var, cache.path)
    return (None if "://" in where else where), why


def _inside(root: str, rel: str) -> str | None:
    """The path of ``rel`` under ``root`` if it resolves inside it (no symbolic link leads out)."""
    base = os.path.realpath(root)
    full = os.path.realpath(os.path.join(base, rel))
    return full if full != base and os.path.commonpath([base, full]) == base else None


def check_restorable(cache, files: list[dict]) -> str | None:
    """Why the verified bundle files ``files`` (dicts of var, rel, sha256, data) cannot be restored
    into ``cache``'s compile caches, or None. Nothing is written."""
    for item in files:
        root, why = restore_dir(cache, item["var"])
        if root is None:
            return (f"its compiled files go to {item['var']} ({why}), which is remote: trnplan does not write "
                    f"there. Import into a plan cache whose compile cache is local, or with --plans-only")
        full = _inside(root, item["rel"])
        if full is None:
            return f"compiled file {item['rel']!r} would lie outside {root}"
        if os.path.lexists(full):
            have = _sha256_file(full)
            if os.path.islink(full) or have is None or have[0] != item["sha256"]:
                return (f"{full} exists with other contents (left alone): the runtime there would not use the "
                        f"bundle's graph")
    return None


def restore(cache, wisdom_key: str, files: list[dict]) -> list[str]:
    """Write the verified bundle ``files`` into ``cache``'s compile caches (:func:`check_restorable`
    first) and record them under ``wisdom_key``; the directories written to."""
    written: dict[tuple[str, str], list[str]] = {}
    for item in files:
        root, _ = restore_dir(cache, item["var"])
        full = _inside(root, item["rel"])
        if not os.path.exists(full):
            os.makedirs(os.path.dirname(full), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(full), prefix=".trnplan-import-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(item["data"])
                os.replace(tmp, full)  # whole or not at all: a runtime never reads half a NEFF
            except BaseException:
                with contextlib.suppress(OSError):
                    os.remove(tmp)
                raise
        written.setdefault((item["var"], root), []).append(item["rel"])
    record(cache, wisdom_key, [accel.CompiledFiles(var, root, tuple(rels)) for (var, root), rels in written.items()])
    return sorted({root for _, root in written})


__all__ = ["COMPILED_FORMAT", "VARIABLES", "check_restorable", "key_of", "parse", "read_verified", "record",
           "restore", "restore_dir", "safe_relpath", "stored"]
