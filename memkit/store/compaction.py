"""Compaction: rewrite a Chroma persist directory so deleted text is gone from its files.

Forensic residue and :meth:`TieredMemoryStore.compact` (measured on chromadb 1.5.9
with :func:`memkit.residue.chroma.scan`):

* ``collection.delete`` leaves the deleted text in ``chroma.sqlite3``: in freed b-tree
  cells of ``embedding_metadata``, its string index and the FTS5 content table (chroma's
  SQLite does not use ``secure_delete``), and as a *live* row of the write-ahead log
  table ``embeddings_queue`` (the original ``ADD``/``UPDATE`` record with the document
  and metadata as JSON). chroma purges that log only up to the last persisted HNSW
  state, i.e. every ``sync_threshold`` (1000) writes, so records written since then
  stay. Purging them by hand is unsafe: on reopen, chroma rebuilds the unpersisted HNSW
  part from the log (tested: an emptied log leaves queries returning nothing).
* SQLite ``VACUUM`` (or ``chroma vacuum``, which purges the log up to the persisted
  state and vacuums) removes the freed cells but not log rows newer than the last
  persist: enough for a 10,000-chunk store whose deleted chunks were written long
  before, not for a small store or recent writes.
* The HNSW ``data_level0.bin`` is written from a ``malloc``-ed buffer at full capacity
  (an index persisted while empty is 100 slots of uninitialized memory), and chroma
  rewrites it on the first read after a client opens. Its unused slots can hold
  whatever the process heap held, including text the process handled after deleting
  it (observed: the secret in ``data_level0.bin`` of a freshly rebuilt store).
* ``delete_collection`` leaves the collection's list-valued metadata (table
  ``embedding_metadata_array``) as live rows keyed by internal record ids, and the next
  records written to any collection of the database reuse those ids: they come back
  with metadata they never had, and ``where`` filters match them
  (chroma-core/chroma#7594). A secret in such a list is found on ``disk_sqlite``
  (tests/test_residue.py); memkit never deletes a collection with records in it
  (:meth:`memkit.store.tiered.TieredMemoryStore.close` deletes the records first), so closing one
  in-memory store cannot give the next one's chunks its ``source_ids``.

:meth:`memkit.store.tiered.TieredMemoryStore.compact` (:func:`compact_store`) and
:func:`compact_directory` therefore rebuilds every collection into a fresh
sibling directory from the live records (stored vectors, no re-embedding), swaps it in,
overwrites the old files with zeros before unlinking them, re-opens, triggers chroma's
first-read rewrite of the HNSW files and zeroes their unused capacity. After it, the
scanner finds no copy on any surface (tests/test_residue.py); a later HNSW persist by a
process that still holds the secret in memory can bring heap bytes back.

Other processes and crashes (tests/test_store_processes.py): compaction holds the
directory's inter-process lock exclusive (:mod:`memkit.store.dirlock`) and refuses, unless
forced, while processes that are not memkit stores hold its files open. Before the
swap it fsyncs the rebuilt directory, writes a journal
(``.<name>.memkit/compaction.json``: the rebuilt directory's inode) and bumps the
directory's generation, so every memkit store reopens its client before its next
operation; the swap is one ``renameat2(RENAME_EXCHANGE)`` (Linux; two renames
elsewhere). A directory that cannot be renamed (a mount point, such as a container
volume: ``EBUSY``) keeps its place: its files are shredded and the rebuilt ones copied
in, the journal saying so (``"mode": "in place"``), so a killed run is finished from
the intact build. :func:`recover`, run by :func:`compact_directory` and by every store that
opens a directory with a journal or a build directory beside it, rolls a killed
compaction forward (the swap happened: shred the old directory, rewrite and zero the
HNSW slack) or back (shred the build; the directory still holds the deleted text, and
the residue scanner reports it).

Why this module is long: the rebuild, the two ways to put it in place (an atomic swap,
or a copy into a directory that cannot be renamed), the HNSW slack zeroing and the
crash recovery share one journal, and each step's safety rests on the others' order.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
import sqlite3
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import memkit  # noqa: F401  (sets telemetry/offline environment before chromadb loads)
from memkit.errors import StoreError
from memkit.store.client import client_settings
from memkit.store.dirlock import DirectoryLock, foreign_holders, lock_dir

__all__ = ["CompactionReport", "compact_directory", "compact_store", "compaction_blocker", "leftovers",
           "needs_recovery", "recover"]


@dataclass
class CompactionReport:
    """Result of :meth:`TieredMemoryStore.compact`.

    Attributes:
        seconds: wall-clock duration of the compaction.
        bytes_before: total size in bytes of the files under the store directory before.
        bytes_after: the same after compaction.
        records: number of records (all collections) carried into the rebuilt store.
        method: ``"rebuild"`` (fresh directory swapped in), ``"in place"`` (the
            directory cannot be renamed, e.g. a mount point: its files were replaced by
            the rebuilt ones) or ``"none"`` (in-memory store).
    """

    seconds: float
    bytes_before: int
    bytes_after: int
    records: int = 0
    method: str = "rebuild"


def _dir_bytes(path: Path) -> int:
    """Total size in bytes of the regular files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _shred_tree(path: Path) -> None:
    """Overwrite every file under ``path`` with zeros, fsync, then remove the tree.

    Best effort against recovery from the old files' blocks; copy-on-write or
    journaling file systems and SSD wear levelling can still keep old blocks.
    """
    block = b"\0" * (1 << 20)
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            size = p.stat().st_size
            with open(p, "r+b") as fh:
                left = size
                while left > 0:
                    n = min(left, len(block))
                    fh.write(block[:n])
                    left -= n
                fh.flush()
                os.fsync(fh.fileno())
    shutil.rmtree(path)


_HNSW_HEADER = struct.Struct("<IQQQQQQiIQQQdQ")
"""Layout of chroma's ``header.bin`` (hnswlib fork, version 1): version, offsetLevel0,
max_elements, cur_element_count, size_data_per_element, label_offset, offsetData,
maxlevel, enterpoint_node, maxM, maxM0, M, mult, ef_construction (100 bytes)."""


def zero_hnsw_slack(root: Path) -> int:
    """Zero the unused capacity of every HNSW ``data_level0.bin`` under ``root``, and
    the unused neighbour slots of its link lists (:func:`_zero_unused_links`).

    hnswlib allocates the level-0 buffer with ``malloc`` and chroma can write it out
    beyond ``cur_element_count`` (an index persisted while empty is written at full
    capacity), so those bytes are whatever the process heap held, which can include
    text the process handled, deleted secrets included. Bytes past
    ``cur_element_count * size_data_per_element`` are never read by the loader, so
    zeroing them is safe. chroma rewrites the files on the first read of a collection
    after a client opens and whenever it persists the index (every ``sync_threshold``
    writes), so a later write can bring such bytes back. Returns the number of bytes
    zeroed.
    """
    zeroed = 0
    for header in root.rglob("header.bin"):
        data = header.with_name("data_level0.bin")
        raw = header.read_bytes()
        if not data.is_file() or len(raw) != _HNSW_HEADER.size:
            continue
        fields = _HNSW_HEADER.unpack(raw)
        version, cur, size_per = fields[0], fields[3], fields[4]
        if version != 1 or size_per <= 0:
            continue
        used = cur * size_per
        total = data.stat().st_size
        if total > used:
            with open(data, "r+b") as fh:
                fh.seek(used)
                fh.write(b"\0" * (total - used))
                fh.flush()
                os.fsync(fh.fileno())
            zeroed += total - used
        zeroed += _zero_unused_links(header.parent, fields)
        # length.bin (one uint32 per element slot) is also written at full capacity.
        lengths = header.with_name("length.bin")
        if lengths.is_file() and lengths.stat().st_size > 4 * cur:
            buf = bytearray(lengths.read_bytes())
            if any(buf[4 * cur :]):
                zeroed += len(buf) - 4 * cur
                buf[4 * cur :] = bytes(len(buf) - 4 * cur)
                with open(lengths, "r+b") as fh:
                    fh.write(buf)
                    fh.flush()
                    os.fsync(fh.fileno())
    return zeroed


def _zero_unused_link_slots(buf: bytearray, start: int, capacity: int) -> int:
    """Zero the slots past the count of one hnswlib link list at ``buf[start:]``
    (a uint32 whose low 16 bits are the count, then ``capacity`` uint32 slots)."""
    count = int.from_bytes(buf[start : start + 2], "little")
    if count >= capacity:
        return 0
    lo, hi = start + 4 + 4 * count, start + 4 + 4 * capacity
    if any(buf[lo:hi]):
        buf[lo:hi] = bytes(hi - lo)
        return hi - lo
    return 0


def _zero_unused_links(segment: Path, fields: tuple[Any, ...]) -> int:
    """Zero unused neighbour slots in ``data_level0.bin`` and ``link_lists.bin``.

    hnswlib allocates each link list at full capacity (``maxM0`` slots at level 0,
    ``maxM`` above) with ``malloc`` and writes it whole, so the slots past a list's
    count hold heap bytes (found: fragments of chroma metadata JSON). The loader
    reads only ``count`` slots, so zeroing the rest is safe. Returns bytes zeroed.
    """
    offset0, cur, size_per = fields[1], fields[3], fields[4]
    max_m, max_m0 = fields[9], fields[10]
    zeroed = 0
    data = segment / "data_level0.bin"
    buf = bytearray(data.read_bytes())
    for i in range(min(cur, len(buf) // max(size_per, 1))):
        zeroed += _zero_unused_link_slots(buf, i * size_per + offset0, max_m0)
    links = segment / "link_lists.bin"
    lbuf = bytearray(links.read_bytes()) if links.is_file() else bytearray()
    lzeroed = 0
    pos, block = 0, 4 + 4 * max_m
    for _ in range(cur):
        if pos + 4 > len(lbuf):
            break
        size = int.from_bytes(lbuf[pos : pos + 4], "little")
        pos += 4
        for b in range(pos, min(pos + size, len(lbuf)) - block + 1, block):
            lzeroed += _zero_unused_link_slots(lbuf, b, max_m)
        pos += size
    for path, content, n in ((data, buf, zeroed), (links, lbuf, lzeroed)):
        if n:
            with open(path, "r+b") as fh:
                fh.write(content)
                fh.flush()
                os.fsync(fh.fileno())
    return zeroed + lzeroed


def _sqlite_collection_count(path: Path) -> int:
    uri = f"file:{path / 'chroma.sqlite3'}?mode=ro"
    con = sqlite3.connect(uri, uri=True)
    try:
        return int(con.execute("SELECT COUNT(*) FROM collections").fetchone()[0])
    finally:
        con.close()


_CHROMA_FILES = {"chroma.sqlite3", "chroma.sqlite3-wal", "chroma.sqlite3-shm", "chroma.sqlite3-journal"}
_SEGMENT_FILES = {"header.bin", "data_level0.bin", "length.bin", "link_lists.bin", "index_metadata.pickle"}
_FTS_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def not_chromas(path: Path) -> list[str]:
    """What a Chroma directory holds that chroma did not write and compaction would not
    rebuild: other files or folders (a side database, notes, a backup), files in a
    segment folder other than hnswlib's, tables in ``chroma.sqlite3`` that no chroma
    migration creates (chroma's own ``migrations`` table lists them). Compaction
    rebuilds the directory from chroma's records, so it refuses while these exist
    rather than delete them.

    Returns:
        Their names relative to ``path`` (tables as ``chroma.sqlite3:<table>``), sorted.
    """
    out = []
    for p in sorted(path.iterdir()):
        if p.is_dir() and not p.is_symlink() and _UUID.fullmatch(p.name):
            out += [f"{p.name}/{q.name}" for q in sorted(p.iterdir()) if q.name not in _SEGMENT_FILES]
        elif p.name not in _CHROMA_FILES:
            out.append(p.name + ("/" if p.is_dir() else ""))
    db = path / "chroma.sqlite3"
    if db.is_file():
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            migrations = " ".join(r[0] or "" for r in con.execute("SELECT sql FROM migrations"))
        except sqlite3.DatabaseError:
            return out  # not chroma's layout: the rebuild's own checks refuse it
        finally:
            con.close()
        created = set(re.findall(r'CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"?(\w+)',
                                 migrations, re.IGNORECASE))
        known = created | {"migrations", "acquire_write"} | {t + s for t in created for s in _FTS_SHADOWS}
        out += [f"chroma.sqlite3:{t}" for t in tables if t not in known and not t.startswith("sqlite_")]
    return out


def _not_chromas_reason(path: Path) -> str | None:
    extra = not_chromas(path)
    if not extra:
        return None
    return (f"{path} holds what chroma did not write ({', '.join(extra[:5])}"
            f"{f' and {len(extra) - 5} more' if len(extra) > 5 else ''}): compaction rebuilds the "
            "directory from chroma's records and would delete them. Move them out of the store's directory")


def _foreign_reason(path: Path) -> str | None:
    foreign = foreign_holders(path)
    if not foreign:
        return None
    return (f"processes that are not memkit stores hold {path} open ({'; '.join(foreign[:3])}): "
            "compaction replaces the directory, so their chroma clients would fail and lose the "
            "writes they make. Stop them, or pass force=True to compact anyway")


def compaction_blocker(store: Any, *, force: bool = False) -> str | None:
    """Why ``store.compact()`` (:func:`compact_store`) cannot run now, or ``None`` if it
    can. Changes nothing.

    Args:
        store: a :class:`memkit.store.tiered.TieredMemoryStore`.
        force: do not count processes that hold the directory without memkit's lock
            (:func:`memkit.store.dirlock.foreign_holders`).

    Forget modes that compact check this before their first change, so a forget
    either completes or refuses with the store untouched.
    """
    if store._kind == "memory":
        return None
    if store._kind != "persistent" or store.path is None:
        return ("the store is behind a chroma server: memkit cannot rewrite or read the "
                "server's files (deleted text stays in its SQLite pages and log)")
    if store._lock is None:
        return (f"{store.path.parent} is not writable: memkit cannot lock {store.path} or write "
                "the rebuilt directory beside it")
    if _sqlite_collection_count(store.path) != len(list(store._client.list_collections())):
        return f"{store.path} holds collections outside the default tenant/database"
    if (reason := _not_chromas_reason(store.path)) is not None:
        return reason
    from chromadb.api.shared_system_client import SharedSystemClient

    store._client.close()
    try:
        if str(store.path) in SharedSystemClient._identifier_to_system:
            return (f"another chroma client in this process holds {store.path} open; close "
                    "it, or use TieredMemoryStore.open(path) for one store object per directory")
    finally:
        store._open()
    return None if force else _foreign_reason(store.path)


def compact_store(store: Any, *, force: bool = False) -> CompactionReport:
    """Rewrite the store so deleted and overwritten text is gone from the disk: with
    the directory lock held exclusive (:mod:`memkit.store.dirlock`), :func:`compact_directory`'s
    rebuild and swap on the store's directory, this store's client closed around it.
    An in-memory store has nothing on disk (method ``"none"``).

    Args:
        store: a :class:`memkit.store.tiered.TieredMemoryStore`.
        force: compact although processes that are not memkit handles hold the directory.

    Returns:
        :class:`CompactionReport`.

    Raises:
        StoreError: :func:`compaction_blocker` names a reason, or the rebuilt store
            does not hold the same records (the directory is then unchanged).
        StoreBusyError: other processes' operations held the lock past its timeout.
    """
    t0 = time.perf_counter()
    if store._kind == "memory":
        return CompactionReport(time.perf_counter() - t0, 0, 0, store._collection.count(), "none")
    with store.exclusive("compaction"):
        reason = compaction_blocker(store, force=force)
        if reason is not None:
            raise StoreError(f"compact: {reason}")
        assert store.path is not None
        store._client.close()
        store._release_fd()
        try:
            report = _compact_locked(store.path, store._lock)
        finally:
            store._open()
            # chroma rewrites each HNSW segment (from uninitialized memory, see
            # zero_hnsw_slack) on the first read after a client opens; make that
            # happen now and clean up after it, so later reads (a residue scan) do not.
            for col in store._client.list_collections():
                col.count()
            zero_hnsw_slack(store.path)
            store._touch()
    report.seconds = time.perf_counter() - t0
    return report


def compact_directory(path: str | Path, *, force: bool = False, timeout: float | None = None) -> CompactionReport:
    """Rewrite any Chroma persist directory so deleted and overwritten text is gone
    from its files, adding nothing to it.

    With the directory lock held exclusive (:mod:`memkit.store.dirlock`; ``timeout`` seconds
    at most), finishes or undoes an earlier compaction that was killed
    (:func:`recover`), rebuilds every collection into a fresh sibling directory from
    the live records (ids, documents, metadata, stored vectors; collection metadata
    and configuration), VACUUMs it, zeroes HNSW slack, fsyncs it, records the swap in
    a journal, bumps the directory's generation, swaps it in atomically (a directory
    that cannot be renamed, such as a mount point, gets the rebuilt files copied in
    place), overwrites the old files with zeros and removes them (module doc). Works on directories
    other memory layers wrote: no memkit collection is created.

    Args:
        path: the directory; no chroma client of this process may hold it open.
        force: compact although processes that are not memkit handles hold it open.
        timeout: seconds to wait for the lock (default ``$MEMKIT_LOCK_TIMEOUT`` or 60).

    Returns:
        :class:`CompactionReport`.

    Raises:
        StoreError: not a Chroma directory, collections outside the default
            tenant/database, another client of this process holds it open, other
            processes hold it open without memkit's lock (and not ``force``), or the
            rebuilt store does not hold the same records (the directory is then unchanged).
        StoreBusyError: memkit stores of other processes held it past ``timeout``.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    t0 = time.perf_counter()
    path = Path(path).expanduser().resolve()
    if not (path / "chroma.sqlite3").is_file() and not needs_recovery(path):
        raise StoreError(f"compact: {path} is not a Chroma persist directory (no chroma.sqlite3)")
    if str(path) in SharedSystemClient._identifier_to_system:
        raise StoreError(f"compact: another chroma client in this process holds {path} open; close it first")
    lock = DirectoryLock(path, timeout)
    try:
        with lock.exclusive("compaction"):
            if (reason := _not_chromas_reason(path)) is not None and not needs_recovery(path):
                raise StoreError(f"compact: {reason}")
            if not force:
                reason = _foreign_reason(path)
                if reason is not None:
                    raise StoreError(f"compact: {reason}")
            report = _compact_locked(path, lock)
    finally:
        lock.close()
    report.seconds = time.perf_counter() - t0
    return report


# --------------------------------------------------------------------------- crash safety

_JOURNAL = "compaction.json"


def leftovers(path: Path) -> list[Path]:
    """Sibling directories a compaction of ``path`` writes: ``.<name>.compact-<hex>[-old]``."""
    pat = re.compile(rf"\.{re.escape(path.name)}\.compact-[0-9a-f]{{8}}(-old)?")
    try:
        return sorted(p for p in path.parent.iterdir() if pat.fullmatch(p.name))
    except OSError:
        return []


def needs_recovery(path: Path) -> bool:
    """Whether a compaction of ``path`` was interrupted (a journal or a build directory
    remains; cheap: one ``stat`` and one listing of the parent)."""
    return (lock_dir(path) / _JOURNAL).exists() or bool(leftovers(path))


def _ino(p: Path) -> int | None:
    try:
        return os.stat(p).st_ino
    except OSError:
        return None


def _fsync_dir(p: Path) -> None:
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for d in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        _fsync_dir(d)


def _write_journal(lock: DirectoryLock, record: dict[str, Any]) -> None:
    tmp = lock.dir / (_JOURNAL + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(record, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, lock.dir / _JOURNAL)
    _fsync_dir(lock.dir)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False
    where the call is missing or refused (the caller then renames twice)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


def _finish(path: Path) -> None:
    """After a swap: chroma rewrites each HNSW segment on the first read after a client
    opens (from uninitialized memory): make that happen now, then zero the slack."""
    import chromadb

    client = chromadb.PersistentClient(path=str(path), settings=client_settings())
    try:
        for col in client.list_collections():
            col.count()
    finally:
        client.close()
    zero_hnsw_slack(path)


_CANNOT_RENAME = frozenset({errno.EBUSY, errno.EXDEV, errno.EACCES, errno.EPERM})
"""``rename`` errors that mean the directory itself cannot be moved (a mount point such
as a container volume: ``EBUSY``; another file system: ``EXDEV``; a parent that refuses:
``EACCES``/``EPERM``); compaction then replaces the directory's files in place."""

_KEEP_IN_PLACE = frozenset({"lost+found"})
"""Entries of a mount point's root that belong to its file system, not to chroma."""


def _shred_entry(p: Path) -> None:
    """Overwrite a file (or every file of a directory) with zeros and remove it."""
    if p.is_dir() and not p.is_symlink():
        _shred_tree(p)
        return
    if p.is_file() and not p.is_symlink():
        with open(p, "r+b") as fh:
            fh.write(b"\0" * p.stat().st_size)
            fh.flush()
            os.fsync(fh.fileno())
    p.unlink()


def _replace_in_place(path: Path, fresh: Path, lock: DirectoryLock) -> None:
    """Make ``path``'s content the rebuilt ``fresh``'s, keeping ``path`` itself (a
    directory that cannot be renamed); the journal says ``"mode": "in place"``.

    Every entry of ``path`` (but :data:`_KEEP_IN_PLACE`) is shredded, ``fresh`` is
    copied in (copies: ``fresh`` may be on another file system) and fsynced, the
    journal records ``"copied"``, then ``fresh`` is shredded. ``fresh`` stays whole
    until the copy is complete, so :func:`recover` can always redo the copy.
    """
    for entry in list(path.iterdir()):
        if entry.name not in _KEEP_IN_PLACE:
            _shred_entry(entry)
    for entry in sorted(fresh.iterdir()):
        if entry.is_dir():
            shutil.copytree(entry, path / entry.name)
        else:
            shutil.copy2(entry, path / entry.name)
    _fsync_tree(path)
    _write_journal(lock, {"path": str(path), "fresh": str(fresh), "mode": "in place", "copied": True})
    _shred_tree(fresh)


def recover(path: Path, lock: DirectoryLock) -> str:
    """Finish or undo a compaction of ``path`` that was killed; hold ``lock`` exclusive.

    The journal (``.<name>.memkit/compaction.json``, written before the swap) names
    the rebuilt directory by inode. If ``path`` is the rebuilt one, the swap happened:
    the old directory is shredded and the HNSW slack zeroed (roll forward). Otherwise
    the original directory is kept (put back if a two-rename swap was cut between its
    renames) and the build is shredded (roll back: the forgotten text is still there,
    and :func:`memkit.residue.chroma.scan` says so). Build directories without a journal
    (killed before the swap) are shredded.

    Returns:
        ``"none"``, ``"rolled back"`` or ``"rolled forward"``.
    """
    journal = lock.dir / _JOURNAL
    done = "none"
    try:
        record = json.loads(journal.read_text())
    except (OSError, ValueError):
        record = None
    if record is not None and record.get("mode") == "in place":
        fresh = Path(record["fresh"])  # whole until "copied": the copy is redone from it
        if not record.get("copied") and fresh.is_dir():
            _replace_in_place(path, fresh, lock)
        elif fresh.exists():
            _shred_tree(fresh)
        _finish(path)
        journal.unlink()
        _fsync_dir(lock.dir)
        return "rolled forward"
    if record is not None:
        fresh_ino = int(record["fresh_ino"])
        if not path.exists():
            for name in (record.get("aside"), record.get("fresh")):
                if name and _ino(Path(name)) not in (None, fresh_ino):
                    os.rename(name, path)
                    break
        done = "rolled forward" if _ino(path) == fresh_ino else "rolled back"
    for leftover in leftovers(path):
        if _ino(leftover) != _ino(path):
            _shred_tree(leftover)
            if done == "none":
                done = "rolled back"
    if record is not None:
        if done == "rolled forward":
            _finish(path)
        journal.unlink()
        _fsync_dir(lock.dir)
    return done


def _compact_locked(path: Path, lock: DirectoryLock | None, *, coordinated: bool = True) -> CompactionReport:
    """Rebuild, swap and shred (:func:`compact_directory`); hold ``lock`` exclusive.

    ``coordinated=False`` is the uncoordinated compaction (no recovery, journal,
    fsync, generation or atomic exchange; ``lock`` unused), kept only so
    ``benchmarks/bench_compaction.py`` can measure what the coordination costs.
    """
    import chromadb
    from chromadb.api.shared_system_client import SharedSystemClient

    t0 = time.perf_counter()
    if lock is None and coordinated:
        raise StoreError(f"compact: cannot lock {path} (its parent directory is not writable), "
                         "and the rebuilt directory is written beside it")
    if lock is not None and coordinated:
        recover(path, lock)
    if not (path / "chroma.sqlite3").is_file():
        raise StoreError(f"compact: {path} is not a Chroma persist directory (no chroma.sqlite3)")
    if str(path) in SharedSystemClient._identifier_to_system:
        raise StoreError(f"compact: another chroma client in this process holds {path} open; close it first")
    before = _dir_bytes(path)
    con = sqlite3.connect(f"file:{path / 'chroma.sqlite3'}?mode=ro", uri=True)
    try:
        n_collections = int(con.execute("SELECT COUNT(*) FROM collections").fetchone()[0])
    finally:
        con.close()
    tag = uuid.uuid4().hex[:8]
    old_client = chromadb.PersistentClient(path=str(path), settings=client_settings())
    fresh = path.parent / f".{path.name}.compact-{tag}"
    records = 0
    try:
        cols = list(old_client.list_collections())
        if n_collections != len(cols):
            raise StoreError(
                f"compact: {path} holds collections outside the default tenant/database; "
                "memkit only rebuilds the default database"
            )
        expected: dict[str, int] = {}
        new_client = chromadb.PersistentClient(path=str(fresh), settings=client_settings())
        try:
            for col in cols:
                config = dict(col.configuration or {})
                # Keep a foreign collection's embedding-function config (memkit's is None);
                # records are copied with their vectors, so it is never called here.
                ef = config.pop("embedding_function", None)
                config = {k: v for k, v in config.items() if v is not None}
                new = new_client.create_collection(
                    col.name, configuration=config or None, metadata=col.metadata or None,
                    embedding_function=ef,
                )
                n = col.count()
                expected[col.name] = n
                b = max(1, int(old_client.get_max_batch_size()))
                for off in range(0, n, b):
                    res = col.get(limit=b, offset=off, include=["documents", "metadatas", "embeddings"])
                    if not res["ids"]:
                        break
                    new.add(ids=res["ids"], documents=res["documents"], metadatas=res["metadatas"],
                            embeddings=np.asarray(res["embeddings"], dtype=np.float32))
                    records += len(res["ids"])
            got = {c.name: c.count() for c in new_client.list_collections()}
            if got != expected:
                raise StoreError(f"compact: rebuilt store holds {got}, expected {expected}")
        finally:
            new_client.close()
    except BaseException:
        old_client.close()
        if fresh.exists():  # its HNSW slack can hold heap bytes: shred, not just remove
            _shred_tree(fresh)
        raise
    old_client.close()
    # The rebuild itself purged log rows (chroma trims its log at each HNSW persist):
    # their pages hold only live data, but VACUUM returns the space.
    con = sqlite3.connect(fresh / "chroma.sqlite3")
    try:
        con.execute("VACUUM")
    finally:
        con.close()
    zero_hnsw_slack(fresh)
    if str(path) in SharedSystemClient._identifier_to_system:
        _shred_tree(fresh)
        raise StoreError(f"compact: another chroma client in this process holds {path} open; close it first")
    aside = path.parent / f".{path.name}.compact-{tag}-old"
    if not coordinated or lock is None:
        os.rename(path, aside)
        os.rename(fresh, path)
        _shred_tree(aside)
        _finish(path)
        return CompactionReport(time.perf_counter() - t0, before, _dir_bytes(path), records, "rebuild")
    _fsync_tree(fresh)
    _write_journal(lock, {"path": str(path), "fresh": str(fresh), "fresh_ino": os.stat(fresh).st_ino,
                          "aside": str(aside), "pid": os.getpid(), "time": time.time()})
    lock.bump_generation()  # before the swap: no handle may keep using the old directory
    method = "rebuild"
    if _exchange(fresh, path):
        os.rename(fresh, aside)  # now the old directory
    else:
        try:
            os.rename(path, aside)
        except OSError as exc:
            if exc.errno not in _CANNOT_RENAME:
                raise
            method = "in place"  # a mount point: the directory stays, its files are replaced
            _write_journal(lock, {"path": str(path), "fresh": str(fresh), "mode": "in place"})
            _replace_in_place(path, fresh, lock)
        else:
            os.rename(fresh, path)
    if method == "rebuild":
        _fsync_dir(path.parent)
        _shred_tree(aside)
    _finish(path)
    (lock.dir / _JOURNAL).unlink()
    _fsync_dir(lock.dir)
    return CompactionReport(time.perf_counter() - t0, before, _dir_bytes(path), records, method)
