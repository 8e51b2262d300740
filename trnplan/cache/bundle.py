"""Export a plan cache into one file, and import it elsewhere (e.g. into a container image).

The bundle is a zip archive holding ``bundle.json`` (format, creation time, and every wisdom
record with its key) and ``artifacts/<n>.bin`` for each artifact its records name, and
``compiled/<n>.bin`` for each file a Neuron runtime's compile cache holds for them (the NEFFs of
TorchNeuron and torch-neuronx plans, :mod:`trnplan.cache.compiled`: only those recorded as the
plans' own, never the user's other models'). Records are JSON and are validated like any cache
read, and each artifact's and compiled file's sha256 is checked against its record before it is
stored; entries that fail a check are skipped and counted, with a reason. Compiled files are
restored into the importing cache's compile caches (``<cache>/neff``,
``<cache>/neuron-compile-cache``, or the variable the user set), where a ``wisdom_only`` process
planning with that cache finds them and compiles nothing.

Artifacts are native code: an AOTInductor ``.pt2`` holds a compiled shared library, a Neuron
artifact a NEFF, and trnplan loads and runs them (also under ``TRNPLAN_WISDOM_ONLY=1``). The
sha256 only says the bytes are the ones the bundle's author stored, not that the author is to be
trusted. So a bundle that holds artifacts is imported only with ``trust_artifacts=True``
(``trnplan cache import FILE --trust-artifacts``), or without them (``plans_only=True``,
``--plans-only``: the plans are data, and each is compiled here when first used).
"""

from __future__ import annotations

import hashlib
import json
import time
import zipfile

import attrs

from trnplan.backends.base import PrecisionProbe
from trnplan.cache import compiled, default_cache
from trnplan.cache.store import PlanCache, parse_wisdom
from trnplan.core.errors import TrnplanError

BUNDLE_FORMAT = 1


class UntrustedBundleError(TrnplanError, PermissionError):
    """A bundle holds compiled artifacts (native code) and the import did not say it trusts them."""


@attrs.frozen
class ImportReport:
    wisdom: int
    artifacts: int
    rejected: tuple  # (key, reason) pairs
    trusted: str = ""  # what was trusted as native code, when artifacts were imported
    compiled: int = 0  # Neuron compile-cache files restored (or found there already)
    compiled_into: tuple = ()  # the compile-cache directories they are in

    def __str__(self) -> str:
        text = f"imported {self.wisdom} plan(s) and {self.artifacts} artifact(s)"
        if self.compiled:
            text += f", {self.compiled} compiled file(s) into {', '.join(self.compiled_into)}"
        if self.trusted:
            text += f" (trusted as native code: {self.trusted})"
        if self.rejected:
            text += f"; rejected {len(self.rejected)}: " + "; ".join(f"{k}: {why}" for k, why in self.rejected)
        return text


def export_bundle(cache: PlanCache, path) -> dict:
    """Write every wisdom record of ``cache``, the artifacts they name and the compiled files recorded
    for them (:mod:`trnplan.cache.compiled`) to the zip file ``path``.

    Returns ``{"wisdom": plans, "artifacts": artifacts, "compiled": compiled files, "compiled_missing":
    [paths]}``: a recorded compiled file that is gone or changed since its compile is left out and
    listed (a ``wisdom_only`` process importing the bundle would compile that graph: a WisdomMiss).
    """
    entries, n_artifacts, n_compiled, missing = [], 0, 0, []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, record in cache.records():
            files = {}
            for mode, art in record.get("artifacts", {}).items():
                data = cache.get_artifact(art.get("key", ""), art.get("sha256", ""))
                if data is None:
                    continue
                name = f"artifacts/{n_artifacts}.bin"
                zf.writestr(name, data)
                files[mode] = name
                n_artifacts += 1
            shipped = []
            for item in compiled.stored(cache, key):
                data = compiled.read_verified(item["path"], item["sha256"])
                if data is None:
                    missing.append(item["path"])
                    continue
                name = f"compiled/{n_compiled}.bin"
                zf.writestr(name, data)
                shipped.append({"var": item["var"], "rel": item["rel"], "sha256": item["sha256"], "file": name})
                n_compiled += 1
            entries.append({"key": key, "record": record, "files": files, "compiled": shipped})
        zf.writestr("bundle.json", json.dumps({"format": BUNDLE_FORMAT, "created": time.time(), "entries": entries,
                                               "probes": _probes(cache, entries)}))
    return {"wisdom": len(entries), "artifacts": n_artifacts, "compiled": n_compiled, "compiled_missing": missing}


def _probes(cache: PlanCache, entries: list) -> list:
    """The precision-probe records of the exported plans' fingerprints: the importing side reads the
    probe from its plan cache instead of running it (on a NeuronCore the probe is a compile, which a
    ``wisdom_only`` process must not do)."""
    fpds = {item["key"].split(":")[2] for item in entries if item["key"].count(":") >= 3}
    out = []
    for key in sorted(cache.keys("probe:")):
        if key.count(":") >= 2 and key.split(":")[1] in fpds:
            probe = cache.get_record(key, PrecisionProbe.from_dict)
            if probe is not None:
                out.append({"key": key, "record": probe.to_dict()})
    return out


def _import_probes(cache: PlanCache, items) -> int:
    """Add the bundle's probe records (checked as any probe read; existing keys are kept)."""
    n = 0
    for item in items if isinstance(items, list) else ():
        key = item.get("key") if isinstance(item, dict) else None
        try:
            probe = PrecisionProbe.from_dict(item["record"])
        except (TypeError, ValueError, KeyError, AttributeError):
            continue  # not a probe: the importing side probes, as without a bundle
        if isinstance(key, str) and key.startswith("probe:") and not probe.transient:
            n += cache.add_record(key, probe.to_dict())
    return n


def _native_code(entries: list) -> str:
    """What the bundle's artifacts are, for the trust question: counts by mode and device."""
    kinds: dict[str, int] = {}
    for item in entries:
        record = item.get("record") if isinstance(item, dict) else None
        arts = record.get("artifacts") if isinstance(record, dict) else None
        problem = record.get("problem") if isinstance(record, dict) else None
        device = problem.get("device", "?") if isinstance(problem, dict) else "?"
        for mode in arts if isinstance(arts, dict) else ():
            label = f"{mode} for {device}"
            kinds[label] = kinds.get(label, 0) + 1
        files = item.get("compiled") if isinstance(item, dict) else None
        for entry in files if isinstance(files, list) else ():
            var = entry.get("var", "?") if isinstance(entry, dict) else "?"
            label = f"Neuron compile-cache file(s) ({var}) for {device}"
            kinds[label] = kinds.get(label, 0) + 1
    return ", ".join(f"{n} {label}" for label, n in sorted(kinds.items()))


def _read_meta(zf, path) -> tuple[list, list]:
    try:
        meta = json.loads(zf.read("bundle.json"))
    except (KeyError, ValueError, RecursionError) as exc:
        raise ValueError(f"{path} is not a trnplan cache bundle (bundle.json: {exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != BUNDLE_FORMAT:
        raise ValueError(f"{path}: unsupported bundle format {meta.get('format') if isinstance(meta, dict) else meta!r}")
    entries = meta.get("entries", [])
    if not isinstance(entries, list):
        raise ValueError(f"{path}: bundle.json's entries is not a list")  # noqa: TRY004 - a bad file, not a bad argument
    return entries, meta.get("probes", [])


def import_bundle(cache: PlanCache, path, *, trust_artifacts: bool = False, plans_only: bool = False) -> ImportReport:
    """Verify and add every entry of the bundle at ``path`` to ``cache`` (existing keys are kept).

    Parameters
    ----------
    cache : PlanCache
        Where to add the entries.
    path : str or Path
        The bundle (a zip file written by :func:`export_bundle`).
    trust_artifacts : bool, default False
        Import the bundle's compiled artifacts and Neuron compile-cache files (NEFFs): native code
        this machine will load and run. Only for bundles from a builder you trust. The compiled
        files go into this cache's compile caches (:func:`trnplan.cache.compiled.restore_dir`).
    plans_only : bool, default False
        Import the plans and leave the artifacts and compiled files out (they are compiled here
        when first used).

    Raises
    ------
    UntrustedBundleError
        The bundle holds artifacts and neither ``trust_artifacts`` nor ``plans_only`` was given;
        nothing is imported.
    ValueError
        ``path`` is not a bundle.
    """
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ValueError(f"{path} is not a trnplan cache bundle ({exc})") from None
    with zf:
        entries, probes = _read_meta(zf, path)
        native = _native_code(entries)
        if native and not (trust_artifacts or plans_only):
            raise UntrustedBundleError(
                f"{path} holds compiled artifacts ({native}): native code this process would load and run, "
                f"also under TRNPLAN_WISDOM_ONLY=1. Import it with --trust-artifacts (trust_artifacts=True) "
                f"only if you trust who built it, or with --plans-only (plans_only=True) to import its plans "
                f"and compile them here; nothing was imported")
        report = _import_entries(cache, zf, entries, plans_only)
        _import_probes(cache, probes)
    return attrs.evolve(report, trusted=native if report.artifacts else "")


def _import_entries(cache: PlanCache, zf, entries: list, plans_only: bool) -> ImportReport:
    rejected, n_wisdom, n_art, n_compiled, dirs = [], 0, 0, 0, set()
    for item in entries:
        key = item.get("key") if isinstance(item, dict) else None
        record = parse_wisdom(json.dumps(item.get("record"))) if isinstance(item, dict) else None
        if not isinstance(key, str) or not key.startswith("wisdom:") or record is None:
            rejected.append((str(key), "not a valid wisdom record"))
            continue
        if plans_only:
            record = {**record, "artifacts": {}}
        files = item.get("files", {})
        bad_keys = [a["key"] for m, a in record.get("artifacts", {}).items()
                    if not (a["key"].startswith("artifact:") and a["key"].endswith(f":{m}"))]
        if not isinstance(files, dict) or bad_keys:
            rejected.append((key, f"artifact entries with keys outside the artifact store: {bad_keys}"
                             if bad_keys else "its 'files' is not a table"))
            continue
        graphs, why = ([], None) if plans_only else _verified_compiled(cache, zf, item.get("compiled", []))
        if why is not None:
            rejected.append((key, why))
            continue
        arts, why = _verified_artifacts(zf, record, files)
        if why is not None:
            rejected.append((key, why))
            continue
        for art_key, data in arts:
            cache.add_artifact(art_key, data)
        if graphs:
            dirs.update(compiled.restore(cache, key, graphs))
        n_art, n_compiled = n_art + len(arts), n_compiled + len(graphs)
        cache.add_wisdom(key, record)
        n_wisdom += 1
    return ImportReport(n_wisdom, n_art, tuple(rejected), compiled=n_compiled, compiled_into=tuple(sorted(dirs)))


def _verified_artifacts(zf, record: dict, files: dict) -> tuple[list, str | None]:
    """([(artifact key, bytes)], None), or (_, why) when one is missing or its sha256 differs."""
    out = []
    for mode, art in record.get("artifacts", {}).items():
        name = files.get(mode)
        try:
            data = zf.read(name) if isinstance(name, str) else None
        except KeyError:
            data = None
        if data is None or hashlib.sha256(data).hexdigest() != art.get("sha256"):
            return out, f"{mode} artifact missing or its sha256 does not match"
        out.append((art["key"], data))
    return out, None


def _verified_compiled(cache: PlanCache, zf, items) -> tuple[list, str | None]:
    """The entry's Neuron compile-cache files, each read and checked (a runtime cache variable, a plain
    relative path, bytes whose sha256 is the recorded one) and restorable into ``cache``'s compile
    caches: (files, None), or (_, why) naming the first that is not. Nothing is written."""
    if not isinstance(items, list):
        return [], "its 'compiled' is not a list"
    out, seen = [], set()
    for entry in items:
        ok = (isinstance(entry, dict) and entry.get("var") in compiled.VARIABLES
              and compiled.safe_relpath(entry.get("rel")) and isinstance(entry.get("sha256"), str)
              and isinstance(entry.get("file"), str) and (entry.get("var"), entry.get("rel")) not in seen)
        if not ok:
            return [], f"a compiled-file entry that is not a runtime cache file with a relative path: {entry!r}"[:300]
        try:
            data = zf.read(entry["file"])
        except KeyError:
            data = None
        if data is None or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            return [], (f"compiled file {entry['rel']} ({entry['var']}) is missing from the bundle or its sha256 "
                        f"does not match: the bundle is damaged; nothing of this plan was imported")
        seen.add((entry["var"], entry["rel"]))
        out.append({**entry, "data": data})
    return out, compiled.check_restorable(cache, out)


def export_wisdom(path, cache: PlanCache | None = None) -> dict:
    """Write the plan cache's wisdom (and the artifacts it names) to one file, as FFTW's
    ``fftw_export_wisdom_to_filename``: :func:`export_bundle` of ``cache`` (default: the
    process-wide default cache). Returns ``{"wisdom": plans, "artifacts": artifacts, "compiled":
    Neuron compile-cache files, "compiled_missing": [files recorded but gone or changed]}``.

    Examples
    --------
    >>> import trnplan  # doctest: +SKIP
    >>> trnplan.export_wisdom("plans.zip")  # doctest: +SKIP
    """
    return export_bundle(_cache_or_default(cache), path)


def import_wisdom(path, cache: PlanCache | None = None, *, trust_artifacts: bool = False,
                  plans_only: bool = False) -> ImportReport:
    """Verify and add the wisdom of a file written by :func:`export_wisdom` to the plan cache
    (default: the process-wide default cache), as FFTW's ``fftw_import_wisdom_from_filename``:
    :func:`import_bundle`, whose ``trust_artifacts`` / ``plans_only`` it takes. Every record is
    checked; a bundle holding compiled artifacts needs one of the two."""
    return import_bundle(_cache_or_default(cache), path, trust_artifacts=trust_artifacts, plans_only=plans_only)


def _cache_or_default(cache):
    if cache is None:
        cache = default_cache()
    if cache is None:
        raise ValueError("no plan cache: the process default is None (set_default_cache); pass cache=PlanCache(dir)")
    return cache

