"""Leftover vectors: stored embeddings of records that were deleted or rewritten.

A vector store's delete removes a record from what queries return; the vector itself
may stay. This module reads every stored vector of a Chroma directory and of a
pgvector table and returns those that no live record owns (:class:`LeftoverVector`),
so :mod:`memkit.residue.weigh` can say what they still give away.

Chroma (1.x, local persistent directory):

* ``data_level0.bin`` of each HNSW segment directory (hnswlib's index, split by
  chroma into ``header.bin``, ``data_level0.bin``, ``link_lists.bin``, ``length.bin``).
  ``header.bin`` is chroma's persistence version (uint32), then hnswlib's header as
  ``saveIndex`` writes it: ``offsetLevel0``, ``max_elements``, ``cur_element_count``,
  ``size_data_per_element``, ``label_offset``, ``offsetData`` (size_t each),
  ``maxlevel`` (int), ``enterpoint_node`` (uint32), ``maxM``, ``maxM0``, ``M``
  (size_t), ``mult`` (double), ``ef_construction`` (size_t), little-endian. Element
  ``i`` of ``data_level0.bin`` starts at ``i * size_data_per_element``: its level-0
  link list (a uint16 count, then a byte whose bit 0 is hnswlib's delete mark), the
  vector at ``offsetData`` (float32, unit length in cosine space) and its label at
  ``label_offset`` (uint64). ``index_metadata.pickle`` maps labels to record ids; it
  is read with an unpickler that refuses every global, so no code in it runs.
* chroma's log table ``embeddings_queue``: every write with its vector (``FLOAT32``
  blob), kept until every segment has consumed it.

A vector is left over when its record is not live (not in the collection's metadata
segment: deleted), when hnswlib marks it deleted, when its label maps to no record,
or when a newer write of the same record holds another vector (superseded). Chroma
persists its HNSW index only every ``hnsw:sync_threshold`` writes, so the files can
lag the database; they are read as they are on disk.

pgvector (:func:`pg_leftover_vectors`): a ``vector`` datum is a varlena (a 4-byte
header ``len << 2``, or a 1-byte header ``len << 1 | 1`` when short) followed by
``int16 dim``, ``int16 0`` and ``dim`` float32s. The table's heap, index and TOAST
files and the WAL files are searched for that exact layout at the table's dimension;
a vector found there that no live row holds is left over (a dead tuple, an index
entry, a WAL record). WAL full-page images compressed by ``wal_compression`` are not
decoded here: such a data directory is reported as read in part.

Read-only: files are opened ``"rb"`` and SQLite is read on a copy.
"""

from __future__ import annotations

import io
import pickle
import shutil
import sqlite3
import struct
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LeftoverVector", "VectorRead", "chroma_leftover_vectors", "elements_end", "pg_leftover_vectors", "read_hnsw"]

_HEADER = struct.Struct("<I6QiI3QdQ")
_ADD, _UPDATE, _UPSERT = 0, 1, 2
_SAME = 0.9999


@dataclass(frozen=True)
class LeftoverVector:
    """One stored vector no live record owns.

    Attributes:
        surface: the residue surface it lies on (``disk_hnsw``, ``disk_log``,
            ``disk_pg_heap``, ``store_vectors`` ...).
        location: where (file and element, table and row); never text.
        vector: the vector as stored (float32).
        record_id: the record it belonged to, where the store says (else ``None``).
        why: ``record deleted``, ``marked deleted``, ``label unmapped``,
            ``superseded``, ``no live row``.
    """

    surface: str
    location: str
    vector: np.ndarray
    record_id: str | None
    why: str


@dataclass
class VectorRead:
    """Every leftover vector of a store, and what was read to find them.

    Attributes:
        leftovers: the leftover vectors.
        live: vectors of live records seen.
        read: surface -> what was read there.
        unread: surface -> what could not be read, and why (never "no leftovers").
        notes: what else was seen (vectors in file slack, which no record of the store
            owns: memory the writing process did not clear).
    """

    leftovers: list[LeftoverVector] = field(default_factory=list)
    live: int = 0
    read: dict[str, str] = field(default_factory=dict)
    unread: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def by_surface(self) -> dict[str, list[LeftoverVector]]:
        """The leftovers grouped by surface."""
        out: dict[str, list[LeftoverVector]] = {}
        for v in self.leftovers:
            out.setdefault(v.surface, []).append(v)
        return out


# --------------------------------------------------------------------------- hnswlib


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load {module}.{name}: only plain data is read")


@dataclass
class HnswIndex:
    """One HNSW segment read from disk: per element its label, vector and delete mark,
    and the label -> record id map (``None`` when the map could not be read)."""

    directory: Path
    labels: np.ndarray
    vectors: np.ndarray
    deleted: np.ndarray
    label_to_id: dict[int, str] | None
    note: str | None = None
    slack: list[tuple[int, np.ndarray]] = field(default_factory=list)
    """Unit vectors in the rows past the element count (file slack), by element."""


def elements_end(directory: Path) -> int | None:
    """Byte offset in ``directory/data_level0.bin`` where its elements end (the header's
    element count times its element size): hnswlib never reads the bytes after it, which
    hold whatever the writing process's heap held there. ``None`` when ``header.bin``
    cannot be read or is not hnswlib's."""
    try:
        head = (directory / "header.bin").read_bytes()
    except OSError:
        return None
    if len(head) < _HEADER.size:
        return None
    fields = _HEADER.unpack_from(head)
    count, size = fields[3], fields[4]
    return count * size if 0 < size < 1 << 24 else None


def read_hnsw(directory: Path) -> HnswIndex:
    """Read chroma's HNSW segment files in ``directory`` (module doc).

    Raises:
        ValueError: ``header.bin`` or ``data_level0.bin`` is not what hnswlib writes.
    """
    head = (directory / "header.bin").read_bytes()
    if len(head) < _HEADER.size:
        raise ValueError(f"{directory / 'header.bin'}: {len(head)} bytes, hnswlib's header needs {_HEADER.size}")
    (_, off0, max_elements, count, size, label_off, data_off, _, _, _, max_m0, _, _, _) = _HEADER.unpack_from(head)
    links = max_m0 * 4 + 4
    if not (0 < size < 1 << 24 and off0 == 0 and data_off == links and data_off < label_off == size - 8
            and count <= max_elements):
        raise ValueError(f"{directory / 'header.bin'}: not an hnswlib header (element size {size}, "
                         f"data at {data_off}, label at {label_off})")
    raw = np.fromfile(directory / "data_level0.bin", dtype=np.uint8)
    total = len(raw) // size
    n = min(count, total)
    every = raw[: total * size].reshape(total, size)
    rows = every[:n]
    labels = rows[:, label_off:label_off + 8].copy().view("<u8").ravel()
    vectors = rows[:, data_off:label_off].copy().view("<f4")
    deleted = (rows[:, off0 + 2] & 1).astype(bool)
    # rows past the count are allocated, not written: only a unit vector there is one
    # (cosine space stores unit vectors), anything else is uninitialised memory
    with np.errstate(all="ignore"):
        past = every[n:, data_off:label_off].copy().view("<f4").astype(np.float64)
        norms = np.linalg.norm(past, axis=1) if len(past) else np.zeros(0)
    slack = [(n + int(i), past[i].astype(np.float32)) for i in np.flatnonzero(np.abs(norms - 1.0) < 1e-3)]
    note = None if n == count else f"data_level0.bin holds {n} of the header's {count} elements"
    mapping: dict[int, str] | None = {} if n == 0 else None
    meta = directory / "index_metadata.pickle"
    if n == 0:
        pass
    elif meta.is_file():
        try:
            data = _NoGlobals(io.BytesIO(meta.read_bytes())).load()
            got = data.get("label_to_id") if isinstance(data, dict) else None
            if isinstance(got, dict):
                mapping = {int(k): str(v) for k, v in got.items()}
            else:
                note = "index_metadata.pickle holds no label_to_id map"
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
            note = f"index_metadata.pickle not read ({exc})"
    else:
        note = "no index_metadata.pickle: labels cannot be tied to records"
    return HnswIndex(directory, labels, vectors, deleted, mapping, note, slack)


# --------------------------------------------------------------------------- Chroma


def _sql_copy(root: Path, tmp: Path) -> sqlite3.Connection:
    db = tmp / "chroma.sqlite3"
    shutil.copy2(root / "chroma.sqlite3", db)
    for suffix in ("-wal", "-journal"):
        if (root / f"chroma.sqlite3{suffix}").exists():
            shutil.copy2(root / f"chroma.sqlite3{suffix}", tmp / f"chroma.sqlite3{suffix}")
    return sqlite3.connect(db)


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n else v


def chroma_leftover_vectors(root: str | Path) -> VectorRead:
    """Every leftover vector of a Chroma persist directory (module doc).

    Raises:
        FileNotFoundError: no ``chroma.sqlite3`` in ``root``.
    """
    root = Path(root)
    if not (root / "chroma.sqlite3").is_file():
        raise FileNotFoundError(f"{root} has no chroma.sqlite3")
    out = VectorRead()
    with tempfile.TemporaryDirectory(prefix="memkit-vectors-") as tmp:
        con = _sql_copy(root, Path(tmp))
        try:
            segments = con.execute("SELECT id, scope, collection FROM segments").fetchall()
            live: dict[str, set[str]] = {}
            for col, rid in con.execute(
                    "SELECT s.collection, e.embedding_id FROM embeddings e JOIN segments s ON e.segment_id = s.id"):
                live.setdefault(col, set()).add(rid)
            queue = con.execute("SELECT seq_id, operation, topic, id, vector, encoding FROM embeddings_queue "
                                "WHERE vector IS NOT NULL ORDER BY seq_id").fetchall()
        finally:
            con.close()
    newest: dict[tuple[str, str], np.ndarray] = {}
    rows = []
    odd = 0
    for seq, op, topic, rid, blob, enc in queue:
        col = str(topic).rsplit("/", 1)[-1]
        if op not in (_ADD, _UPDATE, _UPSERT) or str(enc).upper() != "FLOAT32" or len(blob) % 4:
            odd += 1
            continue
        vec = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        rows.append((seq, col, rid, vec))
        newest[(col, rid)] = vec  # ascending seq: the last write wins
    for seq, col, rid, vec in rows:
        if rid not in live.get(col, set()):
            why = "record deleted"
        elif newest[(col, rid)] is not vec and float(_unit(vec) @ _unit(newest[(col, rid)])) < _SAME:
            why = "superseded"  # an older vector of a record rewritten with another
        else:
            out.live += 1
            continue
        out.leftovers.append(LeftoverVector("disk_log", f"embeddings_queue:seq_id={seq}", vec, rid, why))
    out.read["disk_log"] = f"{len(rows)} vectors of chroma's embeddings_queue"
    if odd:
        out.unread["disk_log"] = f"{odd} queue rows whose vector is not FLOAT32"
    hnsw_rows, notes = 0, []
    for seg_id, scope, col in segments:
        d = root / seg_id
        if scope != "VECTOR" or not (d / "header.bin").is_file():
            continue
        try:
            index = read_hnsw(d)
        except (OSError, ValueError) as exc:
            notes.append(f"{seg_id}: {exc}")
            continue
        if index.note:
            notes.append(f"{seg_id}: {index.note}")
        if index.slack:  # memory the writing process did not clear: no record of this store's
            out.notes.append(f"{seg_id}/data_level0.bin: {len(index.slack)} unit vectors past its element count "
                             "(uninitialised memory of the process that wrote it, e.g. another store's vectors)")
        if index.label_to_id is None:
            continue  # live cannot be told from deleted: the segment is listed as read in part
        hnsw_rows += len(index.labels)
        for i, (label, vec, dead) in enumerate(zip(index.labels, index.vectors, index.deleted, strict=True)):
            rid = index.label_to_id.get(int(label))
            if dead:
                why = "marked deleted"
            elif rid is None:
                why = "label unmapped"
            elif rid not in live.get(col, set()):
                why = "record deleted"
            elif (col, rid) in newest and float(_unit(vec) @ _unit(newest[(col, rid)])) < _SAME:
                why = "superseded"
            else:
                out.live += 1
                continue
            out.leftovers.append(LeftoverVector("disk_hnsw", f"{seg_id}/data_level0.bin#element={i}",
                                                vec.astype(np.float32), rid, why))
    if hnsw_rows or notes:
        out.read["disk_hnsw"] = f"{hnsw_rows} elements of HNSW data_level0.bin files"
    if notes:
        out.unread["disk_hnsw"] = "; ".join(notes)
    return out


# --------------------------------------------------------------------------- pgvector


def _pg_signatures(dim: int) -> list[bytes]:
    size = 8 + 4 * dim
    body = struct.pack("<hh", dim, 0)
    sigs = [struct.pack("<I", size << 2) + body]
    if size < 128:
        sigs.append(bytes([(size << 1) | 1]) + body)
    return sigs


def pg_vectors_in(data: bytes | memoryview, dim: int) -> list[tuple[int, np.ndarray]]:
    """``(offset, vector)`` of every pgvector datum of dimension ``dim`` in ``data``
    (module doc); the vector's values must be finite."""
    buf = bytes(data)
    out = []
    for sig in _pg_signatures(dim):
        start = 0
        while (at := buf.find(sig, start)) >= 0:
            start = at + 1
            body = at + len(sig)
            if body + 4 * dim > len(buf):
                continue
            vec = np.frombuffer(buf, dtype="<f4", count=dim, offset=body).astype(np.float32)
            with np.errstate(all="ignore"):
                norm = float(np.linalg.norm(vec.astype(np.float64)))
            if np.isfinite(norm) and norm > 0:
                out.append((at, vec))
    return out


def _segments(pgdata: Path, rel: str) -> list[Path]:
    """A relation's main-fork files that exist: ``rel``, ``rel.1``, ``rel.2`` ..."""
    out = [pgdata / rel] if (pgdata / rel).exists() else []
    while (seg := pgdata / f"{rel}.{len(out)}").exists() and out:
        out.append(seg)
    return out


def pg_leftover_vectors(conn: Any, pgdata: str | Path | None, *, table: str = "store_vectors",
                        column: str = "embedding", key: Sequence[str] = ("prefix", "key", "field_name"),
                        store_table: str | None = "store") -> VectorRead:
    """Leftover vectors of a pgvector column (module doc): live rows whose item is gone
    (``store_vectors`` without its ``store`` row), and vectors in the table's files and
    in ``pg_wal`` that no live row holds.

    Args:
        conn: a psycopg connection (autocommit) to the database.
        pgdata: the data directory (``None``: the files are not read, listed as unread).
        table, column: the table and its ``vector`` column. key: the row's key columns.
        store_table: the items' table (LangGraph's ``store``); ``None``: no orphan check.
    """
    from memkit.postgres import surfaces as surfaces_pg

    out = VectorRead()
    found = surfaces_pg.resolve_tables(conn, [table])  # in the connection's search_path
    if not found:
        return out
    cols = ", ".join(f'"{c}"' for c in key)
    rows = conn.execute(f'SELECT {cols}, "{column}"::text FROM "{found[0].schema}"."{found[0].name}"').fetchall()
    items = None
    owners = surfaces_pg.resolve_tables(conn, [store_table]) if store_table else []
    if owners:
        items = {tuple(r) for r in conn.execute(
            f'SELECT prefix, key FROM "{owners[0].schema}"."{owners[0].name}"').fetchall()}
    live: list[np.ndarray] = []
    for *k, text in rows:
        vec = np.array([float(x) for x in str(text).strip("[]").split(",")], dtype=np.float32)
        if items is not None and tuple(k[:2]) not in items:
            out.leftovers.append(LeftoverVector("store_vectors", f"{table}:{'/'.join(map(str, k))}", vec,
                                                "/".join(map(str, k)), "no live row"))
        else:
            live.append(_unit(vec))
    out.live = len(live)
    out.read["store_vectors"] = f"{len(rows)} rows of {table}"
    if not rows:
        return out
    dim = int(len(rows[0][-1].strip("[]").split(",")))
    if pgdata is None:
        for s in ("disk_pg_heap", "disk_pg_index", "disk_pg_toast", "disk_pg_wal"):
            out.unread[s] = "the data directory is not readable here"
        return out
    root = Path(pgdata)
    mat = np.stack(live) if live else np.zeros((0, dim), dtype=np.float32)

    def take(surface: str, files: Iterable[Path], label: str) -> None:
        n = 0
        for f in files:
            with open(f, "rb") as fh:
                data = fh.read()
            for at, vec in pg_vectors_in(data, dim):
                n += 1
                if len(mat) and float(np.max(mat @ _unit(vec))) >= _SAME:
                    continue
                out.leftovers.append(LeftoverVector(surface, f"{label or f.name}@{at}", vec, None, "no live row"))
        out.read[surface] = f"{n} vectors of dimension {dim}"

    for surface, rels in surfaces_pg.relation_files(conn, [table]).items():
        take(surface, [seg for rel in rels for seg in _segments(root, rel)], "")
    wal = root / "pg_wal"
    take("disk_pg_wal", sorted(p for p in wal.iterdir() if p.is_file()) if wal.is_dir() else [], "")
    comp = conn.execute("SELECT current_setting('wal_compression', true)").fetchone()[0]
    if comp not in (None, "off", "0", "false"):
        out.unread["disk_pg_wal"] = (f"wal_compression={comp}: vectors inside compressed full-page images "
                                     "are not decoded")
    return out
