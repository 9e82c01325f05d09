"""Chroma client plumbing shared by :mod:`memkit.store.tiered` and :mod:`memkit.store.compaction`:
client settings, which in-memory clients memkit stores share, refusing directories
memkit did not create, dropping a collection without leaving rows behind, the
process's chroma Systems per directory generation (one opened on a directory that a
compaction replaced is evicted, :mod:`memkit.store.dirlock`), and running store methods
as locked operations.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

from memkit.errors import StoreError
from memkit.scan.matching import matcher, scalar_text


def client_settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def refuse_foreign(path: Path, collection: str) -> None:
    """Refuse a Chroma directory that holds collections but none of memkit's.

    Read-only (a ``mode=ro`` SQLite connection): a directory memkit did not create
    (another memory layer's) must not gain collections by being opened.

    Raises:
        StoreError: the directory holds only collections memkit did not write.
    """
    db = path / "chroma.sqlite3"
    if not db.is_file():
        return
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            names = [n for (n,) in con.execute("SELECT name FROM collections")]
            ours = {n for (n,) in con.execute(
                "SELECT c.name FROM collections c JOIN collection_metadata m ON m.collection_id = c.id "
                "WHERE m.key = 'memkit'")}
        finally:
            con.close()
    except sqlite3.Error:
        return  # not readable as chroma's schema: let chromadb say what is wrong
    if names and not ours and collection not in names:
        raise StoreError(
            f"{path} is a Chroma directory memkit did not create (collections: {sorted(names)[:5]}); "
            "memkit will not add collections to it. Scan it with `memkit residue` (read-only), "
            "or pass create=True to TieredMemoryStore to add memkit's collections on purpose."
        )


_CLIENT_USERS: dict[int, int] = {}
_CLIENT_USERS_LOCK = threading.Lock()


def hold_client(client: Any) -> None:
    """Count a memkit store open on ``client`` (see :func:`release_client`)."""
    with _CLIENT_USERS_LOCK:
        _CLIENT_USERS[id(client)] = _CLIENT_USERS.get(id(client), 0) + 1


def release_client(client: Any) -> int:
    """Uncount a store on ``client``; returns how many memkit stores still use it. An
    in-memory store closes its own client only when none does."""
    with _CLIENT_USERS_LOCK:
        n = _CLIENT_USERS.get(id(client), 1) - 1
        if n <= 0:
            _CLIENT_USERS.pop(id(client), None)
        else:
            _CLIENT_USERS[id(client)] = n
        return max(n, 0)


def drop_collection(client: Any, col: Any) -> None:
    """Delete ``col``'s records, then the collection.

    chromadb 1.5.9's ``delete_collection`` leaves the collection's list-valued metadata
    (table ``embedding_metadata_array``) behind, keyed by internal record ids that the
    next records written to *any* collection of the same database reuse: they come
    back with metadata they never had, and ``where`` filters match them
    (chroma-core/chroma#7594; for memkit, a stranger's ``source_ids`` on a new chunk,
    which provenance cascades follow). Deleting the records first goes through the
    per-record path, which removes those rows.
    """
    try:
        ids = col.get(include=[])["ids"]
        try:
            b = max(1, int(client.get_max_batch_size()))
        except Exception:
            b = 5000
        for s in range(0, len(ids), b):
            col.delete(ids=ids[s : s + b])
    except Exception:  # already gone
        pass
    try:
        client.delete_collection(col.name)
    except Exception:  # already gone
        pass


SYSTEMS: dict[str, tuple[int, int]] = {}
"""Directory -> (generation, inode) the process's chroma System for it was opened on."""
SYSTEMS_LOCK = threading.Lock()


def evict_system(key: str) -> None:
    """Stop and forget chroma's shared System for directory ``key`` (opened on a
    replaced directory). Clients still pointing at it are dropped, never closed: their
    ``close`` would release the refcount of the System that replaces it."""
    from chromadb.api.shared_system_client import SharedSystemClient

    with SharedSystemClient._refcount_lock:
        system = SharedSystemClient._identifier_to_system.pop(key, None)
        SharedSystemClient._identifier_to_refcount.pop(key, None)
    if system is not None:
        try:
            system.stop()
        except Exception:  # pragma: no cover - its files are gone already
            pass


def forget_stale_system(key: str, gen: tuple[int, int] | None) -> None:
    """Evict the System of ``key`` if it is still the one opened on generation ``gen``."""
    with SYSTEMS_LOCK:
        if SYSTEMS.get(key) == gen:
            evict_system(key)
            SYSTEMS.pop(key, None)


def locked(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a store method as one operation (``TieredMemoryStore._op``: the directory lock
    held shared, on the current directory generation)."""

    @wraps(fn)
    def run(self: Any, *a: Any, **kw: Any) -> Any:
        with self._op():
            return fn(self, *a, **kw)

    return run


class StoreCollection:
    """``store.collection``: the chunk collection, each call made as an operation of the
    store (on its current client, under its lock); writes reset the search cache."""

    _WRITES = frozenset({"add", "upsert", "update", "delete", "modify"})

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        store = self._store
        with store._op():
            attr = getattr(store._collection, name)
        if not callable(attr):
            return attr

        def call(*a: Any, **kw: Any) -> Any:
            with store._op():
                try:
                    return getattr(store._collection, name)(*a, **kw)
                finally:
                    if name in self._WRITES:
                        store._touch()

        return call

    def __repr__(self) -> str:
        return repr(self._store._collection)


def copies_in_collections(collections: list[Any], secret: Any) -> dict[str, int]:
    """Records of ``collections`` whose document (``text_other``) or id / metadata
    (``metadata``) holds ``secret`` in any spelling (a string, or any matcher with
    ``search(text) -> bool``): ``{"text_other": n, "metadata": n}``."""
    m = matcher(secret) if isinstance(secret, str) else secret
    counts = {"text_other": 0, "metadata": 0}
    for col in collections:
        n = col.count()
        for off in range(0, n, 1000):
            res = col.get(limit=1000, offset=off, include=["documents", "metadatas"])
            for rid, doc, meta in zip(res["ids"], res["documents"] or [None] * len(res["ids"]),
                                      res["metadatas"] or [None] * len(res["ids"]), strict=True):
                if doc and m.search(doc):
                    counts["text_other"] += 1
                elif m.search(rid) or any(
                    m.search(str(k)) or m.search(scalar_text(v) or "") for k, v in (meta or {}).items()
                ):
                    counts["metadata"] += 1
    return counts
