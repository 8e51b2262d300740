"""Export a plan cache into one file, and import it elsewhere (e.g. into a container image).

The bundle is a zip archive holding ``bundle.json`` (format, creation time, and every wisdom
record with its key) and ``artifacts/<n>.bin`` for each artifact its records name. Records are
JSON and are validated like any cache read, and each artifact's sha256 is checked against its
record before it is stored; entries that fail a check are skipped and counted, with a reason.

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

from trnplan.cache import default_cache
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

    def __str__(self) -> str:
        text = f"imported {self.wisdom} plan(s) and {self.artifacts} artifact(s)"
        if self.trusted:
            text += f" (trusted as native code: {self.trusted})"
        if self.rejected:
            text += f"; rejected {len(self.rejected)}: " + "; ".join(f"{k}: {why}" for k, why in self.rejected)
        return text


def export_bundle(cache: PlanCache, path) -> dict:
    """Write every wisdom record of ``cache`` and the artifacts they name to the zip file ``path``."""
    entries, n_artifacts = [], 0
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
            entries.append({"key": key, "record": record, "files": files})
        zf.writestr("bundle.json", json.dumps({"format": BUNDLE_FORMAT, "created": time.time(), "entries": entries}))
    return {"wisdom": len(entries), "artifacts": n_artifacts}


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
    return ", ".join(f"{n} {label}" for label, n in sorted(kinds.items()))


def _read_meta(zf, path) -> list:
    try:
        meta = json.loads(zf.read("bundle.json"))
    except (KeyError, ValueError, RecursionError) as exc:
        raise ValueError(f"{path} is not a trnplan cache bundle (bundle.json: {exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != BUNDLE_FORMAT:
        raise ValueError(f"{path}: unsupported bundle format {meta.get('format') if isinstance(meta, dict) else meta!r}")
    entries = meta.get("entries", [])
    if not isinstance(entries, list):
        raise ValueError(f"{path}: bundle.json's entries is not a list")  # noqa: TRY004 - a bad file, not a bad argument
    return entries


def import_bundle(cache: PlanCache, path, *, trust_artifacts: bool = False, plans_only: bool = False) -> ImportReport:
    """Verify and add every entry of the bundle at ``path`` to ``cache`` (existing keys are kept).

    Parameters
    ----------
    cache : PlanCache
        Where to add the entries.
    path : str or Path
        The bundle (a zip file written by :func:`export_bundle`).
    trust_artifacts : bool, default False
        Import the bundle's compiled artifacts: native code this machine will load and run. Only
        for bundles from a builder you trust.
    plans_only : bool, default False
        Import the plans and leave the artifacts out (they are compiled here when first used).

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
        entries = _read_meta(zf, path)
        native = _native_code(entries)
        if native and not (trust_artifacts or plans_only):
            raise UntrustedBundleError(
                f"{path} holds compiled artifacts ({native}): native code this process would load and run, "
                f"also under TRNPLAN_WISDOM_ONLY=1. Import it with --trust-artifacts (trust_artifacts=True) "
                f"only if you trust who built it, or with --plans-only (plans_only=True) to import its plans "
                f"and compile them here; nothing was imported")
        report = _import_entries(cache, zf, entries, plans_only)
    return attrs.evolve(report, trusted=native if report.artifacts else "")


def _import_entries(cache: PlanCache, zf, entries: list, plans_only: bool) -> ImportReport:
    rejected, n_wisdom, n_art = [], 0, 0
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
        ok = True
        for mode, art in record.get("artifacts", {}).items():
            name = files.get(mode)
            try:
                data = zf.read(name) if isinstance(name, str) else None
            except KeyError:
                data = None
            if data is None or hashlib.sha256(data).hexdigest() != art.get("sha256"):
                rejected.append((key, f"{mode} artifact missing or its sha256 does not match"))
                ok = False
                break
            cache.add_artifact(art["key"], data)
            n_art += 1
        if ok:
            cache.add_wisdom(key, record)
            n_wisdom += 1
    return ImportReport(n_wisdom, n_art, tuple(rejected))


def export_wisdom(path, cache: PlanCache | None = None) -> dict:
    """Write the plan cache's wisdom (and the artifacts it names) to one file, as FFTW's
    ``fftw_export_wisdom_to_filename``: :func:`export_bundle` of ``cache`` (default: the
    process-wide default cache). Returns ``{"wisdom": plans, "artifacts": artifacts}``.

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

