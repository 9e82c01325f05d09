"""Tiered memory store over Chroma, with provenance and deletion primitives.

A memory is a set of *chunks* (:mod:`memkit.store.chunks`) in two
tiers, ``raw`` (a user turn as written) and ``summary`` (text derived from raw turns,
carrying the ids of the raw chunks it came from). The paper's forgetting ladder
(arXiv 2606.10062, deletion modes) needs: delete by id, find by content, cascade
through provenance, redact in place with re-embedding, an audit tombstone that never
holds the secret, and compaction so that deleted text is gone from the bytes on disk.

Storage layout and provenance encoding: :mod:`memkit.store.chunks`.

Search is exact: the namespace's vectors are read into a numpy matrix and scored by
dot product (vectors are unit norm, so this is cosine similarity); ties are broken by
chunk id. The matrix is cached, and before every search the cache is checked against
chroma's own state, so a search never returns a chunk deleted (or text changed) by
any handle or process: for a persistent store the SQLite file's inode and its header's
*file change counter*, which SQLite increments on every committed transaction in
rollback-journal mode (chroma's), whoever commits — this store, another store object,
``store.collection``, another process — read with one ``pread`` and no SQLite
connection (so no lock of chroma's is touched); a database in WAL mode is never
cached; for an in-memory store every write
through :attr:`TieredMemoryStore.collection`; for a server, the record count, and the
returned chunks are re-read and the search redone if any is gone or changed. Results for ``k`` are therefore a prefix of
results for any larger ``k``, which approximate HNSW search does not guarantee. Memory
cost is ``n * 384 * 4`` bytes for ``n`` chunks in the searched namespace(s).

Forensic residue, and how :meth:`~TieredMemoryStore.compact` removes it: :mod:`memkit.store.compaction`.

Why this module is long: it is one class, :class:`TieredMemoryStore`, whose every
method runs under the directory's inter-process lock and reopens after another
process's compaction (:mod:`memkit.store.dirlock`); the chunk model, Chroma encoding,
tombstones, client plumbing and compaction already live in their own modules, and
splitting the class's methods further would separate them from the locking they
share.
"""

from __future__ import annotations

import os
import secrets as _secrets
import uuid
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import memkit  # noqa: F401  (sets telemetry/offline environment before chromadb loads)
from memkit.errors import StoreBusyError, StoreError
from memkit.scan.matching import secret_regex
from memkit.store.chunks import (
    TIERS,
    Chunk,
    chunk_id,
    from_record,
    order_key,
    to_metadata,
    top_k,
    validate_chunk,
    where_filter,
)
from memkit.store.client import (
    SYSTEMS,
    SYSTEMS_LOCK,
    StoreCollection,
    client_settings,
    drop_collection,
    evict_system,
    forget_stale_system,
    hold_client,
    locked,
    refuse_foreign,
    release_client,
)
from memkit.store.compaction import (
    CompactionReport,
    compact_directory,
    compact_store,
    compaction_blocker,
    needs_recovery,
    recover,
    zero_hnsw_slack,
)
from memkit.store.dirlock import DirectoryLock
from memkit.store.edits import TOMBSTONE_SUFFIX, StoreEdits
from memkit.store.keystore import KeyStore, open_record, seal_chunk

__all__ = [
    "TIERS",
    "Chunk",
    "CompactionReport",
    "StoreBusyError",
    "StoreError",
    "TieredMemoryStore",
    "chunk_id",
    "compact_directory",
    "secret_regex",
]


_SALT_KEY = "memkit_salt"


_OPEN: dict[tuple[str, str], TieredMemoryStore] = {}
"""Open stores by (resolved path, collection): :meth:`TieredMemoryStore.open`."""


class TieredMemoryStore(StoreEdits):
    """Raw and summary memory chunks in one chroma collection (module doc).

    Args:
        path: persistent directory (``chromadb.PersistentClient``); created if missing.
        client: any chromadb client instead (e.g. ``chromadb.HttpClient``); ``path``
            must then be None.
        collection: collection name (3-512 characters of ``[a-zA-Z0-9._-]``). An
            in-memory store appends a random suffix, because chroma shares one ephemeral
            system per process and two in-memory stores would otherwise see each other.
        embedder: object with ``encode(list[str]) -> np.ndarray`` (preferred) or a
            LangChain ``Embeddings``; default :func:`memkit.models.chat.embeddings`.
        create: allow adding memkit's collections to an existing Chroma directory
            that memkit did not create (another memory layer's). Without it such a
            directory is refused, so it is never changed by accident.
        lock_timeout: seconds an operation waits for a compaction by another
            process (and a compaction for other processes' operations) before
            :class:`~memkit.errors.StoreBusyError`; default ``$MEMKIT_LOCK_TIMEOUT``
            or 60 (:mod:`memkit.store.dirlock`).
        keystore: a :class:`~memkit.store.keystore.KeyStore`: every chunk's text and extra
            metadata are sealed under its namespace's data key before they reach chroma
            (encryption at rest; the ``crypto_shred`` deletion mode destroys keys).

    With neither ``path`` nor ``client`` the store lives in memory
    (``chromadb.EphemeralClient``). Telemetry is off. Tombstones live in a second
    collection ``<collection>-tombstones`` whose metadata holds the store's random salt.

    Use :meth:`open` for one store object per directory per process.

    Processes sharing a directory (an agent server holding its memory open for days,
    a "forget me" request run by a worker or an admin script; :mod:`memkit.store.dirlock`):
    every operation of a persistent store holds an inter-process lock on the
    directory *shared* for its duration, :meth:`compact` (so every ``full_purge`` /
    ``tombstone_redaction`` forget) holds it *exclusive*. Compaction swaps in a
    rebuilt directory and bumps the directory's generation; before its next
    operation every other handle, in any process, sees the new generation and
    reopens its chroma client, so its searches never return a forgotten chunk and its
    writes go to the directory that stays. Waits are bounded by ``lock_timeout``, then
    :class:`~memkit.errors.StoreBusyError` (retryable, nothing changed) names the
    holders (pid, program, since when): a write that arrives during a forget lands
    after it or fails retryably, never silently. (A lock held for a handle's whole
    life was rejected: an agent server never closes its store, so a forget could
    never compact.) Processes holding the directory's files without memkit's lock (a
    plain chromadb client, another memory layer) are found through ``/proc/<pid>/fd``
    where the OS allows; compaction refuses while any does unless forced (their
    clients would fail with SQLite's "file is not a database" and lose writes).
    Compaction is crash-safe: the rebuilt directory is written beside the old one,
    journaled and swapped in with one atomic ``renameat2(RENAME_EXCHANGE)``; a store
    opened after a ``kill -9`` at any point finishes or undoes the swap
    (:func:`memkit.store.compaction.recover`): the directory opens and is either compacted
    or still holds (and is reported to hold) the forgotten text.

    Raises:
        ValueError: both ``path`` and ``client`` given, or a bad collection name.
        StoreError: ``path`` is a Chroma directory memkit did not create (and
            ``create`` is False).
        StoreBusyError: a half-done compaction needs recovery while another process
            holds the directory longer than ``lock_timeout``.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        client: Any = None,
        collection: str = "memkit",
        embedder: Any = None,
        create: bool = False,
        lock_timeout: float | None = None,
        keystore: KeyStore | None = None,
    ) -> None:
        import chromadb

        if path is not None and client is not None:
            raise ValueError("TieredMemoryStore: give either path or client, not both")
        self.path: Path | None = Path(path).expanduser().resolve() if path is not None else None
        self._embedder = embedder
        self.keystore = keystore
        self._kind: str
        self._lock: DirectoryLock | None = None
        self._gen: tuple[int, int] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._lock = DirectoryLock(self.path, lock_timeout)
            except OSError as exc:  # a read-only parent: no other process can compact either
                warnings.warn(f"{self.path}: no inter-process lock ({exc}); compaction by another "
                              "process would not be coordinated", stacklevel=2)
            if self._lock is not None and needs_recovery(self.path):
                try:
                    with self._lock.exclusive("recovery of an interrupted compaction"):
                        recover(self.path, self._lock)
                except BaseException:
                    self._lock.close()
                    raise
            self.path.mkdir(exist_ok=True)
            self._kind = "persistent"
            self.collection_name = collection
        elif client is not None:
            self._kind = "client"
            self.collection_name = collection
        else:
            self._kind = "memory"
            self.collection_name = f"{collection}-{uuid.uuid4().hex[:8]}"
        self._client: Any = client
        self._chromadb = chromadb
        self._version = 0
        self._matrix_cache: dict[tuple[Any, ...], tuple[Any, list[Chunk], np.ndarray]] = {}
        self._closed = False
        self._fd: int | None = None
        self._fd_ino: int | None = None
        try:
            if self.path is not None and not create:
                refuse_foreign(self.path, collection)
            with self._op(follow=False):
                self._open()
        except BaseException:
            if self._lock is not None:
                self._lock.close()
            raise
        if self._kind in ("memory", "client"):
            hold_client(self._client)

    # ------------------------------------------------------------------ plumbing

    def _open(self) -> None:
        chromadb = self._chromadb
        if self._kind == "persistent" and self._lock is None:
            self._client = chromadb.PersistentClient(path=str(self.path), settings=client_settings())
        elif self._kind == "persistent":
            assert self.path is not None and self._lock is not None
            gen = (self._lock.generation(), os.stat(self.path).st_ino)
            with SYSTEMS_LOCK:
                # chroma shares one System per directory per process: one opened on a
                # replaced directory (an older generation) must not be reused.
                key = str(self.path)
                if SYSTEMS.get(key, gen) != gen:
                    evict_system(key)
                SYSTEMS[key] = gen
                self._client = chromadb.PersistentClient(path=key, settings=client_settings())
            self._gen = gen
        elif self._kind == "memory" and self._client is None:
            self._client = chromadb.EphemeralClient(settings=client_settings())
        self._collection = self._client.get_or_create_collection(
            self.collection_name,
            embedding_function=None,
            configuration={"hnsw": {"space": "cosine"}},
            metadata={"memkit": "chunks"},
        )
        self._tombs = self._client.get_or_create_collection(
            self.collection_name + TOMBSTONE_SUFFIX,
            embedding_function=None,
            metadata={"memkit": "tombstones", _SALT_KEY: _secrets.token_hex(16)},
        )
        salt = (self._tombs.metadata or {}).get(_SALT_KEY)
        if not isinstance(salt, str) or not salt:
            raise StoreError(
                f"collection {self._tombs.name!r} has no {_SALT_KEY!r} metadata; "
                "it was not written by memkit"
            )
        self._salt = bytes.fromhex(salt)

    @classmethod
    def open(cls, path: str | Path, *, collection: str = "memkit", **kw: Any) -> TieredMemoryStore:
        """The process's one store object for ``(path, collection)``: created on first
        use, returned again while it is open. Two objects on one directory stay
        coherent anyway (see the module doc), but one object means one chroma client,
        so :meth:`compact` is never blocked by a second client of this process.

        Args:
            path: persistent directory. collection, **kw: as for the constructor.
        """
        key = (str(Path(path).expanduser().resolve()), collection)
        store = _OPEN.get(key)
        if store is None or store._closed:
            store = cls(path, collection=collection, **kw)
            _OPEN[key] = store
        return store

    @classmethod
    def http(cls, host: str, port: int = 8000, **kw: Any) -> TieredMemoryStore:
        """Store backed by a chroma server (``chromadb.HttpClient``, telemetry off).

        Args:
            host: server host name.
            port: server port.
            **kw: passed to :class:`TieredMemoryStore` (``collection``, ``embedder``).

        Raises:
            StoreError: the server cannot be reached.
        """
        import chromadb

        try:
            client = chromadb.HttpClient(host=host, port=port, settings=client_settings())
            client.heartbeat()
        except Exception as exc:  # chromadb raises several types for connection errors
            raise StoreError(
                f"cannot reach a chroma server at {host}:{port} ({exc}); start one with "
                f"`chroma run --path DIR --port {port}`"
            ) from exc
        return cls(client=client, **kw)

    @property
    def client(self) -> Any:
        """The underlying chromadb client."""
        return self._client

    @property
    def collection(self) -> Any:
        """The chroma collection holding the chunks. Writes through it (``add``,
        ``upsert``, ``update``, ``delete``) invalidate this store's search cache."""
        return StoreCollection(self)

    @property
    def tombstone_collection(self) -> Any:
        """The chroma collection holding audit tombstones (a chroma object, valid until
        the next compaction: use it inside :meth:`exclusive` across processes)."""
        with self._op():
            return self._tombs

    def own_collections(self) -> list[Any]:
        """Collections this store is responsible for.

        All collections of the directory for a persistent store (compaction rebuilds
        them all); the chunk and tombstone collections otherwise.
        """
        with self._op():
            if self._kind == "persistent":
                return list(self._client.list_collections())
            return [self._collection, self._tombs]

    def close(self) -> None:
        """Release the chroma client and zero HNSW file slack (persistent stores; see
        :func:`zero_hnsw_slack`), or drop the private collections (records first,
        :func:`drop_collection`) and close the store's own client (in-memory stores:
        chroma frees its in-process database, and the deleted records it still holds,
        when the last in-memory client of the process closes). The store is unusable
        afterwards."""
        if self._closed:
            return
        self._closed = True
        if self._kind == "persistent" and self._lock is None:
            self._client.close()
            self._release_fd()
        elif self._kind == "persistent":
            assert self.path is not None and self._lock is not None
            try:
                with self._lock.shared():
                    if (self._lock.generation(), os.stat(self.path).st_ino) == self._gen:
                        self._client.close()
                    else:
                        forget_stale_system(str(self.path), self._gen)
                    self._release_fd()
                    # At rest, no HNSW file keeps uninitialised heap memory (which can
                    # hold text this process handled, deleted secrets included).
                    zero_hnsw_slack(self.path)
            except StoreBusyError:
                self._release_fd()  # a compaction runs: it rewrites the files anyway
            finally:
                self._lock.close()
        elif self._kind == "memory":
            for col in (self._collection, self._tombs):
                drop_collection(self._client, col)
            # chroma's in-process system keeps every write it logged (deleted records
            # included, ~3 MB per 250 chunks) until its last client closes; closing
            # this store's own client lets it go once no other in-memory store is open,
            # unless another memkit store was opened on this client (client=)
            if release_client(self._client) == 0:
                try:
                    self._client.close()
                except Exception:  # pragma: no cover - already closed
                    pass
        elif self._kind == "client":
            release_client(self._client)
        self._matrix_cache.clear()

    def __enter__(self) -> TieredMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.path) if self.path else self._kind
        return f"TieredMemoryStore({where!r}, collection={self.collection_name!r})"

    @property
    def embedder(self) -> Any:
        """The embedder (loaded on first use)."""
        if self._embedder is None:
            from memkit.models.chat import embeddings

            self._embedder = embeddings()
        return self._embedder

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in one batched call: ``(len(texts), d)`` float32, unit rows."""
        texts = list(texts)
        emb = self.embedder
        if hasattr(emb, "encode"):
            out = np.asarray(emb.encode(texts), dtype=np.float32)
        else:
            out = np.asarray(emb.embed_documents(texts), dtype=np.float32)
        if out.ndim != 2 or out.shape[0] != len(texts):
            raise StoreError(f"embedder returned shape {out.shape} for {len(texts)} texts")
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    def _batch(self) -> int:
        try:
            return max(1, int(self._client.get_max_batch_size()))
        except Exception:
            return 1000

    def _touch(self) -> None:
        self._version += 1
        self._matrix_cache.clear()

    @contextmanager
    def _op(self, follow: bool = True) -> Iterator[None]:
        """Run one operation: the directory lock held shared, on the current
        directory generation (class doc). A no-op for in-memory and server stores."""
        if self._lock is None:
            yield
            return
        with self._lock.shared():
            if follow:
                self._follow()
            yield

    def _follow(self) -> None:
        """Reopen the chroma client if a compaction replaced the directory since this
        handle last used it (hold the lock)."""
        assert self._lock is not None and self.path is not None
        if (self._lock.generation(), os.stat(self.path).st_ino) != self._gen:
            self._release_fd()
            self._client = None  # its System is evicted by _open, never closed (class doc)
            self._open()
            self._touch()

    @contextmanager
    def exclusive(self, what: str = "forget") -> Iterator[None]:
        """Hold the store's directory exclusively: other memkit handles' operations, in
        any process, wait (up to their ``lock_timeout``) until the block ends. Re-entrant
        in one thread; :meth:`compact` takes it too. A no-op for in-memory and server
        stores.

        Args:
            what: shown to waiting processes (:meth:`memkit.store.dirlock.DirectoryLock.holders`).

        Raises:
            StoreBusyError: other processes' operations held it past ``lock_timeout``;
                nothing was changed.
        """
        if self._lock is None:
            yield
            return
        with self._lock.exclusive(what):
            self._follow()
            yield

    # ------------------------------------------------------------------ coherence

    def _release_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._fd_ino = None, None

    def _state_token(self) -> tuple[Any, ...]:
        """A value that changes whenever the stored records may have changed, by any
        handle or process (module doc): the search cache is valid while it is equal."""
        if self._kind == "persistent" and self.path is not None:
            # The descriptor stays open while chroma may hold locks: closing any
            # descriptor of a file drops every POSIX lock this process holds on it.
            try:
                ino = os.stat(self.path / "chroma.sqlite3").st_ino
                if self._fd is None or ino != self._fd_ino:
                    self._release_fd()
                    self._fd = os.open(self.path / "chroma.sqlite3", os.O_RDONLY)
                    self._fd_ino = os.fstat(self._fd).st_ino
                header = os.pread(self._fd, 100, 0)
            except OSError:
                header, ino = b"", 0
            if len(header) < 100 or header[18] != 1:  # unreadable, or WAL mode: no cache
                return ("uncached", uuid.uuid4().hex)
            return (ino, int.from_bytes(header[24:28], "big"), self._version)
        return (self._version, self._collection.count())

    # ------------------------------------------------------------------ chroma records

    def _get(self, *, ids: Sequence[str] | None = None, where: dict[str, Any] | None = None,
             embeddings: bool = False) -> tuple[list[Chunk], np.ndarray | None]:
        include = ["documents", "metadatas"] + (["embeddings"] if embeddings else [])
        kw: dict[str, Any] = {"include": include}
        if ids is not None:
            kw["ids"] = list(ids)
        if where is not None:
            kw["where"] = where
        res = self._collection.get(**kw)
        records = zip(res["ids"], res["documents"], res["metadatas"], strict=True)
        if self.keystore is None:
            found: list[Chunk | None] = [from_record(i, d, m) for i, d, m in records]
        else:  # sealed fields opened; a record whose key was shredded is unreadable: skipped
            found = [open_record(self.keystore, i, d, m) for i, d, m in records]
        keep = [n for n, c in enumerate(found) if c is not None]
        chunks = [c for c in found if c is not None]
        vecs = None
        if embeddings:
            raw = res.get("embeddings")
            vecs = (
                np.asarray(raw, dtype=np.float32)[keep]
                if raw is not None and len(raw) and keep
                else np.zeros((0, 0), dtype=np.float32)
            )
        return chunks, vecs

    @locked
    def _put(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Upsert chunks with given vectors (no embedding), in client-sized batches."""
        b = self._batch()
        for s in range(0, len(chunks), b):
            part = chunks[s : s + b]
            if self.keystore is None:
                docs, metas = [c.text for c in part], [to_metadata(c) for c in part]
            else:
                sealed = [seal_chunk(self.keystore, c) for c in part]
                docs, metas = [d for d, _ in sealed], [m for _, m in sealed]
            self._collection.upsert(
                ids=[c.id for c in part],
                documents=docs,
                metadatas=metas,
                embeddings=np.asarray(vectors[s : s + b], dtype=np.float32),
            )
        self._touch()

    # ------------------------------------------------------------------ write / read

    def add(self, chunks: Sequence[Chunk]) -> list[str]:
        """Embed the chunks' texts in one batch and upsert them.

        Args:
            chunks: chunks to write; an existing id is overwritten.

        Returns:
            The ids written, in input order.

        Raises:
            ValueError: an invalid field (the message names the chunk and field) or a
                duplicate id within ``chunks``.
        """
        chunks = list(chunks)
        seen: set[str] = set()
        for i, c in enumerate(chunks):
            validate_chunk(c, f"add: chunk {i}")
            if c.id in seen:
                raise ValueError(f"add: chunk {i}: duplicate id {c.id!r} in one call")
            seen.add(c.id)
        if not chunks:
            return []
        self._put(chunks, self._encode([c.text for c in chunks]))
        return [c.id for c in chunks]

    @locked
    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks with the given ids, in the order given; unknown ids are skipped."""
        ids = list(ids)
        if not ids:
            return []
        found, _ = self._get(ids=ids)
        by_id = {c.id: c for c in found}
        return [by_id[i] for i in ids if i in by_id]


    @locked
    def chunks(
        self,
        *,
        namespace: str | None = None,
        tiers: Sequence[str] | None = None,
        session_id: str | None = None,
    ) -> list[Chunk]:
        """All chunks matching the filters, ordered by (namespace, tier, date, session,
        turn index, id)."""
        found, _ = self._get(where=where_filter(namespace, tiers, session_id))
        return sorted(found, key=order_key)

    @locked
    def count(self, *, namespace: str | None = None, tiers: Sequence[str] | None = None) -> int:
        """Number of chunks matching the filters."""
        where = where_filter(namespace, tiers)
        if where is None:
            return int(self._collection.count())
        return len(self._collection.get(where=where, include=[])["ids"])

    @locked
    def embeddings_of(self, ids: Sequence[str]) -> np.ndarray:
        """Stored vectors of ``ids`` as a ``(len(ids), d)`` float32 array, in order.

        Raises:
            KeyError: an id is not in the store.
        """
        ids = list(ids)
        if not ids:
            return np.zeros((0, 0), dtype=np.float32)
        res = self._collection.get(ids=ids, include=["embeddings"])
        pos = {i: n for n, i in enumerate(res["ids"])}
        missing = [i for i in ids if i not in pos]
        if missing:
            raise KeyError(f"embeddings_of: ids not in the store: {missing[:5]}")
        vecs = np.asarray(res["embeddings"], dtype=np.float32)
        return vecs[[pos[i] for i in ids]]

    # ------------------------------------------------------------------ search

    def _matrix(self, namespace: str | None, tiers: Sequence[str]) -> tuple[list[Chunk], np.ndarray]:
        key = (namespace, tuple(sorted(set(tiers))))
        token = self._state_token()
        hit = self._matrix_cache.get(key)
        if hit is not None and hit[0] == token:
            return hit[1], hit[2]
        found, vecs = self._get(where=where_filter(namespace, tiers), embeddings=True)
        order = sorted(range(len(found)), key=lambda n: found[n].id)
        chunks = [found[n] for n in order]
        mat = vecs[order] if len(order) else np.zeros((0, 0), dtype=np.float32)
        if len(mat):
            norms = np.linalg.norm(mat, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            mat = mat / norms
        self._matrix_cache[key] = (token, chunks, mat)
        return chunks, mat

    def search(
        self,
        query: str,
        k: int,
        *,
        tiers: Sequence[str] = ("raw",),
        namespace: str | None = None,
    ) -> list[Chunk]:
        """Top-``k`` chunks by cosine similarity to ``query`` (exact, see module doc).

        Args:
            query: query text (embedded with the store's embedder).
            k: number of results (>= 0); fewer when the scope holds fewer chunks.
            tiers: tiers to search.
            namespace: restrict to one namespace; None searches all.

        Returns:
            Chunks with ``score`` set (cosine rounded to 5 decimals), by descending score,
            ties by ascending id, so the
            result for ``k`` is a prefix of the result for any ``k' > k``.

        Raises:
            ValueError: negative ``k`` or an unknown tier.
        """
        return self.search_many([query], k, tiers=tiers, namespace=namespace)[0]

    @locked
    def search_many(
        self,
        queries: Sequence[str],
        k: int,
        *,
        tiers: Sequence[str] = ("raw",),
        namespace: str | None = None,
    ) -> list[list[Chunk]]:
        """:meth:`search` for several queries with one batched embedding call."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"search: k must be a non-negative int, got {k!r}")
        if isinstance(queries, str):
            raise TypeError("search_many: queries must be a sequence of strings, not a string")
        queries = list(queries)
        if not queries:
            return []
        out = self._search_many(queries, k, tiers, namespace)
        if self._kind != "persistent":
            # No change counter to read (a server; an in-memory store written through
            # another handle of its client): re-read what is returned, and search
            # again on fresh state if any of it is gone or changed.
            ids = list(dict.fromkeys(c.id for res in out for c in res))
            now = {c.id: c.text for c in self.get(ids)} if ids else {}
            if any(now.get(c.id) != c.text for res in out for c in res):
                self._touch()
                out = self._search_many(queries, k, tiers, namespace)
        return out

    def _search_many(self, queries: list[str], k: int, tiers: Sequence[str],
                     namespace: str | None) -> list[list[Chunk]]:
        chunks, mat = self._matrix(namespace, tiers)
        if not chunks or k == 0:
            return [[] for _ in queries]
        return top_k(self._encode(queries), chunks, mat, int(k))

    # ------------------------------------------------------------------ deletion primitives

    @locked
    def delete(self, ids: Sequence[str]) -> list[str]:
        """Delete chunks (text, metadata and vector) by id.

        Returns:
            The ids that existed and were deleted, in input order (duplicates once).

        Note: the deleted text stays in the bytes of ``chroma.sqlite3`` until
        :meth:`compact` (module doc).
        """
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        existing = set(self._collection.get(ids=ids, include=[])["ids"])
        gone = [i for i in ids if i in existing]
        b = self._batch()
        for s in range(0, len(gone), b):
            self._collection.delete(ids=gone[s : s + b])
        if gone:
            self._touch()
        return gone

    @locked
    def compaction_blocker(self, *, force: bool = False) -> str | None:
        """Why :meth:`compact` cannot run now, or ``None`` if it can. Changes nothing
        (:func:`memkit.store.compaction.compaction_blocker`): a store behind a server, other
        chroma clients of this process on the directory, or (unless ``force``) other
        processes holding its files open without memkit's lock.

        Forget modes that compact check this before their first change, so a forget
        either completes or refuses with the store untouched.
        """
        return compaction_blocker(self, force=force)

    def compact(self, *, force: bool = False) -> CompactionReport:
        """Rewrite the store so deleted and overwritten text is gone from the disk:
        :func:`memkit.store.compaction.compact_store` (the directory lock held exclusive,
        this store's client closed around :func:`compact_directory`'s rebuild and
        atomic swap; class doc). An in-memory store has nothing on disk (method
        ``"none"``).

        Args:
            force: compact although processes that are not memkit handles hold the
                directory's files open (their chroma clients then fail, and writes
                they make to the old files are lost).

        Returns:
            :class:`CompactionReport`.

        Raises:
            StoreError: :meth:`compaction_blocker` names a reason, or the rebuilt store
                does not hold the same records (the directory is then unchanged).
            StoreBusyError: other processes' operations held the directory past the
                lock timeout (nothing changed; retry).
        """
        return compact_store(self, force=force)
