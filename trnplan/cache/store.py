"""PlanCache: the on-disk wisdom and artifact stores (diskcache, JSON and bytes only).

Layout: one diskcache directory holding string keys of these kinds:

``wisdom:<problem digest>:<fingerprint digest>:<strategy/tol digest>``
    a JSON text record: the problem, the fingerprint, the PlanNode tree, how it was planned,
    and, when compiled, the artifact's key, mode, sha256, size and compile seconds.
``artifact:<sha of problem+tree>:<fingerprint digest>:<mode>``
    the compiled artifact's bytes (AOTInductor ``.pt2``, TorchScript holding a NEFF).
``calibration:<fingerprint digest>:<device>``
    JSON: measured-planning samples and the fitted cost-profile multipliers of this machine
    (:mod:`trnplan.planner.learn`).
``probe:<fingerprint digest>:<device>``
    JSON: the device's precision probe.
``compiled:<wisdom key>``
    JSON: the files a Neuron runtime's compile cache holds for that plan, with their sha256
    (:mod:`trnplan.cache.compiled`; exported and imported with the plan).
``load_check:<fingerprint digest>:<mode>``
    JSON: why a child process could not load an artifact of this mode on this machine
    (:func:`trnplan.backends.artifacts.load_check`); present only after such a failure.
``stats:<name>``
    process-safe counters (hits, misses, compiles, compile seconds saved).

Safety rules, each tested in tests/test_cache.py:

* **No pickle.** Values are ``str`` or ``bytes`` only; the Disk subclass refuses to store
  anything else and refuses to *read* a pickled entry (a foreign or tampered database could
  hold one), so opening a cache never executes code from it.
* **Artifacts are checked.** An artifact whose sha256 differs from its wisdom record is
  rejected (warning), deleted and rebuilt.
* **Faults degrade, never crash.** A cache that cannot be opened, read or written (garbled or
  foreign files, a read-only or full disk) produces one :class:`CacheWarning` and the plan is
  made without it. The only hard error is an *untrusted* directory: a cache that other users
  can write to is refused for artifacts unless ``TRNPLAN_TRUST_CACHE=1``.
* **Concurrency.** diskcache is process-safe (SQLite). Work happens outside any lock; stores
  use ``add`` (first writer wins) and re-read what won, so N processes end with one entry each.
  The one replacement, of a measured record found bogus on reuse (``replace_wisdom``), compares
  and writes in one transaction: the first process to re-measure wins there too.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import sqlite3
import stat
import time
import warnings
from pathlib import Path

import diskcache

from trnplan.core import config
from trnplan.core.errors import TrnplanError

WISDOM_FORMAT = 1

#: what the store raises when it cannot do what was asked: the disk, SQLite (a lock, a full disk,
#: a damaged file), and text in the database that is not UTF-8 (bytes flipped inside cache.db:
#: SQLite hands them to Python, which cannot decode them; found by tests/test_fuzz.py)
STORE_ERRORS = (OSError, sqlite3.Error, diskcache.Timeout, UnicodeDecodeError)

#: what reading a damaged record can raise: bad JSON (ValueError), JSON nested past the parser's
#: recursion limit (RecursionError: 200,000 brackets), a field of the wrong type or range
RECORD_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError, RecursionError)


class CacheWarning(UserWarning):
    """The plan cache could not be used as asked; the result is still correct."""


class UntrustedCacheError(TrnplanError, PermissionError):
    """The cache directory can be written by other users; its artifacts are not loaded."""


class UnsafeEntry(Exception):
    """An entry that would need unpickling to read."""


def value_path(directory, filename) -> str:
    """The full path of a value file named in a cache row, if it lies inside ``directory``.

    diskcache joins a row's ``filename`` to the directory as it is, so a tampered or foreign
    database naming an absolute path or ``../`` would make a read open, and a forget *delete*,
    any file of the user's (and its emptied parent). A value file diskcache wrote is always
    ``ab/cd/<hex>.val`` under the directory: anything resolving elsewhere (symbolic links
    included) is refused with :class:`UnsafeEntry`.
    """
    if not isinstance(filename, str) or not filename:
        raise UnsafeEntry(f"a value file name that is not a path ({filename!r})")
    root = os.path.realpath(directory)
    full = os.path.realpath(os.path.join(root, filename))
    if full == root or os.path.commonpath([root, full]) != root:
        raise UnsafeEntry(f"value file {filename!r} lies outside the cache directory")
    return full


class JSONOnlyDisk(diskcache.Disk):
    """A diskcache Disk that stores and returns only str/bytes/int/float, never pickles, and
    never reads or removes a value file outside its directory (:func:`value_path`)."""

    def store(self, value, read, key=diskcache.core.UNKNOWN):
        if not read and not isinstance(value, (str, bytes, int, float)):
            raise TypeError(f"the plan cache stores only str/bytes/numbers, not {type(value).__name__}")
        return super().store(value, read, key=key)

    def fetch(self, mode, filename, value, read):
        if mode == diskcache.core.MODE_PICKLE:
            raise UnsafeEntry("a pickled entry: refusing to unpickle it")
        if mode in (diskcache.core.MODE_BINARY, diskcache.core.MODE_TEXT):  # always read from a file
            value_path(self._directory, filename)
        return super().fetch(mode, filename, value, read)

    def remove(self, file_path):
        """Remove a value file and its emptied ``ab/cd`` folders, never anything outside the cache."""
        try:
            full = value_path(self._directory, file_path)
        except UnsafeEntry:
            return  # the row goes; the file it names is not ours to delete
        root = os.path.realpath(self._directory)
        with contextlib.suppress(OSError):
            os.remove(full)
        parent = os.path.dirname(full)
        # diskcache's own remove climbs with os.removedirs, which would not stop at the cache
        # directory; stop there
        while parent != root and os.path.commonpath([root, parent]) == root:
            try:
                os.rmdir(parent)
            except OSError:
                break
            parent = os.path.dirname(parent)

    def put(self, key):
        if not isinstance(key, str):
            raise TypeError("plan-cache keys are strings")
        return super().put(key)

    def get(self, key, raw):
        if not raw:
            raise UnsafeEntry("refusing to unpickle a plan-cache key")
        return super().get(key, raw)


def default_cache_dir() -> Path:
    """``$TRNPLAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/trnplan``, else ``~/.cache/trnplan``."""
    env = config.cache_dir()
    if env:
        return _expand(env, "TRNPLAN_CACHE_DIR")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "trnplan"


def _expand(path, what: str) -> Path:
    """``Path(path).expanduser()``, with a ValueError naming ``what`` where ``~user`` names no user."""
    try:
        return Path(path).expanduser()
    except RuntimeError as exc:  # pathlib: "Could not determine home directory."
        raise ValueError(f"{what} {str(path)!r}: cannot expand its '~' ({exc}); give the directory as an "
                         f"absolute path") from None


def _writable_by_others(st) -> str | None:
    """Who besides this user (and root) can write a file with this ``stat``; None: no one."""
    if st.st_mode & stat.S_IWOTH:
        return "other users"
    if st.st_mode & stat.S_IWGRP:
        return "its group"
    # root's files are trusted (root can change anything anyway): an image built as root and
    # run as another user keeps working
    if hasattr(os, "getuid") and st.st_uid not in (os.getuid(), 0):
        return f"uid {st.st_uid}"
    return None


def _cache_files(root: Path):
    """The directory, its database files, then diskcache's value folders and files
    (``ab/cd/<hex>.val``; other folders, such as a compiler's work directory, hold nothing the
    cache reads). Nothing below a directory only its owner can enter: no one else reaches it."""
    yield root
    try:
        if not root.lstat().st_mode & (stat.S_IXGRP | stat.S_IXOTH):
            return  # 0700 (as trnplan creates it): what is inside is out of everyone else's reach
    except OSError:
        return
    for name in ("cache.db", "cache.db-wal", "cache.db-shm"):
        yield root / name
    for folder in sorted(root.glob("[0-9a-f][0-9a-f]")):
        yield folder
        for sub in sorted(folder.glob("[0-9a-f][0-9a-f]")):
            yield sub
            yield from sorted(sub.glob("*.val"))


def _make_private_dir(path: Path) -> None:
    """Create ``path`` and its missing parents with mode 0700 (Path.mkdir(parents=True) would
    give the parents the umask's mode: 0775 under umask 002, Debian's and Ubuntu's default,
    which the trust check then refuses)."""
    missing = []
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            folder.mkdir(mode=0o700)
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is not a directory")


def _is_damaged(exc) -> bool:
    """SQLite found the database file itself unreadable ("file is not a database", "database
    disk image is malformed"), as opposed to unreachable (permissions, a lock, a full disk:
    OperationalError)."""
    return (isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)
            or isinstance(exc, UnicodeDecodeError))


def _why_not_writable(exc) -> str:
    """Why a cache opens read-only, in words: a full disk is not a read-only directory."""
    text = f"{type(exc).__name__}: {exc}"
    if getattr(exc, "errno", None) == errno.ENOSPC or "disk is full" in str(exc):
        return f"is on a full disk ({text}); free some space"
    if getattr(exc, "errno", None) in (errno.EROFS, errno.EACCES, errno.EPERM) or "readonly" in str(exc):
        return f"is read-only ({text})"
    return f"cannot be opened for writing ({text})"


def _remove_value_files(root: Path) -> int:
    """Remove diskcache's value files (``ab/cd/<hex>.val``) under ``root`` and their emptied
    folders; nothing else, nothing through a symbolic link."""
    removed = 0
    for folder in sorted(root.glob("[0-9a-f][0-9a-f]/[0-9a-f][0-9a-f]")):
        if folder.is_symlink() or folder.parent.is_symlink() or not folder.is_dir():
            continue
        for val in folder.glob("*.val"):
            if val.is_file() and not val.is_symlink():
                val.unlink()
                removed += 1
        for empty in (folder, folder.parent):
            with contextlib.suppress(OSError):
                empty.rmdir()
    return removed


def _count_like(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _reset_settings(db: Path) -> None:
    """Drop every diskcache Settings row but its counters, and recount those from the Cache table
    (diskcache writes the settings back on open)."""
    con = sqlite3.connect(db, timeout=30)
    try:
        with con:
            con.execute("DELETE FROM Settings WHERE key NOT IN ('count', 'size', 'hits', 'misses')")
            con.execute("INSERT OR REPLACE INTO Settings VALUES ('count', (SELECT COUNT(*) FROM Cache))")
            con.execute("INSERT OR REPLACE INTO Settings VALUES ('size', (SELECT COALESCE(SUM(size), 0) FROM Cache))")
            con.execute("INSERT OR REPLACE INTO Settings VALUES ('hits', 0)")
            con.execute("INSERT OR REPLACE INTO Settings VALUES ('misses', 0)")
    finally:
        con.close()


def _warn(message: str) -> None:
    warnings.warn(message, CacheWarning, stacklevel=4)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class PlanCache:
    """The on-disk plan cache at ``path`` (default :func:`default_cache_dir`).

    Parameters
    ----------
    path : str or Path, optional
        The cache directory; created if missing (mode 0700, as are missing parents), unless
        ``create`` is False.
    size_limit : int, default 2 GiB
        Bytes kept on disk; least-recently-used entries are evicted beyond it.
    create : bool, default True
        False: never create the directory nor a database in it (``trnplan cache info`` pointed
        at a directory that holds no cache reads it as empty instead of writing a cache there).

    Notes
    -----
    Opening is lazy: nothing touches the disk until the first lookup. Every method that fails
    on a disk or database error warns (:class:`CacheWarning`) and behaves as a miss. A damaged
    database (:attr:`damaged`) is left as it is until :meth:`clear` (or :meth:`rebuild`) moves
    it aside and starts a new one.
    """

    def __init__(self, path=None, *, size_limit: int = 2 * 2**30, create: bool = True):
        self.path = _expand(path, "the plan cache directory") if path is not None else default_cache_dir()
        self.size_limit = size_limit
        self.create = create
        self._store = None
        self._broken: str | None = None  # why the cache is unusable, once found out
        self._damaged: str | None = None  # why its database is damaged, once found out
        self._readonly = False
        self._readonly_why = "is read-only"
        self._warned_readonly = False
        self._warned_untrusted = False

    def __repr__(self) -> str:
        return f"PlanCache({str(self.path)!r})"

    # ------------------------------------------------------------------ opening
    def _open(self):
        if self._store is not None or self._broken is not None:
            return self._store
        if not self.create and not (self.path / "cache.db").is_file():
            self._broken = f"no plan cache at {self.path}"  # read as empty, nothing written, nothing said
            return None
        try:
            _make_private_dir(self.path)
            self._store = self._open_diskcache()
        except STORE_ERRORS as exc:
            if _is_damaged(exc):
                self._mark_damaged(exc)
                self._broken = (f"cannot open the plan cache at {self.path}: its database is damaged "
                                f"({self._damaged}); planning without it. `trnplan cache clear` moves it aside "
                                f"and starts a new one")
                _warn(self._broken)
                return None
            # a read-only image (the production container) cannot open a diskcache for writing:
            # read it directly, so precompiled plans still load
            try:
                self._store = ReadOnlyStore(self.path)
                self._readonly = True
                self._readonly_why = _why_not_writable(exc)
            except (OSError, sqlite3.Error) as exc2:
                self._broken = (f"cannot open the plan cache at {self.path} ({type(exc).__name__}: {exc}; "
                                f"read-only: {type(exc2).__name__}: {exc2})")
                _warn(self._broken + "; planning without it")
        return self._store

    def _open_diskcache(self):
        """diskcache's Cache over the directory, every setting given here, so that none is read
        from the database's Settings table (a row of the wrong type there broke every open);
        a table that still fails (an unknown ``disk_`` key) is reset with one warning."""
        settings = {**diskcache.core.DEFAULT_SETTINGS, "size_limit": self.size_limit,
                    "eviction_policy": "least-recently-used"}
        try:
            store = diskcache.Cache(str(self.path), disk=JSONOnlyDisk, timeout=30, **settings)
            # the counters diskcache keeps in Settings (not settable on open): a NULL or text
            # "size" broke every eviction and `cache info` (found by tests/test_fuzz.py)
            bad = [k for k in diskcache.core.METADATA if not _count_like(store.reset(k))]
            if not bad:
                return store
            store.close()
            raise ValueError(f"its counters {bad} are not integers ≥ 0")
        except UnicodeDecodeError:
            raise  # bytes damaged inside the database file, not a bad setting: _open says so
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            _warn(f"plan cache {self.path}: its Settings table is damaged ({type(exc).__name__}: {exc}); "
                  f"resetting it (the entries are kept)")
            _reset_settings(self.path / "cache.db")
            return diskcache.Cache(str(self.path), disk=JSONOnlyDisk, timeout=30, **settings)

    def _mark_damaged(self, exc) -> None:
        self._damaged = f"{type(exc).__name__}: {exc}"

    @property
    def damaged(self) -> str | None:
        """Why the cache's database is damaged (SQLite cannot read it), or None."""
        self._open()
        return self._damaged

    def rebuild(self) -> str:
        """Move a damaged database aside (``cache.db.damaged-<UTC time>``, with its ``-wal`` and
        ``-shm``), remove the value files it named, start a new empty cache; say what was done.

        Nothing is deleted but diskcache's own value files (``ab/cd/<hex>.val`` inside the
        directory): the damaged database is kept for inspection.
        """
        why = self.damaged
        if why is None:
            return f"the plan cache in {self.path} is not damaged; nothing rebuilt"
        self.close()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        moved = self.path / f"cache.db.damaged-{stamp}"
        for suffix in ("", "-wal", "-shm"):
            old = self.path / f"cache.db{suffix}"
            if old.exists():
                old.rename(self.path / f"{moved.name}{suffix}")
        removed = _remove_value_files(self.path)
        self._broken = self._damaged = None
        self._readonly = self._warned_readonly = False
        self.create = True  # it held a cache: the new one goes where the damaged one was
        self._open()
        state = "a new empty cache is ready" if self._store is not None and not self._readonly else (
            f"a new cache could not be opened: {self._broken or 'it ' + self._readonly_why}")
        return (f"the plan cache database in {self.path} was damaged ({why}): moved it to {moved.name}, removed "
                f"{removed} value file(s); {state}")

    @property
    def unusable_reason(self) -> str | None:
        """Why the cache cannot be used at all (None if it can, possibly read-only)."""
        self._open()
        return self._broken

    @property
    def usable(self) -> bool:
        return self._open() is not None

    def check_trusted(self) -> None:
        """Raise :class:`UntrustedCacheError` if other users can write the cache.

        Untrusted: the directory, its database (``cache.db`` and SQLite's ``-wal`` and ``-shm``
        files, which hold the records and the artifacts' sha256) or any of its value files and
        folders is group- or world-writable, or owned by a user other than this one or root.

        Artifacts are native code (compiled kernels); loading them from files another user can
        write is running that user's code. ``TRNPLAN_TRUST_CACHE=1`` opts in.
        """
        reason = self.untrusted_reason()
        if reason is not None:
            raise UntrustedCacheError(
                f"the plan cache {self.path}: {reason}; its compiled artifacts would run that code. Fix its "
                f"permissions (chmod -R go-w), use another TRNPLAN_CACHE_DIR, or set TRNPLAN_TRUST_CACHE=1 "
                f"to trust it"
            )

    def untrusted_reason(self) -> str | None:
        """What in the cache other users can write (None: nothing, or ``TRNPLAN_TRUST_CACHE=1``)."""
        if config.trust_cache() or not self.path.exists():
            return None
        for path in _cache_files(self.path):
            try:
                st = path.lstat()
            except OSError:
                continue  # gone meanwhile (a WAL merged, a value evicted)
            why = _writable_by_others(st)
            if why is not None:
                what = "the directory" if path == self.path else str(path.relative_to(self.path))
                return (f"{what} can be written by {why} (mode {stat.filemode(st.st_mode)}, "
                        f"owner uid {st.st_uid})")
        return None

    def _warn_untrusted_wisdom(self) -> None:
        """Wisdom is data (validated on read, never executed), but a plan another user planted
        can still be slow or steer which code runs: say so, once per cache."""
        if self._warned_untrusted:
            return
        self._warned_untrusted = True
        reason = self.untrusted_reason()
        if reason is not None:
            _warn(f"plan cache {self.path}: {reason}; its plans are used (validated JSON) but another user "
                  f"may have written them, and its artifacts are refused. Fix its permissions (chmod -R go-w) "
                  f"or set TRNPLAN_TRUST_CACHE=1")

    # ------------------------------------------------------------------ raw access
    def _get(self, key: str):
        store = self._open()
        if store is None:
            return None
        try:
            return store.get(key)
        except (UnsafeEntry, *STORE_ERRORS) as exc:
            self._unreadable(key, exc)
        return None

    def _unreadable(self, key: str, exc: Exception) -> None:
        """An entry that could not be read: an unsafe one is forgotten, a store error read as a miss."""
        if isinstance(exc, UnsafeEntry):
            _warn(f"plan cache {self.path}: entry {key!r} is unsafe to read ({exc}: foreign or tampered); "
                  f"forgetting it")
            self._delete(key)
            return
        if _is_damaged(exc):
            self._mark_damaged(exc)
        _warn(f"plan cache {self.path}: cannot read {key!r} ({type(exc).__name__}: {exc}); treating it as a miss"
              + ("; its database is damaged: `trnplan cache clear` rebuilds it" if self._damaged else ""))

    def _write(self, op: str, key: str, value) -> bool:
        """``store.add`` (first writer wins) or ``store.set``; False if not written.

        The first write failure (read-only directory, full disk) warns once and turns writing
        off for this PlanCache; reads go on.
        """
        store = self._open()
        if store is None:
            return False
        if self._readonly:
            if not self._warned_readonly:
                self._warned_readonly = True
                _warn(f"plan cache {self.path} {self._readonly_why}; new plans are not stored")
            return False
        try:
            return getattr(store, op)(key, value)
        except STORE_ERRORS as exc:
            self._readonly = self._warned_readonly = True
            _warn(f"plan cache {self.path}: cannot write ({type(exc).__name__}: {exc}); running without "
                  f"writing to the cache")
            return False

    def _add(self, key: str, value) -> bool:
        return self._write("add", key, value)

    def _set(self, key: str, value) -> bool:
        return self._write("set", key, value)

    def _delete(self, key: str) -> None:
        store = self._open()
        if store is None or self._readonly:
            return
        try:
            store.delete(key)
        except STORE_ERRORS:
            pass

    def _keys(self, prefix: str = ""):
        store = self._open()
        if store is None:
            return []
        try:
            return [k for k in store.iterkeys() if isinstance(k, str) and k.startswith(prefix)]
        except UnsafeEntry:
            # a foreign writer stored a pickled key: list the string keys without unpickling it
            _warn(f"plan cache {self.path}: a pickled (foreign) key is ignored; `trnplan cache clear` removes it")
            try:
                reader = ReadOnlyStore(self.path)
                try:
                    return [k for k in reader.iterkeys() if isinstance(k, str) and k.startswith(prefix)]
                finally:
                    reader.close()
            except (OSError, sqlite3.Error) as exc:
                _warn(f"plan cache {self.path}: cannot list entries ({type(exc).__name__}: {exc})")
                return []
        except STORE_ERRORS as exc:
            _warn(f"plan cache {self.path}: cannot list entries ({type(exc).__name__}: {exc})")
            return []

    # ------------------------------------------------------------------ records
    # The typed API every caller uses: JSON records under string keys. The record kinds besides
    # wisdom and artifacts, each keyed by the fingerprint digest: ``probe:`` (a device's precision
    # probe), ``calibration:`` (the learned cost model), ``load_check:`` (an AOT load failure).
    def get_record(self, key: str, parse=None):
        """The JSON record under ``key``, checked by ``parse``; None if there is none or it is damaged.

        The one damaged-record policy of the cache: an entry that is not JSON text, is nested
        too deep to parse, or that ``parse`` rejects (by raising any of :data:`RECORD_ERRORS`) is
        forgotten with one :class:`CacheWarning` naming the key and what is wrong, and reads as
        a miss. A record kind is written by one module and read back through its ``parse``,
        which checks every field's type and range (a multiplier of 0 or a string where a count
        belongs must never reach arithmetic: one such record would break every ``plan_many``
        on the machine until removed by hand).

        Parameters
        ----------
        key : str
            The record's key (``probe:...``, ``calibration:...``, ...).
        parse : callable, optional
            record -> what the caller uses; raises on a record that is not one of its kind.
            None: the JSON value as it is.
        """
        text = self._get(key)
        if text is None:
            return None
        try:
            if not isinstance(text, str):
                raise TypeError(f"a {type(text).__name__} entry, not JSON text")
            record = json.loads(text)
            return record if parse is None else parse(record)
        except RECORD_ERRORS as exc:
            kind = key.split(":", 1)[0]
            _warn(f"plan cache {self.path}: {kind} record {key!r} is not valid ({type(exc).__name__}: "
                  f"{str(exc)[:200]}); forgetting it")
            self._delete(key)
            return None

    def update_record(self, key: str, update, parse=None):
        """Read, change and write the record under ``key`` in one transaction; the record written.

        ``update(current)`` gets the stored record (checked by ``parse`` as :meth:`get_record`
        does; None if there is none or it was damaged) and returns the new one. Processes that
        update the same record at once each see the others' writes: calibration samples were
        lost otherwise (4 processes measuring kept 210 of 400, issue 34). Without a writable
        cache ``update`` still runs, and its result is returned unstored.
        """
        store = self._open()
        if store is None or self._readonly:
            new = update(self.get_record(key, parse))
            self.set_record(key, new)
            return new
        try:
            with store.transact():
                new = update(self.get_record(key, parse))
                store.set(key, json.dumps(new, sort_keys=True))
            return new
        except STORE_ERRORS as exc:
            self._readonly = self._warned_readonly = True
            _warn(f"plan cache {self.path}: cannot write ({type(exc).__name__}: {exc}); running without "
                  f"writing to the cache")
            return None

    def add_record(self, key: str, record) -> bool:
        """Store ``record`` (JSON) unless an entry exists: the first writer wins. True if written."""
        return self._add(key, json.dumps(record, sort_keys=True))

    def set_record(self, key: str, record) -> bool:
        """Store ``record`` (JSON) under ``key``, replacing what is there. True if written."""
        return self._set(key, json.dumps(record, sort_keys=True))

    def forget(self, key: str) -> None:
        """Remove the entry under ``key`` (a record or an artifact), if any; a wisdom record's
        compiled-graph record (``compiled:<key>``, :mod:`trnplan.cache.compiled`) goes with it."""
        self._delete(key)
        if key.startswith("wisdom:"):
            self._delete(f"compiled:{key}")

    def keys(self, prefix: str = "") -> list[str]:
        """The keys that start with ``prefix`` (``wisdom:``, ``artifact:``, ``probe:``, ...)."""
        return self._keys(prefix)

    # ------------------------------------------------------------------ wisdom
    def get_wisdom(self, key: str) -> dict | None:
        """The wisdom record under ``key``, or None (a garbled record warns and is forgotten)."""
        text = self._get(key)
        return None if text is None else self._wisdom_record(key, text)

    def first_wisdom(self, keys) -> tuple[dict | None, str | None]:
        """(record, key): the first of ``keys`` (best first) that holds a wisdom record, or (None, None).

        One request may be answered from up to six keys (the efforts that serve it, FFTW's order,
        each also exportable); they are read over one opening of the store, and a garbled record
        is forgotten with a warning and passed over, as :meth:`get_wisdom` does."""
        store = self._open()
        if store is None:
            return None, None
        for key in keys:
            try:
                text = store.get(key)
            except (UnsafeEntry, *STORE_ERRORS) as exc:
                self._unreadable(key, exc)
                continue
            record = None if text is None else self._wisdom_record(key, text)
            if record is not None:
                return record, key
        return None, None

    def _wisdom_record(self, key: str, text) -> dict | None:
        """The stored entry ``text`` of ``key`` as a wisdom record, or None (forgotten with a warning)."""
        self._warn_untrusted_wisdom()
        record = parse_wisdom(text)
        if record is None:
            _warn(f"plan cache {self.path}: wisdom entry {key!r} is not a valid record; forgetting it and re-planning")
            self._delete(key)
        return record

    def add_wisdom(self, key: str, record: dict) -> dict:
        """Store ``record`` unless another process already did; return the record that is stored."""
        if self._add(key, json.dumps(record, sort_keys=True)):
            return record
        return self.get_wisdom(key) or record

    def update_wisdom(self, key: str, record: dict) -> None:
        """Store ``record`` under ``key`` over what is there (the same plan with new entries:
        artifacts, FFTW's decision)."""
        self._set(key, json.dumps(record, sort_keys=True))

    def replace_wisdom(self, key: str, record: dict, stale: dict) -> dict:
        """Replace the record ``stale`` under ``key`` with ``record``; return the record that is stored.

        The one exception to first-writer-wins: a measured record found bogus on reuse (its
        winner lost to the default) is replaced by a new measurement. The compare and the write
        are one transaction, so when several processes find the same record bogus, the first
        to re-measure wins and the others read its record (``stale`` no longer stored: nothing
        is written), as with :meth:`add_wisdom`.

        Parameters
        ----------
        key : str
            The wisdom key.
        record : dict
            The new record.
        stale : dict
            The record found bogus, as read from this cache.

        Returns
        -------
        dict
            ``record``, or the record another process stored first (also when ``key`` was
            dropped meanwhile: then ``record`` is added).
        """
        store = self._open()
        if store is None or self._readonly:
            return self.add_wisdom(key, record)
        try:
            with store.transact():
                text = store.get(key)
                current = parse_wisdom(text) if text is not None else None
                if current is not None and current != stale:
                    return current
                store.set(key, json.dumps(record, sort_keys=True))
                return record
        except STORE_ERRORS as exc:
            _warn(f"plan cache {self.path}: cannot replace {key!r} ({type(exc).__name__}: {exc}); the stale "
                  f"record stays")
            return record

    def wisdom_for_problem(self, problem_digest: str) -> list[dict]:
        """Every stored record for a problem digest, under any fingerprint (for miss reports)."""
        out = []
        for key in self._keys(f"wisdom:{problem_digest}:"):
            rec = self.get_wisdom(key)
            if rec is not None:
                out.append(rec)
        return out

    # ------------------------------------------------------------------ artifacts
    def get_artifact(self, key: str, sha256: str) -> bytes | None:
        """The artifact bytes under ``key`` if their sha256 matches; else warn, forget, None."""
        data = self._get(key)
        if data is None:
            return None
        if not isinstance(data, bytes) or _sha256(data) != sha256:
            _warn(f"plan cache {self.path}: artifact {key!r} does not match the sha256 in its wisdom record; "
                  f"rejecting it and rebuilding")
            self._delete(key)
            return None
        return data

    def add_artifact(self, key: str, data: bytes) -> bytes:
        """Store ``data`` unless present; return the bytes that are stored (first writer wins)."""
        if self._add(key, data):
            return data
        stored = self._get(key)
        return stored if isinstance(stored, bytes) else data

    # ------------------------------------------------------------------ stats and admin
    def count(self, name: str, amount: float = 1) -> None:
        store = self._open()
        if store is None or self._readonly:
            return
        try:
            if isinstance(amount, int):
                store.incr(f"stats:{name}", amount, default=0)
            else:  # float totals (seconds): read-modify-write inside a transaction
                with store.transact():
                    store.set(f"stats:{name}", float(store.get(f"stats:{name}", 0.0)) + amount)
        except (OSError, sqlite3.Error, diskcache.Timeout, UnsafeEntry, TypeError, ValueError):
            pass  # a damaged counter is not worth a warning: it only feeds `trnplan cache info`

    def stats(self) -> dict:
        """Counters and sizes: hits, misses, compiles, entries, bytes, compile seconds saved."""
        store = self._open()
        names = ("wisdom_hits", "wisdom_misses", "artifact_hits", "compiles", "compile_seconds",
                 "compile_seconds_saved")
        out = {}
        for name in names:
            value = self._get(f"stats:{name}")
            out[name] = value if isinstance(value, (int, float)) else 0
        out["wisdom_entries"] = len(self._keys("wisdom:"))
        out["artifact_entries"] = len(self._keys("artifact:"))
        try:
            out["bytes"] = int(store.volume()) if store is not None else 0
        except (OSError, sqlite3.Error, TypeError, ValueError):
            out["bytes"] = 0
        out["path"] = str(self.path)
        out["size_limit"] = self.size_limit
        return out

    def records(self) -> list[tuple[str, dict]]:
        """All (key, wisdom record) pairs."""
        out = []
        for key in sorted(self._keys("wisdom:")):
            rec = self.get_wisdom(key)
            if rec is not None:
                out.append((key, rec))
        return out

    def clear(self) -> int:
        """Delete every entry; the number deleted. A damaged database is rebuilt (:meth:`rebuild`,
        with a warning saying so) and 0 returned."""
        store = self._open()
        if self._damaged is not None:
            _warn(self.rebuild())
            return 0
        if store is None:
            return 0
        if self._readonly:
            _warn(f"plan cache {self.path} {self._readonly_why}; nothing cleared")
            return 0
        try:
            return store.clear()
        except STORE_ERRORS as exc:
            _warn(f"plan cache {self.path}: cannot clear ({type(exc).__name__}: {exc})")
            return 0

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


#: the fields every wisdom record has, and their JSON types
_REQUIRED = {"format": int, "problem": dict, "fingerprint": dict, "tree": dict}


def parse_wisdom(text) -> dict | None:
    """Validate a stored wisdom record (JSON text); None if it is not one."""
    if not isinstance(text, str):
        return None
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None
    # map over builtins, not a generator: no Python call per field on every wisdom hit
    if not isinstance(record, dict) or not all(map(isinstance, map(record.get, _REQUIRED), _REQUIRED.values())):
        return None
    if record["format"] != WISDOM_FORMAT:
        return None
    candidates = record.get("candidates", [])
    if not isinstance(candidates, list):
        return None
    number = (int, float, type(None))
    for c in candidates:  # a loop, not all(genexpr): a wisdom hit reads every candidate (tools/count_calls.py)
        if not (isinstance(c, dict) and isinstance(c.get("solver"), str) and isinstance(c.get("verdict"), str)
                and isinstance(c.get("time_us"), number) and isinstance(c.get("error"), number)):
            return None
    artifacts = record.get("artifacts", {})
    if not isinstance(artifacts, dict):
        return None
    for a in artifacts.values():
        if not (isinstance(a, dict) and isinstance(a.get("key"), str) and isinstance(a.get("sha256"), str)):
            return None
    return record


class ReadOnlyStore:
    """Reads a diskcache directory without writing anything (for read-only filesystems).

    diskcache itself writes on open (settings, WAL files), which fails on a read-only image.
    This opens the SQLite index with ``immutable=1`` and reads the same rows diskcache would:
    raw text/bytes values in the row, larger ones in files next to it. Pickled values are
    refused, as in :class:`JSONOnlyDisk`.
    """

    def __init__(self, path: Path):
        db = Path(path) / "cache.db"
        if not db.is_file():
            raise OSError(f"no cache.db in {path}")
        self._dir = Path(path)
        try:  # read-only but WAL-aware: sees writes not yet merged into the database file
            self._con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
            self._con.execute("SELECT count(*) FROM Cache").fetchone()
        except sqlite3.Error:
            # a read-only filesystem cannot host the WAL index: read the database file as is
            self._con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            self._con.execute("SELECT count(*) FROM Cache").fetchone()  # fails early on a foreign file
            wal = Path(f"{db}-wal")
            if wal.is_file() and wal.stat().st_size > 0:
                _warn(f"plan cache {path}: its write-ahead log was never merged (a writer did not close the "
                      f"cache); entries in it are not visible read-only — run `trnplan cache info` on a "
                      f"writable copy once to merge it")

    def get(self, key, default=None):
        row = self._con.execute("SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1",
                                (key,)).fetchone()
        if row is None:
            return default
        mode, filename, value = row
        if mode == diskcache.core.MODE_RAW:
            return value
        if mode == diskcache.core.MODE_BINARY:
            return Path(value_path(self._dir, filename)).read_bytes()
        if mode == diskcache.core.MODE_TEXT:
            return Path(value_path(self._dir, filename)).read_text(encoding="UTF-8")
        raise UnsafeEntry("a pickled entry: refusing to unpickle it")

    def iterkeys(self):
        for (key,) in self._con.execute("SELECT key FROM Cache WHERE raw = 1 ORDER BY rowid"):
            yield key

    def volume(self) -> int:
        (size,) = self._con.execute("SELECT COALESCE(SUM(size), 0) FROM Cache").fetchone()
        return int(size)

    def close(self) -> None:
        self._con.close()
