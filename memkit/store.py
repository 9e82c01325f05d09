"""Tiered memory store over Chroma, with provenance and deletion primitives.

DESIGN.md (Vocabulary, The pipeline, Forget): a memory is a set of *chunks* in two
tiers, ``raw`` (a user turn as written) and ``summary`` (text derived from raw turns,
carrying the ids of the raw chunks it came from). The paper's forgetting ladder
(arXiv 2606.10062, deletion modes) needs: delete by id, find by content, cascade
through provenance, redact in place with re-embedding, an audit tombstone that never
holds the secret, and compaction so that deleted text is gone from the bytes on disk.

Storage layout (one chroma collection per store, cosine space, no chroma embedding
function: vectors always come from :func:`memkit.models.embeddings`):

=============== ============================================================
chroma field    content
=============== ============================================================
id              :func:`chunk_id` (or any caller-chosen id)
document        chunk text
embedding       384-d unit vector of the text (all-MiniLM-L6-v2)
metadata        ``tier`` (str), ``namespace`` (str), ``session_id`` (str),
                ``turn_index`` (int), ``date`` (str), ``source_ids``
                (list[str], summaries only; omitted when empty because chroma
                rejects empty lists), plus :attr:`Chunk.extra` keys
=============== ============================================================

Provenance encoding: chroma >= 1.5 stores list-valued metadata natively (table
``embedding_metadata_array``) and filters it with ``{"source_ids": {"$contains": id}}``,
so :meth:`TieredMemoryStore.derived_from` is a chroma ``where`` query (``$or`` over
batches of ids), not a scan. A chroma server older than 1.5 behind
:meth:`TieredMemoryStore.http` cannot hold these chunks.

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

Forensic residue and :meth:`TieredMemoryStore.compact` (measured on chromadb 1.5.9
with :func:`memkit.residue.scan`):

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
  (:meth:`TieredMemoryStore.close` deletes the records first), so closing one
  in-memory store cannot give the next one's chunks its ``source_ids``.

:meth:`~TieredMemoryStore.compact` therefore rebuilds every collection into a fresh
sibling directory from the live records (stored vectors, no re-embedding), swaps it in,
overwrites the old files with zeros before unlinking them, re-opens, triggers chroma's
first-read rewrite of the HNSW files and zeroes their unused capacity. After it, the
scanner finds no copy on any surface (tests/test_residue.py); a later HNSW persist by a
process that still holds the secret in memory can bring heap bytes back.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets as _secrets
import shutil
import sqlite3
import struct
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import memkit  # noqa: F401  (sets telemetry/offline environment before chromadb loads)
from memkit.matching import matcher, redact_json, scalar_text, secret_regex

__all__ = [
    "TIERS",
    "Chunk",
    "CompactionReport",
    "StoreError",
    "TieredMemoryStore",
    "chunk_id",
    "compact_directory",
    "secret_regex",
]

TIERS: tuple[str, ...] = ("raw", "summary")
"""Chunk tiers (DESIGN.md, Vocabulary): ``raw`` user turns and derived ``summary`` chunks."""

_RESERVED_KEYS = ("tier", "namespace", "session_id", "turn_index", "date", "source_ids")
_SALT_KEY = "memkit_salt"
_TOMBSTONE_SUFFIX = "-tombstones"
_PBKDF2_ITERATIONS = 200_000
_DERIVED_BATCH = 100


class StoreError(RuntimeError):
    """A store operation that cannot run in the store's current configuration."""


@dataclass
class Chunk:
    """One memory chunk (STORE_API.md).

    Attributes:
        id: unique id in the store (see :func:`chunk_id`).
        text: the chunk text.
        tier: ``"raw"`` or ``"summary"`` (:data:`TIERS`).
        namespace: user or instance id; searches and deletions can be scoped to it.
        session_id: LongMemEval session id the chunk belongs to.
        turn_index: index of the turn in its session; ``-1`` for summaries.
        date: session date as given by the data (free text, e.g. ``2023/05/20 (Sat) 02:21``).
        source_ids: for summaries, the raw chunk ids the text was derived from.
        score: cosine similarity to the query, set on search results only.
        extra: additional scalar metadata (keys must not collide with the fields above).
    """

    id: str
    text: str
    tier: str
    namespace: str
    session_id: str
    turn_index: int
    date: str = ""
    source_ids: list[str] = field(default_factory=list)
    score: float | None = None
    extra: dict[str, str | int | float | bool] = field(default_factory=dict)


@dataclass
class CompactionReport:
    """Result of :meth:`TieredMemoryStore.compact`.

    Attributes:
        seconds: wall-clock duration of the compaction.
        bytes_before: total size in bytes of the files under the store directory before.
        bytes_after: the same after compaction.
        records: number of records (all collections) carried into the rebuilt store.
        method: ``"rebuild"`` (fresh directory swapped in) or ``"none"`` (in-memory store).
    """

    seconds: float
    bytes_before: int
    bytes_after: int
    records: int = 0
    method: str = "rebuild"


def chunk_id(namespace: str, session_id: str, tier: str, index: int, text: str) -> str:
    """Deterministic id of a chunk, stable across runs and machines.

    Args:
        namespace: user or instance id.
        session_id: session id.
        tier: ``"raw"`` or ``"summary"``.
        index: turn index for raw chunks; position of the summary chunk in its session.
        text: chunk text.

    Returns:
        ``"<tier>-<32 hex>"``: the first 128 bits of SHA-256 over the JSON list of the
        five arguments.

    Raises:
        ValueError: unknown tier.

    Note: the id is a one-way function of the text, so it is not the secret, but a party
    who holds the store and knows a secret's grammar and the surrounding text can test
    guesses against it (the same holds for the tombstone hash, which is why that one is
    salted and stretched with PBKDF2).
    """
    if tier not in TIERS:
        raise ValueError(f"chunk_id: tier must be one of {TIERS}, got {tier!r}")
    payload = json.dumps([namespace, session_id, tier, int(index), text], ensure_ascii=False)
    return f"{tier}-{hashlib.sha256(payload.encode('utf-8')).hexdigest()[:32]}"


# --------------------------------------------------------------------------- helpers


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


def _zero_hnsw_slack(root: Path) -> int:
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


_OPEN: dict[tuple[str, str], TieredMemoryStore] = {}
"""Open stores by (resolved path, collection): :meth:`TieredMemoryStore.open`."""


class _WatchedCollection:
    """A chroma collection whose writes call ``on_write`` (the store's cache reset)."""

    _WRITES = frozenset({"add", "upsert", "update", "delete", "modify"})

    def __init__(self, collection: Any, on_write: Any) -> None:
        self._c = collection
        self._on_write = on_write

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._c, name)
        if name in self._WRITES and callable(attr):
            def write(*a: Any, **kw: Any) -> Any:
                try:
                    return attr(*a, **kw)
                finally:
                    self._on_write()
            return write
        return attr

    def __repr__(self) -> str:
        return repr(self._c)


def _refuse_foreign(path: Path, collection: str) -> None:
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


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def _utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


_CLIENT_USERS: dict[int, int] = {}
_CLIENT_USERS_LOCK = threading.Lock()


def _hold_client(client: Any) -> None:
    """Count a memkit store open on ``client`` (see :func:`_release_client`)."""
    with _CLIENT_USERS_LOCK:
        _CLIENT_USERS[id(client)] = _CLIENT_USERS.get(id(client), 0) + 1


def _release_client(client: Any) -> int:
    """Uncount a store on ``client``; returns how many memkit stores still use it. An
    in-memory store closes its own client only when none does."""
    with _CLIENT_USERS_LOCK:
        n = _CLIENT_USERS.get(id(client), 1) - 1
        if n <= 0:
            _CLIENT_USERS.pop(id(client), None)
        else:
            _CLIENT_USERS[id(client)] = n
        return max(n, 0)


def _drop_collection(client: Any, col: Any) -> None:
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


class TieredMemoryStore:
    """Raw and summary memory chunks in one chroma collection (STORE_API.md).

    Args:
        path: persistent directory (``chromadb.PersistentClient``); created if missing.
        client: any chromadb client instead (e.g. ``chromadb.HttpClient``); ``path``
            must then be None.
        collection: collection name (3-512 characters of ``[a-zA-Z0-9._-]``). An
            in-memory store appends a random suffix, because chroma shares one ephemeral
            system per process and two in-memory stores would otherwise see each other.
        embedder: object with ``encode(list[str]) -> np.ndarray`` (preferred) or a
            LangChain ``Embeddings``; default :func:`memkit.models.embeddings`.
        create: allow adding memkit's collections to an existing Chroma directory
            that memkit did not create (another memory layer's). Without it such a
            directory is refused, so it is never changed by accident.

    With neither ``path`` nor ``client`` the store lives in memory
    (``chromadb.EphemeralClient``). Telemetry is off. Tombstones live in a second
    collection ``<collection>-tombstones`` whose metadata holds the store's random salt.

    Use :meth:`open` for one store object per directory per process.

    Raises:
        ValueError: both ``path`` and ``client`` given, or a bad collection name.
        StoreError: ``path`` is a Chroma directory memkit did not create (and
            ``create`` is False).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        client: Any = None,
        collection: str = "memkit",
        embedder: Any = None,
        create: bool = False,
    ) -> None:
        import chromadb

        if path is not None and client is not None:
            raise ValueError("TieredMemoryStore: give either path or client, not both")
        self.path: Path | None = Path(path).expanduser().resolve() if path is not None else None
        self._embedder = embedder
        self._kind: str
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
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
        if self.path is not None and not create:
            _refuse_foreign(self.path, collection)
        self._open()
        if self._kind in ("memory", "client"):
            _hold_client(self._client)

    # ------------------------------------------------------------------ plumbing

    def _open(self) -> None:
        chromadb = self._chromadb
        if self._kind == "persistent":
            self._client = chromadb.PersistentClient(path=str(self.path), settings=_settings())
        elif self._kind == "memory" and self._client is None:
            self._client = chromadb.EphemeralClient(settings=_settings())
        self._collection = self._client.get_or_create_collection(
            self.collection_name,
            embedding_function=None,
            configuration={"hnsw": {"space": "cosine"}},
            metadata={"memkit": "chunks"},
        )
        self._tombs = self._client.get_or_create_collection(
            self.collection_name + _TOMBSTONE_SUFFIX,
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
            client = chromadb.HttpClient(host=host, port=port, settings=_settings())
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
        return _WatchedCollection(self._collection, self._touch)

    @property
    def tombstone_collection(self) -> Any:
        """The chroma collection holding audit tombstones."""
        return self._tombs

    def own_collections(self) -> list[Any]:
        """Collections this store is responsible for.

        All collections of the directory for a persistent store (compaction rebuilds
        them all); the chunk and tombstone collections otherwise.
        """
        if self._kind == "persistent":
            return list(self._client.list_collections())
        return [self._collection, self._tombs]

    def close(self) -> None:
        """Release the chroma client and zero HNSW file slack (persistent stores; see
        :func:`_zero_hnsw_slack`), or drop the private collections (records first,
        :func:`_drop_collection`) and close the store's own client (in-memory stores:
        chroma frees its in-process database, and the deleted records it still holds,
        when the last in-memory client of the process closes). The store is unusable
        afterwards."""
        if self._closed:
            return
        self._closed = True
        if self._kind == "persistent":
            self._client.close()
            self._release_fd()
            # At rest, no HNSW file keeps uninitialised heap memory (which can hold
            # text this process handled, deleted secrets included).
            if self.path is not None:
                _zero_hnsw_slack(self.path)
        elif self._kind == "memory":
            for col in (self._collection, self._tombs):
                _drop_collection(self._client, col)
            # chroma's in-process system keeps every write it logged (deleted records
            # included, ~3 MB per 250 chunks) until its last client closes; closing
            # this store's own client lets it go once no other in-memory store is open,
            # unless another memkit store was opened on this client (client=)
            if _release_client(self._client) == 0:
                try:
                    self._client.close()
                except Exception:  # pragma: no cover - already closed
                    pass
        elif self._kind == "client":
            _release_client(self._client)
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
            from memkit.models import embeddings

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

    # ------------------------------------------------------------------ encoding

    @staticmethod
    def _validate(chunk: Chunk, where: str) -> None:
        if not isinstance(chunk, Chunk):
            raise TypeError(f"{where}: expected Chunk, got {type(chunk).__name__}")
        if not isinstance(chunk.id, str) or not chunk.id:
            raise ValueError(f"{where}: field 'id' must be a non-empty string")
        if chunk.tier not in TIERS:
            raise ValueError(f"{where} (id {chunk.id!r}): field 'tier' must be one of {TIERS}, got {chunk.tier!r}")
        if not isinstance(chunk.namespace, str) or not chunk.namespace:
            raise ValueError(f"{where} (id {chunk.id!r}): field 'namespace' must be a non-empty string")
        if not isinstance(chunk.text, str):
            raise ValueError(f"{where} (id {chunk.id!r}): field 'text' must be a string")
        if not isinstance(chunk.session_id, str):
            raise ValueError(f"{where} (id {chunk.id!r}): field 'session_id' must be a string")
        if isinstance(chunk.turn_index, bool) or not isinstance(chunk.turn_index, (int, np.integer)):
            raise ValueError(f"{where} (id {chunk.id!r}): field 'turn_index' must be an int")
        if chunk.tier == "raw" and chunk.source_ids:
            raise ValueError(f"{where} (id {chunk.id!r}): raw chunks cannot have 'source_ids'")
        if any(not isinstance(s, str) or not s for s in chunk.source_ids):
            raise ValueError(f"{where} (id {chunk.id!r}): 'source_ids' must be non-empty strings")
        for key, value in chunk.extra.items():
            if key in _RESERVED_KEYS or key.startswith(("chroma:", "#", "$")):
                raise ValueError(f"{where} (id {chunk.id!r}): extra key {key!r} is reserved")
            if not isinstance(value, (str, int, float, bool)):
                raise ValueError(
                    f"{where} (id {chunk.id!r}): extra[{key!r}] must be str/int/float/bool, "
                    f"got {type(value).__name__}"
                )

    @staticmethod
    def _to_metadata(chunk: Chunk) -> dict[str, Any]:
        meta: dict[str, Any] = dict(chunk.extra)
        meta.update(
            tier=chunk.tier,
            namespace=chunk.namespace,
            session_id=chunk.session_id,
            turn_index=int(chunk.turn_index),
            date=chunk.date,
        )
        if chunk.source_ids:
            meta["source_ids"] = list(chunk.source_ids)
        return meta

    @staticmethod
    def _from_record(cid: str, doc: str | None, meta: dict[str, Any] | None) -> Chunk:
        meta = dict(meta or {})
        src = meta.pop("source_ids", None) or []
        return Chunk(
            id=cid,
            text=doc or "",
            tier=str(meta.pop("tier", "")),
            namespace=str(meta.pop("namespace", "")),
            session_id=str(meta.pop("session_id", "")),
            turn_index=int(meta.pop("turn_index", -1)),
            date=str(meta.pop("date", "")),
            source_ids=[str(s) for s in src],
            extra=meta,
        )

    @staticmethod
    def _where(
        namespace: str | None = None,
        tiers: Sequence[str] | None = None,
        session_id: str | None = None,
        extra: Iterable[dict[str, Any]] = (),
    ) -> dict[str, Any] | None:
        conds: list[dict[str, Any]] = []
        if namespace is not None:
            conds.append({"namespace": namespace})
        if tiers is not None:
            tiers = list(tiers)
            bad = [t for t in tiers if t not in TIERS]
            if bad:
                raise ValueError(f"tiers must be drawn from {TIERS}, got {bad}")
            conds.append({"tier": {"$in": tiers}})
        if session_id is not None:
            conds.append({"session_id": session_id})
        conds.extend(extra)
        if not conds:
            return None
        return conds[0] if len(conds) == 1 else {"$and": conds}

    def _get(self, *, ids: Sequence[str] | None = None, where: dict[str, Any] | None = None,
             embeddings: bool = False) -> tuple[list[Chunk], np.ndarray | None]:
        include = ["documents", "metadatas"] + (["embeddings"] if embeddings else [])
        kw: dict[str, Any] = {"include": include}
        if ids is not None:
            kw["ids"] = list(ids)
        if where is not None:
            kw["where"] = where
        res = self._collection.get(**kw)
        chunks = [
            self._from_record(i, d, m)
            for i, d, m in zip(res["ids"], res["documents"], res["metadatas"], strict=True)
        ]
        vecs = None
        if embeddings:
            raw = res.get("embeddings")
            vecs = (
                np.asarray(raw, dtype=np.float32)
                if raw is not None and len(raw)
                else np.zeros((0, 0), dtype=np.float32)
            )
        return chunks, vecs

    def _put(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Upsert chunks with given vectors (no embedding), in client-sized batches."""
        b = self._batch()
        for s in range(0, len(chunks), b):
            part = chunks[s : s + b]
            self._collection.upsert(
                ids=[c.id for c in part],
                documents=[c.text for c in part],
                metadatas=[self._to_metadata(c) for c in part],
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
            self._validate(c, f"add: chunk {i}")
            if c.id in seen:
                raise ValueError(f"add: chunk {i}: duplicate id {c.id!r} in one call")
            seen.add(c.id)
        if not chunks:
            return []
        self._put(chunks, self._encode([c.text for c in chunks]))
        return [c.id for c in chunks]

    def get(self, ids: Sequence[str]) -> list[Chunk]:
        """Chunks with the given ids, in the order given; unknown ids are skipped."""
        ids = list(ids)
        if not ids:
            return []
        found, _ = self._get(ids=ids)
        by_id = {c.id: c for c in found}
        return [by_id[i] for i in ids if i in by_id]

    @staticmethod
    def _order_key(c: Chunk) -> tuple[Any, ...]:
        tier = TIERS.index(c.tier) if c.tier in TIERS else len(TIERS)
        return (c.namespace, tier, c.date, c.session_id, c.turn_index, c.id)

    def chunks(
        self,
        *,
        namespace: str | None = None,
        tiers: Sequence[str] | None = None,
        session_id: str | None = None,
    ) -> list[Chunk]:
        """All chunks matching the filters, ordered by (namespace, tier, date, session,
        turn index, id)."""
        found, _ = self._get(where=self._where(namespace, tiers, session_id))
        return sorted(found, key=self._order_key)

    def count(self, *, namespace: str | None = None, tiers: Sequence[str] | None = None) -> int:
        """Number of chunks matching the filters."""
        where = self._where(namespace, tiers)
        if where is None:
            return int(self._collection.count())
        return len(self._collection.get(where=where, include=[])["ids"])

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
        found, vecs = self._get(where=self._where(namespace, tiers), embeddings=True)
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
        q = self._encode(queries)
        scores = q @ mat.T  # (n_queries, n_chunks); rows of mat are sorted by id
        out: list[list[Chunk]] = []
        for row in scores:
            # Scores are rounded to 1e-5 so float noise between two encodings of the
            # same text (batch padding, float32 storage) cannot reorder ties; ties go by id.
            row = np.round(row.astype(np.float64), 5)
            order = np.argsort(-row, kind="stable")[: int(k)]
            res = []
            for n in order:
                c = chunks[int(n)]
                res.append(
                    Chunk(
                        id=c.id, text=c.text, tier=c.tier, namespace=c.namespace,
                        session_id=c.session_id, turn_index=c.turn_index, date=c.date,
                        source_ids=list(c.source_ids), score=float(row[n]), extra=dict(c.extra),
                    )
                )
            out.append(res)
        return out

    # ------------------------------------------------------------------ deletion primitives

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

    def find_containing(
        self,
        text: str,
        *,
        namespace: str | None = None,
        tiers: Sequence[str] | None = None,
        normalized: bool = False,
    ) -> list[Chunk]:
        """Chunks whose text contains ``text``.

        Args:
            text: substring to look for (exact, case-sensitive).
            namespace: restrict to one namespace.
            tiers: restrict to these tiers.
            normalized: match every spelling of ``text`` as a secret
                (:mod:`memkit.matching`: normal forms, case, separators, escapes).

        Returns:
            Matching chunks in :meth:`chunks` order.

        Raises:
            ValueError: empty ``text``.
        """
        if not text:
            raise ValueError("find_containing: text must be non-empty")
        m = matcher(text) if normalized else None
        out = []
        for c in self.chunks(namespace=namespace, tiers=tiers):
            if text in c.text or (m is not None and self._holds(c, m)):
                out.append(c)
        return out

    @staticmethod
    def _holds(c: Chunk, m: Any) -> bool:
        """Whether chunk ``c`` holds a copy anywhere: text, id, namespace, session,
        date, ``source_ids``, metadata keys and values (numbers as written)."""
        fields = [c.text, c.id, c.namespace, c.session_id, c.date, *c.source_ids]
        for k, v in c.extra.items():
            fields += [k, scalar_text(v) or ""]
        return any(m.search(f) for f in fields)

    def copies_in_other_collections(self, secret: str) -> dict[str, int]:
        """Records of the directory's other collections (not this store's chunks or
        tombstones: another memory layer's, a user's) whose document or metadata holds
        ``secret`` in any spelling: ``{"text_other": n, "metadata": n}``. A forget
        does not touch them, so it must not call the store clean while they hold copies.
        """
        m = matcher(secret)
        counts = {"text_other": 0, "metadata": 0}
        mine = {self.collection_name, self.collection_name + _TOMBSTONE_SUFFIX}
        for col in self.own_collections():
            if col.name in mine:
                continue
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

    def derived_from(
        self,
        raw_ids: Sequence[str],
        *,
        namespace: str | None = None,
        transitive: bool = True,
    ) -> list[Chunk]:
        """Chunks whose ``source_ids`` include any of ``raw_ids`` (provenance cascade).

        Args:
            raw_ids: ids of the chunks to cascade from.
            namespace: restrict to one namespace.
            transitive: also follow chunks derived from derived chunks.

        Returns:
            The derived chunks (excluding ``raw_ids`` themselves) in :meth:`chunks` order.
        """
        frontier = list(dict.fromkeys(raw_ids))
        seen: set[str] = set(frontier)
        found: dict[str, Chunk] = {}
        while frontier:
            nxt: list[str] = []
            for s in range(0, len(frontier), _DERIVED_BATCH):
                part = frontier[s : s + _DERIVED_BATCH]
                ors = [{"source_ids": {"$contains": i}} for i in part]
                cond = ors[0] if len(ors) == 1 else {"$or": ors}
                chunks, _ = self._get(where=self._where(namespace, None, None, [cond]))
                for c in chunks:
                    if c.id not in seen:
                        seen.add(c.id)
                        found[c.id] = c
                        nxt.append(c.id)
            frontier = nxt if transitive else []
        return sorted(found.values(), key=self._order_key)

    def redact(
        self,
        secret: str,
        *,
        replacement: str = "[REDACTED]",
        namespace: str | None = None,
        tiers: Sequence[str] | None = None,
    ) -> list[str]:
        """Replace every copy of ``secret`` (any spelling, :mod:`memkit.matching`) in
        chunk text, session id, date, ``source_ids`` and metadata (keys, string values,
        and numbers, which become ``replacement``) with ``replacement``, and re-embed the
        changed texts so each vector matches its new text. A metadata string that holds
        a JSON document (a LangGraph store value) is decoded, redacted value by value and
        re-serialised.

        Returns:
            Ids of the chunks changed, in :meth:`chunks` order.

        Raises:
            ValueError: empty secret, a replacement that itself contains the secret, or a
                chunk whose id or namespace holds it (neither can be rewritten; nothing is
                changed then).
        """
        m = matcher(secret)
        if m.search(replacement):
            raise ValueError("redact: the replacement contains the secret")

        def scrub(value: str) -> str:
            if value[:1] in "[{" and m.search(value):
                try:
                    decoded = json.loads(value)
                except ValueError:
                    return m.redact(value, replacement)
                return json.dumps(redact_json(decoded, secret, replacement), ensure_ascii=False)
            return m.redact(value, replacement)

        def scrub_value(v: Any) -> Any:
            if isinstance(v, str):
                return scrub(v)
            text = scalar_text(v)
            return replacement if text is not None and m.search(text) else v

        changed: list[Chunk] = []
        for c in self.chunks(namespace=namespace, tiers=tiers):
            if m.search(c.id):
                raise ValueError(f"redact: the id of chunk {c.id!r} holds the secret and ids cannot be "
                                 "rewritten; delete the chunk (full_purge) instead")
            new_text = m.redact(c.text, replacement)
            new_extra = {m.redact(k, replacement): scrub_value(v) for k, v in c.extra.items()}
            new_sources = [m.redact(x, replacement) for x in c.source_ids]
            new_fields = {
                f: m.redact(getattr(c, f), replacement) for f in ("session_id", "date", "namespace")
            }
            if new_text != c.text or new_extra != c.extra or new_sources != c.source_ids or any(
                new_fields[f] != getattr(c, f) for f in new_fields
            ):
                if new_fields["namespace"] != c.namespace:
                    raise ValueError(f"redact: namespace of chunk {c.id!r} contains the secret")
                c.text, c.extra, c.source_ids = new_text, new_extra, new_sources
                c.session_id, c.date = new_fields["session_id"], new_fields["date"]
                changed.append(c)
        if changed:
            # chroma merges metadata on upsert: a renamed (redacted) key would stay, so
            # those records are rewritten whole.
            before = {c.id: set(c.extra) for c in self.get([c.id for c in changed])}
            rekeyed = [c.id for c in changed if set(c.extra) != before.get(c.id, set(c.extra))]
            if rekeyed:
                self._collection.delete(ids=rekeyed)
            self._put(changed, self._encode([c.text for c in changed]))
        return [c.id for c in changed]

    # ------------------------------------------------------------------ tombstones

    def _hash_secret(self, secret: str) -> str:
        return hashlib.pbkdf2_hmac("sha256", secret.encode("utf-8"), self._salt, _PBKDF2_ITERATIONS).hex()

    def tombstone(
        self,
        secret: str,
        chunk_ids: Sequence[str],
        *,
        namespace: str,
        reason: str = "forget",
    ) -> dict[str, Any]:
        """Write an audit record of a deletion: salted hash of the secret, time, ids.

        The hash is PBKDF2-HMAC-SHA256 (200,000 iterations) keyed with the store's
        random 16-byte salt (kept in the tombstone collection's metadata); the secret
        itself is never written. The record lives in the ``<collection>-tombstones``
        collection (document = the record as JSON, a 1-d placeholder vector).

        Args:
            secret: the forgotten string.
            chunk_ids: ids of the chunks deleted or redacted.
            namespace: namespace the deletion applied to.
            reason: free-text label (must not contain the secret).

        Returns:
            The record: ``id``, ``namespace``, ``reason``, ``time`` (ISO-8601 UTC),
            ``chunk_ids``, ``hash``, ``hash_alg``, ``iterations``.

        Raises:
            ValueError: empty secret, or ``reason``/``namespace``/ids containing it.
        """
        if not secret:
            raise ValueError("tombstone: secret must be non-empty")
        pat = secret_regex(secret)
        for label, value in [("reason", reason), ("namespace", namespace), *(("chunk id", i) for i in chunk_ids)]:
            if pat.search(value):
                raise ValueError(f"tombstone: {label} contains the secret; it would be written to disk")
        record = {
            "id": uuid.uuid4().hex,
            "namespace": namespace,
            "reason": reason,
            "time": _utcnow(),
            "chunk_ids": list(chunk_ids),
            "hash": self._hash_secret(secret),
            "hash_alg": "pbkdf2_hmac_sha256",
            "iterations": _PBKDF2_ITERATIONS,
        }
        self._tombs.add(
            ids=[record["id"]],
            documents=[json.dumps(record, sort_keys=True)],
            metadatas=[{"namespace": namespace, "time": record["time"], "reason": reason}],
            embeddings=np.ones((1, 1), dtype=np.float32),
        )
        return record

    def tombstones(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Tombstone records (see :meth:`tombstone`), oldest first."""
        kw: dict[str, Any] = {"include": ["documents"]}
        if namespace is not None:
            kw["where"] = {"namespace": namespace}
        res = self._tombs.get(**kw)
        recs = [json.loads(d) for d in res["documents"]]
        return sorted(recs, key=lambda r: (r["time"], r["id"]))

    def matches_tombstone(self, secret: str, record: dict[str, Any]) -> bool:
        """Whether ``secret`` is the string a tombstone ``record`` was written for."""
        return hmac.compare_digest(self._hash_secret(secret), str(record.get("hash", "")))

    # ------------------------------------------------------------------ copy / compact

    def copy_namespace(
        self,
        src: str,
        dst: str,
        *,
        target: TieredMemoryStore | None = None,
        overwrite: bool = False,
    ) -> int:
        """Copy every chunk of namespace ``src`` into namespace ``dst`` with the stored
        vectors (no re-embedding).

        Ids are kept when ``dst == src`` (copy into another store); otherwise each id
        becomes ``<tier>-<sha256(dst, old id)[:32]>`` and ``source_ids`` are remapped
        the same way, so provenance stays consistent inside the copy. Tombstones are not
        copied.

        Args:
            src: source namespace.
            dst: destination namespace.
            target: destination store (default: this store).
            overwrite: first delete whatever ``dst`` already holds in ``target``.

        Returns:
            Number of chunks copied.

        Raises:
            ValueError: ``src == dst`` within one store, or ``dst`` is not empty and
                ``overwrite`` is False.
        """
        target = self if target is None else target
        if target is self and src == dst:
            raise ValueError("copy_namespace: src and dst are the same namespace of the same store")
        existing = target.chunks(namespace=dst)
        if existing:
            if not overwrite:
                raise ValueError(
                    f"copy_namespace: namespace {dst!r} already holds {len(existing)} chunks; "
                    "pass overwrite=True to replace them"
                )
            target.delete([c.id for c in existing])
        chunks, vecs = self._get(where=self._where(src), embeddings=True)
        if not chunks:
            return 0

        def remap(old: str) -> str:
            if dst == src:
                return old
            tier = old.split("-", 1)[0] if old.split("-", 1)[0] in TIERS else "chunk"
            return f"{tier}-{hashlib.sha256(json.dumps([dst, old]).encode()).hexdigest()[:32]}"

        for c in chunks:
            c.id = remap(c.id)
            c.namespace = dst
            c.source_ids = [remap(s) for s in c.source_ids]
        assert vecs is not None
        target._put(chunks, vecs)
        return len(chunks)

    def _sqlite_collection_count(self) -> int:
        assert self.path is not None
        uri = f"file:{self.path / 'chroma.sqlite3'}?mode=ro"
        con = sqlite3.connect(uri, uri=True)
        try:
            return int(con.execute("SELECT COUNT(*) FROM collections").fetchone()[0])
        finally:
            con.close()

    def compaction_blocker(self) -> str | None:
        """Why :meth:`compact` cannot run now, or ``None`` if it can. Changes nothing.

        Forget modes that compact check this before their first change, so a forget
        either completes or refuses with the store untouched.
        """
        if self._kind == "memory":
            return None
        if self._kind != "persistent" or self.path is None:
            return ("the store is behind a chroma server: memkit cannot rewrite or read the "
                    "server's files (deleted text stays in its SQLite pages and log)")
        if self._sqlite_collection_count() != len(list(self._client.list_collections())):
            return f"{self.path} holds collections outside the default tenant/database"
        from chromadb.api.shared_system_client import SharedSystemClient

        self._client.close()
        try:
            if str(self.path) in SharedSystemClient._identifier_to_system:
                return (f"another chroma client in this process holds {self.path} open; close "
                        "it, or use TieredMemoryStore.open(path) for one store object per directory")
        finally:
            self._open()
        return None

    def compact(self) -> CompactionReport:
        """Rewrite the store so deleted and overwritten text is gone from the disk:
        :func:`compact_directory` on the store's directory, with this store's client
        closed around it. An in-memory store has nothing on disk (method ``"none"``).

        Returns:
            :class:`CompactionReport`.

        Raises:
            StoreError: :meth:`compaction_blocker` names a reason, or the rebuilt store
                does not hold the same records (the directory is then unchanged).
        """
        t0 = time.perf_counter()
        if self._kind == "memory":
            return CompactionReport(time.perf_counter() - t0, 0, 0, self._collection.count(), "none")
        reason = self.compaction_blocker()
        if reason is not None:
            raise StoreError(f"compact: {reason}")
        assert self.path is not None
        self._client.close()
        self._release_fd()
        try:
            report = compact_directory(self.path)
        finally:
            self._open()
            # chroma rewrites each HNSW segment (from uninitialized memory, see
            # _zero_hnsw_slack) on the first read after a client opens; make that
            # happen now and clean up after it, so later reads (a residue scan) do not.
            for col in self._client.list_collections():
                col.count()
            _zero_hnsw_slack(self.path)
            self._touch()
        report.seconds = time.perf_counter() - t0
        return report


def compact_directory(path: str | Path) -> CompactionReport:
    """Rewrite any Chroma persist directory so deleted and overwritten text is gone
    from its files, adding nothing to it.

    Rebuilds every collection into a fresh sibling directory from the live records
    (ids, documents, metadata, stored vectors; collection metadata and
    configuration), VACUUMs it, zeroes HNSW slack, swaps it in, overwrites the old
    files with zeros and removes them (module doc). Works on directories other memory
    layers wrote: no memkit collection is created.

    Args:
        path: the directory; no chroma client of this process may hold it open.

    Returns:
        :class:`CompactionReport`.

    Raises:
        StoreError: not a Chroma directory, collections outside the default
            tenant/database, another client of this process holds it open, or the
            rebuilt store does not hold the same records (the directory is then unchanged).
    """
    import chromadb
    from chromadb.api.shared_system_client import SharedSystemClient

    t0 = time.perf_counter()
    path = Path(path).expanduser().resolve()
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
    old_client = chromadb.PersistentClient(path=str(path), settings=_settings())
    fresh = path.parent / f".{path.name}.compact-{uuid.uuid4().hex[:8]}"
    records = 0
    try:
        cols = list(old_client.list_collections())
        if n_collections != len(cols):
            raise StoreError(
                f"compact: {path} holds collections outside the default tenant/database; "
                "memkit only rebuilds the default database"
            )
        expected: dict[str, int] = {}
        new_client = chromadb.PersistentClient(path=str(fresh), settings=_settings())
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
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    old_client.close()
    # The rebuild itself purged log rows (chroma trims its log at each HNSW persist):
    # their pages hold only live data, but VACUUM returns the space.
    con = sqlite3.connect(fresh / "chroma.sqlite3")
    try:
        con.execute("VACUUM")
    finally:
        con.close()
    _zero_hnsw_slack(fresh)
    if str(path) in SharedSystemClient._identifier_to_system:
        shutil.rmtree(fresh, ignore_errors=True)
        raise StoreError(f"compact: another chroma client in this process holds {path} open; close it first")
    old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
    os.replace(path, old)
    os.replace(fresh, path)
    _shred_tree(old)
    # chroma rewrites each HNSW segment on the first read after a client opens (from
    # uninitialized memory): make that happen now, then zero the slack it leaves.
    client = chromadb.PersistentClient(path=str(path), settings=_settings())
    try:
        for col in client.list_collections():
            col.count()
    finally:
        client.close()
    _zero_hnsw_slack(path)
    return CompactionReport(time.perf_counter() - t0, before, _dir_bytes(path), records, "rebuild")
