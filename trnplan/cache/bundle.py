"""Export a plan cache into one file, and import it elsewhere (e.g. into a container image).

The bundle is a zip archive holding ``bundle.json`` (format, creation time, and every wisdom
record with its key) and ``artifacts/<n>.bin`` for each artifact its records name. Nothing in it
is executable by the importer: records are JSON and are validated like any cache read, and each
artifact's sha256 is checked against its record before it is stored. Entries that fail a check
are skipped and counted, with a reason.
"""

from __future__ import annotations

import hashlib
import json
import time
import zipfile

import attrs

from trnplan.cache.store import PlanCache, parse_wisdom

BUNDLE_FORMAT = 1


@attrs.frozen
class ImportReport:
    wisdom: int
    artifacts: int
    rejected: tuple  # (key, reason) pairs

    def __str__(self) -> str:
        text = f"imported {self.wisdom} plan(s) and {self.artifacts} artifact(s)"
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


def import_bundle(cache: PlanCache, path) -> ImportReport:
    """Verify and add every entry of the bundle at ``path`` to ``cache`` (existing keys are kept)."""
    rejected, n_wisdom, n_art = [], 0, 0
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ValueError(f"{path} is not a trnplan cache bundle ({exc})") from None
    with zf:
        try:
            meta = json.loads(zf.read("bundle.json"))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"{path} is not a trnplan cache bundle (bundle.json: {exc})") from None
        if not isinstance(meta, dict) or meta.get("format") != BUNDLE_FORMAT:
            raise ValueError(f"{path}: unsupported bundle format {meta.get('format') if isinstance(meta, dict) else meta!r}")
        for item in meta.get("entries", []):
            key = item.get("key") if isinstance(item, dict) else None
            record = parse_wisdom(json.dumps(item.get("record"))) if isinstance(item, dict) else None
            if not isinstance(key, str) or not key.startswith("wisdom:") or record is None:
                rejected.append((str(key), "not a valid wisdom record"))
                continue
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
                    data = zf.read(name) if name else None
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
