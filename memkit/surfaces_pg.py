"""Where a secret lives in PostgreSQL: live rows through SQL, and the data directory
byte by byte (heap, index, TOAST and WAL files).

A LangGraph agent in production keeps its long-term memory in ``PostgresStore``
(tables ``store``, ``store_vectors``) and its conversations in ``PostgresSaver``
(``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes``). Deleting a row
through the API (``DELETE``) only marks the tuple dead: its bytes stay in the
table's heap file until ``VACUUM`` prunes the page, and every change is also written
to the write-ahead log (``pg_wal``), which ``VACUUM FULL`` does not touch (the
PostgreSQL manual, chapters "Routine Vacuuming" and "Write-Ahead Logging"). This
module finds the copies on each surface:

================= =============================================================
surface           what is read
================= =============================================================
``pg_rows``       every column of every live row of the given tables, through
                  SQL (``jsonb`` decoded, ``bytea`` as bytes: a saver's msgpack
                  blobs hold strings as UTF-8)
``disk_pg_heap``  the main-fork files of those tables (``pg_relation_filepath``
                  and its 1 GB segments ``.1``, ``.2`` ...): live and dead tuples
``disk_pg_index`` the files of their indexes (btree keys, pgvector indexes)
``disk_pg_toast`` the files of their TOAST tables and TOAST indexes
``disk_pg_wal``   every file under ``pg_wal`` (segments, recycled ones too)
``disk_pg_other`` every other file of the data directory (other relations such as
                  ``pg_statistic``, files of relations a ``VACUUM FULL`` replaced,
                  the server's log)
================= =============================================================

Bytes are matched with :mod:`memkit.matching` (every spelling of the secret over
UTF-8). Values PostgreSQL compressed (``pglz``/``lz4``, values over about 2 kB) are
not decoded in the files: when a live row holds a compressed value
(``pg_column_compression``), every disk surface carries a note saying so (callers
report such a surface as read only in part, never clean); a dead tuple's
compression cannot be asked for. Before reading files, :func:`scan_disk` can run
``CHECKPOINT`` (``flush=True``) so that the files hold what the server's shared
buffers hold; a checkpoint deletes nothing (it lets the server recycle WAL segments,
which are renamed and overwritten later, not erased).

Read-only apart from that optional ``CHECKPOINT``: SQL is ``SELECT`` only and files
are opened with ``open(..., "rb")``. Needs ``psycopg`` (the ``postgres`` extra).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memkit.matching import matcher, scalar_text

__all__ = [
    "DISK_SURFACES",
    "SAVER_TABLES",
    "STORE_TABLES",
    "PgScan",
    "relation_files",
    "scan_disk",
    "scan_rows",
    "tables_present",
]

STORE_TABLES = ("store", "store_vectors", "store_migrations", "vector_migrations")
"""Tables of LangGraph's ``PostgresStore`` (langgraph-checkpoint-postgres 3.x)."""

SAVER_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
"""Tables of LangGraph's ``PostgresSaver``."""

DISK_SURFACES = ("disk_pg_heap", "disk_pg_index", "disk_pg_toast", "disk_pg_wal", "disk_pg_other")
"""The byte-level surfaces of a data directory (module doc)."""


@dataclass
class PgScan:
    """Copies found on one surface: secret -> locations (one per copy; masked by
    the caller). ``readable`` is False with ``reason`` when the surface could not be
    read; ``notes`` says what was only partly read."""

    surface: str
    hits: dict[str, list[str]] = field(default_factory=dict)
    readable: bool = True
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


def _values(value: Any, path: str) -> Iterable[tuple[str, Any]]:
    """``(path, leaf)`` of a decoded column value: strings, numbers, bytes; mapping
    keys too."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{path}.<key>", k
            yield from _values(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _values(v, f"{path}[{i}]")
    elif value is not None:
        yield path, value


def _count(value: Any, secret: str) -> int:
    m = matcher(secret)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(m.byte_spans(bytes(value)))
    text = scalar_text(value)
    if text is None:
        text = str(value) if not isinstance(value, bool) else None
    return 0 if text is None else len(m.spans(text))


def tables_present(conn: Any, tables: Sequence[str], schema: str = "public") -> list[str]:
    """Those of ``tables`` that exist in ``schema`` (SQL on ``pg_class``)."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s)",
        (schema, list(tables)),
    ).fetchall()
    found = {r[0] for r in rows}
    return [t for t in tables if t in found]


def scan_rows(conn: Any, tables: Sequence[str], secrets: Sequence[str], schema: str = "public") -> PgScan:
    """``pg_rows``: copies of each secret in every column of every live row.

    Args:
        conn: an open ``psycopg.Connection``.
        tables: table names (those missing are skipped).
        secrets: the strings to look for.
        schema: the tables' schema.

    Returns:
        :class:`PgScan` with locations ``table:row <n>:<column><path>``.
    """
    from psycopg import sql

    out = PgScan("pg_rows")
    for table in tables_present(conn, tables, schema):
        cur = conn.execute(sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(table)))
        names = [d.name for d in cur.description or ()]
        for i, row in enumerate(cur):
            for col, value in zip(names, row, strict=True):
                for path, leaf in _values(value, ""):
                    for s in secrets:
                        n = _count(leaf, s)
                        if n:
                            out.hits.setdefault(s, []).extend([f"{table}:row {i}:{col}{path}"] * n)
    return out


def relation_files(conn: Any, tables: Sequence[str], schema: str = "public") -> dict[str, list[str]]:
    """Data-directory paths (relative, ``base/<db>/<filenode>``) of the tables'
    relations, by surface: ``disk_pg_heap`` (the tables), ``disk_pg_index`` (their
    indexes), ``disk_pg_toast`` (their TOAST tables and TOAST indexes).

    Source: ``pg_relation_filepath`` (PostgreSQL manual, "Database Object Management
    Functions"); main fork only (the free-space and visibility maps hold no tuples).
    """
    present = tables_present(conn, tables, schema)
    out: dict[str, list[str]] = {"disk_pg_heap": [], "disk_pg_index": [], "disk_pg_toast": []}
    if not present:
        return out
    rows = conn.execute(
        """
        WITH t AS (
          SELECT c.oid, c.reltoastrelid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = %s AND c.relname = ANY(%s)
        )
        SELECT 'disk_pg_heap', pg_relation_filepath(t.oid) FROM t
        UNION ALL SELECT 'disk_pg_index', pg_relation_filepath(i.indexrelid) FROM t JOIN pg_index i ON i.indrelid = t.oid
        UNION ALL SELECT 'disk_pg_toast', pg_relation_filepath(t.reltoastrelid) FROM t WHERE t.reltoastrelid <> 0
        UNION ALL SELECT 'disk_pg_toast', pg_relation_filepath(i.indexrelid)
                  FROM t JOIN pg_index i ON i.indrelid = t.reltoastrelid WHERE t.reltoastrelid <> 0
        """,
        (schema, present),
    ).fetchall()
    for surface, path in rows:
        if path:
            out[surface].append(path)
    return out


def _segments(pgdata: Path, rel: str) -> list[Path]:
    """A relation's main-fork files: ``rel``, ``rel.1``, ``rel.2`` ... that exist."""
    first = pgdata / rel
    out = [first] if first.exists() else []
    i = 1
    while (seg := pgdata / f"{rel}.{i}").exists():
        out.append(seg)
        i += 1
    return out


def _scan_file(path: Path, label: str, secrets: Sequence[str], out: PgScan) -> None:
    size = path.stat().st_size
    if size == 0:
        return
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for s in secrets:
            for start, _, _ in matcher(s).byte_spans(mm):
                out.hits.setdefault(s, []).append(f"{label}@{start}")


def _compressed_values(conn: Any, tables: Sequence[str], schema: str) -> int:
    """Live values PostgreSQL stored compressed (``pg_column_compression`` not null)."""
    from psycopg import sql

    n = 0
    for table in tables_present(conn, tables, schema):
        cols = [r[0] for r in conn.execute(
            "SELECT a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace ns ON ns.oid = c.relnamespace JOIN pg_type ty ON ty.oid = a.atttypid "
            "WHERE ns.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
            "AND ty.typlen = -1", (schema, table)).fetchall()]
        for col in cols:
            q = sql.SQL("SELECT count(*) FROM {}.{} WHERE pg_column_compression({}) IS NOT NULL").format(
                sql.Identifier(schema), sql.Identifier(table), sql.Identifier(col))
            n += int(conn.execute(q).fetchone()[0])
    return n


def scan_disk(
    conn: Any,
    pgdata: str | Path | None,
    tables: Sequence[str],
    secrets: Sequence[str],
    *,
    schema: str = "public",
    flush: bool = True,
) -> dict[str, PgScan]:
    """The byte-level surfaces (:data:`DISK_SURFACES`) of a local data directory.

    Args:
        conn: an open ``psycopg.Connection`` to the server that owns ``pgdata``
            (autocommit, for ``CHECKPOINT``).
        pgdata: the server's data directory on this machine; ``None``: every disk
            surface is unreadable ("not checked").
        tables: the tables whose relations are ``heap``/``index``/``toast``.
        secrets: the strings to look for.
        schema: the tables' schema.
        flush: run ``CHECKPOINT`` first (needs superuser or ``pg_checkpoint``); when
            it is refused, the surfaces carry a note that unwritten pages were not read.

    Returns:
        Surface -> :class:`PgScan`; locations are ``<relative path>@<byte offset>``.

    Raises:
        ValueError: ``pgdata`` is not this server's data directory (its
            ``PG_VERSION`` is missing, or ``SHOW data_directory`` names another path
            that does not resolve to it).
    """
    if pgdata is None:
        why = "the server's data directory is not readable here (pass pgdata=DIR for a local server)"
        return {s: PgScan(s, readable=False, reason=why) for s in DISK_SURFACES}
    root = Path(pgdata).expanduser().resolve()
    if not (root / "PG_VERSION").exists():
        raise ValueError(f"{root} is not a PostgreSQL data directory (no PG_VERSION)")
    try:
        shown = conn.execute("SHOW data_directory").fetchone()[0]
    except Exception:  # noqa: BLE001 - needs privileges; then the caller vouches for pgdata
        if not conn.autocommit:
            conn.rollback()
        shown = None
    if shown and Path(shown).resolve() != root:
        raise ValueError(f"pgdata {root} is not the server's data directory ({shown})")
    notes: list[str] = []
    if flush:
        try:
            conn.execute("CHECKPOINT")
        except Exception as exc:  # noqa: BLE001 - insufficient privilege: say what was not read
            if not conn.autocommit:
                conn.rollback()
            notes.append(f"CHECKPOINT refused ({type(exc).__name__}): pages still in shared buffers were not read")
    compressed = _compressed_values(conn, tables, schema)
    if compressed:
        notes.append(f"{compressed} live values are stored compressed by PostgreSQL and are not decoded in "
                     "the files (pg_rows reads them)")
    by_surface = relation_files(conn, tables, schema)
    out = {s: PgScan(s, notes=list(notes)) for s in DISK_SURFACES}
    claimed: set[Path] = set()
    for surface, rels in by_surface.items():
        for rel in rels:
            for path in _segments(root, rel):
                claimed.add(path)
                _scan_file(path, str(path.relative_to(root)), secrets, out[surface])
    wal = root / "pg_wal"
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            path = Path(dirpath) / name
            if path in claimed or not path.is_file():
                continue
            surface = "disk_pg_wal" if wal in path.parents else "disk_pg_other"
            try:
                _scan_file(path, str(path.relative_to(root)), secrets, out[surface])
            except (PermissionError, FileNotFoundError) as exc:  # a file removed while walking
                if isinstance(exc, PermissionError):
                    out[surface].readable = False
                    out[surface].reason = f"cannot read {path.relative_to(root)}: {exc.strerror}"
    return out
