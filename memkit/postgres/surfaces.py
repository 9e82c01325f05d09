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
``disk_pg_wal``   every file under ``pg_wal`` (followed when it is a link;
                  segments, recycled ones too, read as records)
``disk_pg_other`` every other file of the data directory (other relations such as
                  ``pg_statistic``, files of relations a ``VACUUM FULL`` replaced,
                  the server's log)
================= =============================================================

Tables are found through the catalog (``pg_class``/``pg_namespace``), in whatever
schema the connection's ``search_path`` puts them (as the application that created
them sees them) or the schema named, and their files through
``pg_relation_filepath`` (tablespaces too); ``pg_wal`` and ``pg_tblspc/*`` are
followed when they are symbolic links (``initdb --waldir``, ``CREATE TABLESPACE``).

Bytes are matched with :mod:`memkit.scan.matching` (every spelling of the secret over
UTF-8) as they are and where PostgreSQL encoded them (:mod:`memkit.postgres.decode`):
compressed values (pglz by memkit, lz4 by PyPI's ``lz4``) decompressed, TOAST values
reassembled from their chunks (live and dead), WAL pages unwrapped, records walked
and compressed full-page images decompressed (:mod:`memkit.postgres.wal`). What cannot be
decoded is listed per surface in :attr:`PgScan.partial` with its count and reason;
such a surface is read only in part, never clean. Before reading files,
:func:`scan_disk` can run ``CHECKPOINT`` (``flush=True``) so that the files hold what
the server's shared buffers hold; a checkpoint deletes nothing (it lets the server
recycle WAL segments, which are renamed and overwritten later, not erased).

Read-only apart from that optional ``CHECKPOINT``: SQL is ``SELECT`` only and files
are opened with ``open(..., "rb")``. Needs ``psycopg`` (the ``postgres`` extra).
"""


from __future__ import annotations

import mmap
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memkit.postgres.decode import DiskDecoder, PgHit, PgScan
from memkit.postgres.pages import BLCKSZ, describe_offset
from memkit.scan.matching import matcher, scalar_text

__all__ = [
    "DISK_SURFACES",
    "SAVER_TABLES",
    "STORE_TABLES",
    "PgHit",
    "PgScan",
    "PgTable",
    "readable_tables",
    "relation_files",
    "resolve_tables",
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

_SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")


@dataclass(frozen=True)
class PgTable:
    """A table found in the catalog: its ``oid``, ``schema`` and ``name``; ``label``
    is how locations name it (``name`` in ``public``, else ``schema.name``)."""

    oid: int
    schema: str
    name: str

    @property
    def label(self) -> str:
        return self.name if self.schema == "public" else f"{self.schema}.{self.name}"


TableRef = str | PgTable


def resolve_tables(conn: Any, tables: Sequence[TableRef], schema: str | None = None) -> list[PgTable]:
    """The tables of ``tables`` that exist (tables, partitioned tables, materialized
    views), in the order given, each once.

    Args:
        conn: an open ``psycopg.Connection``.
        tables: names (``store``: in ``schema``, or without it wherever the
            connection's ``search_path`` finds it, as the application does;
            ``agent.store``: that schema) or :class:`PgTable`.
        schema: the schema of unqualified names; None: ``search_path``.
    """
    out: list[PgTable] = []
    for t in tables:
        if isinstance(t, PgTable):
            found: PgTable | None = t
        else:
            if schema is not None:
                where, args = "n.nspname = %s AND c.relname = %s", (schema, t)
            elif "." in t or t.startswith('"'):
                where, args = "c.oid = to_regclass(%s)", (t,)
            else:
                where, args = "c.oid = to_regclass(quote_ident(%s))", (t,)
            row = conn.execute(
                "SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                f"WHERE {where} AND c.relkind IN ('r', 'p', 'm')", args).fetchone()
            found = PgTable(int(row[0]), row[1], row[2]) if row else None
        if found is not None and found not in out:
            out.append(found)
    return out


def tables_present(conn: Any, tables: Sequence[str], schema: str | None = None) -> list[str]:
    """Those of ``tables`` that exist (:func:`resolve_tables`), as given."""
    found = {(t.schema, t.name) for t in resolve_tables(conn, tables, schema)}
    out = []
    for t in tables:
        hit = resolve_tables(conn, [t], schema)
        if hit and (hit[0].schema, hit[0].name) in found:
            out.append(t)
    return out


def readable_tables(conn: Any, *, schemas: Sequence[str] | None = None,
                    tables: Sequence[str] | None = None) -> tuple[list[PgTable], list[str]]:
    """Every table (and materialized view) of the database outside the system schemas,
    or those of ``schemas``, or the ``tables`` named (:func:`resolve_tables`): those
    this role may ``SELECT`` from, and the labels of those it may not.

    Raises:
        ValueError: a table or schema named that does not exist.
    """
    if tables:
        found = resolve_tables(conn, tables)
        missing = [t for t in tables if not resolve_tables(conn, [t])]
        if missing:
            raise ValueError(f"no such table: {', '.join(missing)}")
    else:
        if schemas:
            have = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)",
                                               (list(schemas),)).fetchall()}
            missing = [s for s in schemas if s not in have]
            if missing:
                raise ValueError(f"no such schema: {', '.join(missing)}")
        rows = conn.execute(
            "SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'm') AND (%s::text[] IS NULL AND n.nspname <> ALL(%s) "
            "AND n.nspname NOT LIKE 'pg\\_temp\\_%%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%%' "
            "OR n.nspname = ANY(%s::text[])) ORDER BY n.nspname, c.relname",
            (list(schemas) if schemas else None, list(_SYSTEM_SCHEMAS), list(schemas) if schemas else None),
        ).fetchall()
        found = [PgTable(int(o), s, n) for o, s, n in rows]
    ok, refused = [], []
    for t in found:
        allowed = conn.execute("SELECT has_schema_privilege(%s, 'USAGE') AND has_table_privilege(%s, 'SELECT')",
                               (t.schema, t.oid)).fetchone()[0]
        (ok if allowed else refused).append(t if allowed else t.label)
    return ok, refused


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


def _spans(value: Any, secret: str) -> list[tuple[int, int, str]]:
    m = matcher(secret)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return m.byte_spans(bytes(value))
    text = scalar_text(value)
    if text is None:
        text = str(value) if not isinstance(value, bool) else None
    return [] if text is None else m.spans(text)


def _masked(value: Any, spans: list[tuple[int, int, str]], s: int, e: int) -> str:
    data = value if isinstance(value, str) else bytes(value).decode("utf-8", "replace") if isinstance(
        value, (bytes, bytearray, memoryview)) else str(value)
    lo, hi = max(0, s - 24), min(len(data), e + 24)
    out, i = [], lo
    for a, b, _ in spans:
        a, b = max(a, lo), min(b, hi)
        if b <= i or a >= hi:
            continue
        out += [data[i:a], "[SECRET]"]
        i = b
    return "".join([*out, data[i:hi]]).replace("\n", " ")


def scan_rows(conn: Any, tables: Sequence[TableRef], secrets: Sequence[str], schema: str | None = None) -> PgScan:
    """``pg_rows``: copies of each secret in every column of every live row.

    Args:
        conn: an open ``psycopg.Connection``.
        tables: tables (:func:`resolve_tables`; those missing are skipped).
        secrets: the strings to look for.
        schema: the schema of unqualified names; None: the connection's ``search_path``.

    Returns:
        :class:`PgScan` with locations ``<table>:row <n>:<column><path>``.
    """
    from psycopg import sql

    out = PgScan("pg_rows")
    for table in resolve_tables(conn, tables, schema):
        cur = conn.execute(sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(table.schema),
                                                                 sql.Identifier(table.name)))
        names = [d.name for d in cur.description or ()]
        out.decoded["tables"] = out.decoded.get("tables", 0) + 1
        for i, row in enumerate(cur):
            out.decoded["rows"] = out.decoded.get("rows", 0) + 1
            for col, value in zip(names, row, strict=True):
                for path, leaf in _values(value, ""):
                    for s in secrets:
                        spans = _spans(leaf, s)
                        for a, b, kind in spans:
                            out.add(PgHit(s, f"{table.label}:row {i}:{col}{path}", kind, _masked(leaf, spans, a, b)))
    return out


def relation_files(conn: Any, tables: Sequence[TableRef], schema: str | None = None) -> dict[str, list[str]]:
    """Data-directory paths (relative: ``base/<db>/<filenode>``, or
    ``pg_tblspc/<oid>/...`` in a tablespace) of the tables' relations, by surface:
    ``disk_pg_heap`` (the tables), ``disk_pg_index`` (their indexes),
    ``disk_pg_toast`` (their TOAST tables and TOAST indexes).

    Source: ``pg_relation_filepath`` (PostgreSQL manual, "Database Object Management
    Functions"); main fork only (the free-space and visibility maps hold no tuples).
    """
    present = resolve_tables(conn, tables, schema)
    out: dict[str, list[str]] = {"disk_pg_heap": [], "disk_pg_index": [], "disk_pg_toast": []}
    if not present:
        return out
    rows = conn.execute(
        """
        WITH t AS (SELECT c.oid, c.reltoastrelid FROM pg_class c WHERE c.oid = ANY(%s))
        SELECT 'disk_pg_heap', pg_relation_filepath(t.oid) FROM t
        UNION ALL SELECT 'disk_pg_index', pg_relation_filepath(i.indexrelid) FROM t JOIN pg_index i ON i.indrelid = t.oid
        UNION ALL SELECT 'disk_pg_toast', pg_relation_filepath(t.reltoastrelid) FROM t WHERE t.reltoastrelid <> 0
        UNION ALL SELECT 'disk_pg_toast', pg_relation_filepath(i.indexrelid)
                  FROM t JOIN pg_index i ON i.indrelid = t.reltoastrelid WHERE t.reltoastrelid <> 0
        """,
        ([t.oid for t in present],),
    ).fetchall()
    for surface, path in rows:
        if path and path not in out[surface]:
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


def _setting(conn: Any, name: str) -> str | None:
    try:
        return str(conn.execute(f"SHOW {name}").fetchone()[0])
    except Exception:  # noqa: BLE001 - a role may not read some settings
        if not conn.autocommit:
            conn.rollback()
        return None


def _pread(path: Path, start: int, length: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(start)
        return fh.read(length)


def _read_file(dec: DiskDecoder, surface: str, path: Path, label: str, pages: bool) -> None:
    """One file on ``surface``; ``pages``: name heap/TOAST page regions in locations."""
    size = path.stat().st_size
    dec.count(surface, "files")
    dec.count(surface, "bytes", size)
    if size == 0:
        return
    bs = dec.blcksz

    def where(off: int) -> str:
        block = off // bs
        if not pages or size < (block + 1) * bs:
            return f"{label}@{off}"
        return f"{label}@{off} (block {block}, {describe_offset(_pread(path, block * bs, bs), off % bs)})"

    source = dec.source(where, lambda s, n: _pread(path, s, n))
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        dec.read(surface, mm, source)


def _read_or_count(dec: DiskDecoder, surface: str, path: Path, label: str, pages: bool) -> None:
    """:func:`_read_file`; a file that cannot be read is counted as not read (one
    removed while the directory was walked, a temporary file, is skipped)."""
    try:
        _read_file(dec, surface, path, label, pages)
    except FileNotFoundError:
        pass
    except OSError as exc:
        dec.undecoded(surface, f"files not readable here ({label}: {exc.strerror or exc})")


def _walk(top: Path) -> Iterator[Path]:
    """Regular files under ``top`` (symbolic links to directories not followed)."""
    for dirpath, _, files in os.walk(top):
        for name in sorted(files):
            yield Path(dirpath) / name


def _read_wal(dec: DiskDecoder, root: Path, wal_compression: str | None) -> Any:
    """``pg_wal`` on ``disk_pg_wal``; returns the :class:`memkit.postgres.wal.WalRead`, whose
    files stay mapped (TOAST values are reassembled from them later): close it."""
    from memkit.postgres.wal import read_wal

    surface = "disk_pg_wal"
    wal_dir = root / "pg_wal"
    files = [(p, str(wal_dir.name / p.relative_to(wal_dir.resolve())))
             for p in _walk(wal_dir.resolve()) if p.is_file()] if wal_dir.exists() else []
    refused = [label for p, label in files if not os.access(p, os.R_OK)]
    if refused:
        dec.undecoded(surface, f"WAL files not readable by this user ({refused[0]} among them)", len(refused))
    files = [(p, label) for p, label in files if label not in refused]
    for p, _ in files:
        dec.count(surface, "files")
        dec.count(surface, "bytes", p.stat().st_size)
    wal = read_wal(files)
    try:
        _wal_sources(dec, wal, wal_compression)
    except BaseException:
        wal.close()
        raise
    return wal


def _wal_sources(dec: DiskDecoder, wal: Any, wal_compression: str | None) -> None:
    surface = "disk_pg_wal"
    sources = {}
    for f in wal.files:
        sources[f.index] = src = dec.source(lambda off, f=f: f"{f.label}@{f.file_offset(off)}", f.read)
        dec.read(surface, f.stream(), src, pages=False)
    # a copy across two files: a window over the end of one and the start of the next
    chained = sorted((f for f in wal.files if f.pages), key=lambda f: f.pages[0].addr)
    for a, b in zip(chained, chained[1:], strict=False):
        if b.pages[0].addr != a.pages[-1].addr + a.blcksz or b.pages[0].offset != 0:
            continue
        w = a.blcksz + 16
        left, right = a.read(max(a.stream_len - w, 0), w), b.read(0, w)
        base = a.stream_len - len(left)

        def label(off: int, a: Any = a, b: Any = b, base: int = base, n: int = len(left)) -> str:
            return (f"{a.label}@{a.file_offset(base + off)}" if off < n
                    else f"{b.label}@{b.file_offset(off - n)}")

        window = left + right
        dec.read(surface, window, dec.source(label, lambda s, n, w=window: w[s: s + n]), seam=len(left),
                 pages=False)
    dec.count(surface, "WAL records", wal.records)
    for im in wal.images:
        if im.page is None:
            dec.undecoded(surface, f"compressed full-page images ({im.method}) not decoded: {im.error}")
            continue
        dec.count(surface, "page images decompressed")
        for fi, s, e in im.covers:
            dec.cover(surface, sources[fi], s, e)
        page = im.page

        def where(off: int, im: Any = im, page: bytes = page) -> str:
            return f"{im.label}@{off} ({describe_offset(page, off)})"

        dec.read(surface, page, dec.source(where, lambda s, n, p=page: p[s: s + n]))
    if wal.cut_images:
        dec.undecoded(surface, "compressed full-page images in records cut off by a missing WAL page",
                      wal.cut_images)
    for label in wal.unknown:
        dec.undecoded(surface, f"WAL files of a PostgreSQL version memkit does not decode ({label} among "
                               "them): read as raw bytes, records not decoded")
    if wal.fragment_bytes:
        what = (f"{wal.fragment_bytes} bytes on {wal.fragment_pages} WAL pages are the rest of records whose "
                "start was overwritten: read as raw bytes")
        if (wal_compression or "off") != "off" or wal.images:
            dec.undecoded(surface, f"WAL pages hold the rest of records whose start was overwritten ({what}; "
                                   f"with wal_compression={wal_compression or 'unknown'} a compressed "
                                   "full-page image among them cannot be decoded)", wal.fragment_pages)
        else:
            dec.surfaces[surface].scan.notes.append(what + " (wal_compression is off: no compressed page "
                                                           "image among them)")


def scan_disk(
    conn: Any,
    pgdata: str | Path | None,
    tables: Sequence[TableRef],
    secrets: Sequence[str],
    *,
    schema: str | None = None,
    flush: bool = True,
) -> dict[str, PgScan]:
    """The byte-level surfaces (:data:`DISK_SURFACES`) of a local data directory,
    decoded (module doc).

    Args:
        conn: an open ``psycopg.Connection`` to the server that owns ``pgdata``
            (autocommit, for ``CHECKPOINT``).
        pgdata: the server's data directory on this machine; ``None``: every disk
            surface is unreadable ("not checked").
        tables: the tables whose relations are ``heap``/``index``/``toast``
            (:func:`resolve_tables`).
        secrets: the strings to look for.
        schema: the schema of unqualified names; None: the connection's ``search_path``.
        flush: run ``CHECKPOINT`` first (needs superuser or ``pg_checkpoint``); when
            it is refused, every surface is partly read (pages still in shared buffers).

    Returns:
        Surface -> :class:`PgScan`; locations are ``<relative path>@<byte offset>``,
        with the page region for heap and TOAST files and ``[how]`` when the copy was
        decoded (``[pglz value]``, ``[TOAST value <id>, chunks 0|1]``, ``[full-page
        image of <spc>/<db>/<rel> block <n>, pglz]``).

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
    shown = _setting(conn, "data_directory")
    if shown and Path(shown).resolve() != root:
        raise ValueError(f"pgdata {root} is not the server's data directory ({shown})")
    refused = None
    if flush:
        try:
            conn.execute("CHECKPOINT")
        except Exception as exc:  # noqa: BLE001 - insufficient privilege: say what was not read
            if not conn.autocommit:
                conn.rollback()
            refused = f"CHECKPOINT refused ({type(exc).__name__}): pages still in shared buffers were not read"
    blcksz = int(_setting(conn, "block_size") or BLCKSZ)
    # TOAST_MAX_CHUNK_SIZE: a quarter of the page less its header and 4 line pointers,
    # less the chunk tuple's header, chunk_id, chunk_seq and bytea header (1996 for 8 kB)
    dec = DiskDecoder(secrets, DISK_SURFACES, blcksz=blcksz, max_chunk=(blcksz - 40) // 4 // 8 * 8 - 36)
    claimed: set[Path] = set()
    for surface, rels in relation_files(conn, tables, schema).items():
        for rel in rels:
            for path in _segments(root, rel):
                claimed.add(path.resolve())
                _read_or_count(dec, surface, path, str(path.relative_to(root)), surface != "disk_pg_index")
    wal_dir = (root / "pg_wal").resolve()
    wal = _read_wal(dec, root, _setting(conn, "wal_compression"))
    tops = [(root, root)]
    tblspc = root / "pg_tblspc"
    if tblspc.is_dir():
        tops += [(p.resolve(), p) for p in sorted(tblspc.iterdir()) if p.is_symlink() and p.resolve().is_dir()]
    seen: set[Path] = set()
    for real, shown_as in tops:
        for path in _walk(real):
            rp = path.resolve()
            if rp in claimed or rp in seen or wal_dir in rp.parents or not rp.is_file():
                continue
            seen.add(rp)
            label = str(shown_as.relative_to(root) / path.relative_to(real)) if real != root else str(
                path.relative_to(root))
            _read_or_count(dec, "disk_pg_other", path, label, False)
    try:
        out = dec.finish()
    finally:
        wal.close()
    for scan in out.values():
        scan.partial[:0] = [refused] if refused else []
    return out
