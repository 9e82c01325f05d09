"""The surfaces and deletion steps of the memory objects an agent is built on, found
from the objects themselves.

:func:`attach` takes whatever store and checkpointer a LangGraph agent was compiled
with and returns every surface memkit can read there, and the deletion steps the
backend has:

===================================== =========================================================
object                                surfaces (steps)
===================================== =========================================================
any ``BaseStore``                     ``store_api``: every namespace, key and value field
``InMemoryStore``                     ``store_vectors`` (its vectors vs. the items' text)
``SqliteStore`` / ``SqliteSaver``     ``store_vectors``; ``sqlite_rows``, ``disk_sqlite`` of
                                      the database files (``vacuum``, ``wal_checkpoint``)
``PostgresStore`` / ``PostgresSaver`` ``store_vectors``; ``pg_rows``, ``disk_pg_*``
                                      (:mod:`memkit.postgres.surfaces`; the connection from the
                                      object, the data directory from the server when it is
                                      on this machine) (``vacuum``, ``vacuum_full``,
                                      ``checkpoint_wal``)
memkit's ``MemkitStore`` /            every :func:`memkit.residue.chroma.scan` surface of its
``TieredMemoryStore`` / a Chroma      Chroma store (``text_*``, ``metadata``,
directory                             ``stale_embedding``, ``disk_*``)
any checkpointer                      ``checkpoint``: every checkpoint, blob and pending
                                      write (:func:`memkit.residue.chroma.scan_checkpoints`)
side files (``also``)                 ``side_*`` (:func:`memkit.residue.chroma.scan`)
===================================== =========================================================

A surface memkit cannot read here (a server's disk elsewhere) is "not checked" with
the reason; a surface the objects do not have is simply absent (n/a).
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluators.targets.base import (
    FunctionSurface,
    Surface,
    SurfaceResult,
    UncheckedSurface,
    copies_in,
)

__all__ = ["Attached", "attach", "checkpoint_surface", "store_api_surface", "store_items"]

SIDE_SURFACES = ("side_sqlite", "side_disk", "side_fulltext", "side_json", "side_pickle", "side_file")
CHROMA_SURFACES = ("text_raw", "text_summary", "text_other", "metadata", "stale_embedding", "stale_vector", "disk_sqlite",
                   "disk_wal", "disk_log", "disk_fulltext", "disk_hnsw", "disk_other")


@dataclass
class Attached:
    """What :func:`attach` found: the surfaces, the deletion steps (by name, in order),
    functions to call on close, a context manager restricting recall to tiers
    (``None`` when the store cannot), and a reader of the store's leftover vectors with
    its embedding model (``None`` when memkit cannot read them: :mod:`memkit.residue.vectors`)."""

    surfaces: list[Surface] = field(default_factory=list)
    steps: dict[str, Callable[[], Any]] = field(default_factory=dict)
    closers: list[Callable[[], Any]] = field(default_factory=list)
    restrict_tiers: Callable[[Sequence[str]], Any] | None = None
    vectors: Callable[[], Any] | None = None
    embedder: Any = None


# --------------------------------------------------------------------------- BaseStore API


def store_items(store: Any, prefix: tuple[str, ...] = (), page: int = 500) -> Iterator[Any]:
    """Every item of a ``BaseStore`` under ``prefix`` (all namespaces, paged through
    ``list_namespaces`` and ``search``), each once."""
    namespaces: list[tuple[str, ...]] = []
    offset = 0
    while True:
        got = store.list_namespaces(prefix=prefix or None, limit=page, offset=offset)
        namespaces += got
        if len(got) < page:
            break
        offset += page
    for ns in namespaces:
        offset = 0
        while True:
            items = store.search(ns, limit=page, offset=offset)
            for item in items:
                if tuple(item.namespace) == tuple(ns):
                    yield item
            if len(items) < page:
                break
            offset += page


def store_api_surface(store: Any) -> Surface:
    """``store_api``: copies in every namespace label, key and value field of every
    item, read through the ``BaseStore`` API."""

    def scan(secrets: Sequence[str]) -> SurfaceResult:
        out = SurfaceResult("store_api")
        for item in store_items(store):
            where = f"{'/'.join(item.namespace)}:{item.key}"
            for s in secrets:
                out.add(s, where, copies_in([list(item.namespace), item.key, item.value], s))
        return out

    return FunctionSurface("store_api", scan, "every namespace, key and value field through the BaseStore API")


def checkpoint_surface(saver: Any) -> Surface:
    """``checkpoint``: every checkpoint, channel blob and pending write the saver holds
    (:func:`memkit.residue.chroma.scan_checkpoints`, the one checkpoint scanner: writes whose
    checkpoint was deleted included; a saver it can only list is partly read)."""

    def scan(secrets: Sequence[str]) -> SurfaceResult:
        from memkit.residue.chroma import ResidueReport, scan_checkpoints

        out = SurfaceResult("checkpoint")
        reasons: list[str] = []
        for s in secrets:
            report = scan_checkpoints(saver, s, report=ResidueReport(target="checkpoints"))
            for hit in report.surfaces["checkpoint"]:
                out.add(s, hit.location)
            reasons += [r for r in report.unchecked.get("checkpoint", []) if r not in reasons]
        out.partial = "; ".join(reasons) or None
        return out

    return FunctionSurface("checkpoint", scan, "every checkpoint, blob and pending write of every thread")


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    import numpy as np

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y / d) if d else 0.0


def vector_surface(store: Any, read_vectors: Callable[[], list[tuple[tuple[str, ...], str, str, list[float]]]],
                   embed: Any, threshold: float = 0.99) -> Surface:
    """``store_vectors``: stored vectors that no longer encode their item's current
    text: the item is gone (an orphan vector) or the text at the vector's field
    changed without re-embedding (cosine to the re-embedded current text below
    ``threshold``). A vector cannot be read back into text, so such vectors are
    ``unattributed`` copies of some old text, not of one secret.

    ``read_vectors`` returns ``(namespace, key, field, vector)`` of every stored vector.
    """

    def scan(secrets: Sequence[str]) -> SurfaceResult:
        out = SurfaceResult("store_vectors")
        for ns, key, fld, vec in read_vectors():
            item = store.get(ns, key)
            text = item.value.get(fld) if item is not None and isinstance(item.value, dict) else None
            if not isinstance(text, str):
                out.unattributed.append(f"{'/'.join(ns)}:{key}:{fld} (item gone)")
            elif embed is not None and _cosine(vec, embed.embed_query(text)) < threshold:
                out.unattributed.append(f"{'/'.join(ns)}:{key}:{fld} (text changed)")
        return out

    return FunctionSurface("store_vectors", scan, "stored vectors vs. their items' current text")


def orphan_vectors(store: Any, read_vectors: Callable[[], list[tuple[tuple[str, ...], str, str, list[float]]]]
                   ) -> Callable[[], Any]:
    """A leftover-vector reader of a LangGraph store's ``store_vectors``: the vectors
    whose item is gone (:class:`memkit.residue.vectors.VectorRead`)."""

    def read() -> Any:
        import numpy as np

        from memkit.residue.vectors import LeftoverVector, VectorRead

        out = VectorRead()
        rows = read_vectors()
        for ns, key, fld, vec in rows:
            if store.get(ns, key) is None:
                out.leftovers.append(LeftoverVector("store_vectors", f"{'/'.join(ns)}:{key}:{fld}",
                                                    np.asarray(vec, dtype=np.float32), key, "no live row"))
            else:
                out.live += 1
        out.read["store_vectors"] = f"{len(rows)} stored vectors"
        return out

    return read


def _index_embed(store: Any) -> Any:
    """The embeddings object of a LangGraph store's index (``None`` without one)."""
    config = getattr(store, "index_config", None) or {}
    return config.get("embed") if isinstance(config, dict) else None


# --------------------------------------------------------------------------- SQLite


def sqlite_file(conn: Any) -> Path | None:
    """The main database file of an ``sqlite3`` connection (``None``: in memory)."""
    for _, name, path in conn.execute("PRAGMA database_list").fetchall():
        if name == "main" and path:
            return Path(path)
    return None


def sqlite_surfaces(files: Sequence[Path]) -> list[Surface]:
    """``sqlite_rows`` (every row of every table, SQL on a copy) and ``disk_sqlite``
    (raw bytes of the files and their ``-wal``/``-journal``) of SQLite databases."""

    def rows(secrets: Sequence[str]) -> SurfaceResult:
        out = SurfaceResult("sqlite_rows")
        with tempfile.TemporaryDirectory(prefix="memkit-sqlite-") as tmp:
            for n, f in enumerate(files):
                if not f.exists():
                    continue
                copy = Path(tmp) / f"{n}-{f.name}"
                shutil.copy2(f, copy)
                if Path(f"{f}-wal").exists():
                    shutil.copy2(f"{f}-wal", f"{copy}-wal")
                con = sqlite3.connect(copy)
                try:
                    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                    for t in tables:
                        cur = con.execute(f'SELECT * FROM "{t}"')
                        names = [d[0] for d in cur.description]
                        for i, row in enumerate(cur):
                            for col, v in zip(names, row, strict=True):
                                for s in secrets:
                                    out.add(s, f"{f.name}:{t}:row {i}:{col}", copies_in(v, s))
                finally:
                    con.close()
        return out

    def disk(secrets: Sequence[str]) -> SurfaceResult:
        from memkit.scan.matching import matcher

        out = SurfaceResult("disk_sqlite")
        for f in files:
            for p in (f, Path(f"{f}-wal"), Path(f"{f}-journal")):
                if p.exists() and p.stat().st_size:
                    data = p.read_bytes()
                    for s in secrets:
                        for start, _, _ in matcher(s).byte_spans(data):
                            out.add(s, f"{p.name}@{start}")
        return out

    return [FunctionSurface("sqlite_rows", rows, "every row of every table of the SQLite files (SQL on a copy)"),
            FunctionSurface("disk_sqlite", disk, "raw bytes of the SQLite files and their -wal/-journal")]


def _sqlite_steps(files: Sequence[Path]) -> dict[str, Callable[[], Any]]:
    def each(sql_text: str) -> Callable[[], None]:
        def run() -> None:
            for f in files:
                con = sqlite3.connect(f, isolation_level=None)
                try:
                    con.execute(sql_text)
                finally:
                    con.close()

        return run

    return {"vacuum": each("VACUUM"), "wal_checkpoint": each("PRAGMA wal_checkpoint(TRUNCATE)")}


def _sqlite_vectors(conn: Any) -> Callable[[], list[tuple[tuple[str, ...], str, str, list[float]]]]:
    def read() -> list[tuple[tuple[str, ...], str, str, list[float]]]:
        import struct

        out = []
        for prefix, key, fld, blob in conn.execute("SELECT prefix, key, field_name, embedding FROM store_vectors"):
            out.append((tuple(prefix.split(".")), key, fld, list(struct.unpack(f"{len(blob) // 4}f", blob))))
        return out

    return read


# --------------------------------------------------------------------------- PostgreSQL


def pg_conninfo(conn: Any) -> str:
    """A connection string for the server a psycopg connection or pool talks to (the
    password included when the object has one), for memkit's own read connection."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if hasattr(conn, "conninfo") and not hasattr(conn, "info"):  # a psycopg_pool pool
        return str(conn.conninfo)
    info = conn.info
    params = conninfo_to_dict(info.dsn)
    if getattr(info, "password", None):
        params["password"] = info.password
    return make_conninfo(**params)


def postgres_attach(conninfo: str, pgdata: str | Path | None, embed: Any = None, store: Any = None) -> Attached:
    """Surfaces and steps of a PostgreSQL database holding LangGraph's store and saver
    tables: ``store_vectors`` (with ``store``), ``pg_rows``, ``disk_pg_*`` (with the
    data directory: ``pgdata``, else the server's own when it is on this machine)."""
    import psycopg

    from memkit.postgres import surfaces as surfaces_pg

    audit_conn = psycopg.connect(conninfo, autocommit=True)
    tables = [*surfaces_pg.STORE_TABLES, *surfaces_pg.SAVER_TABLES]
    from memkit.postgres.database import data_directory

    try:
        pgdata, why = data_directory(audit_conn, pgdata)
    except BaseException:
        audit_conn.close()
        raise

    def rows(secrets: Sequence[str]) -> SurfaceResult:
        got = surfaces_pg.scan_rows(audit_conn, tables, secrets)
        out = SurfaceResult("pg_rows")
        for s, locs in got.hits.items():
            for loc in locs:
                out.add(s, loc)
        return out

    cache: dict[tuple[str, ...], dict[str, Any]] = {}

    def disk(surface: str) -> Callable[[Sequence[str]], SurfaceResult]:
        def scan(secrets: Sequence[str]) -> SurfaceResult:
            key = tuple(secrets)  # one pass over the data directory serves every disk surface of a phase
            if surface == surfaces_pg.DISK_SURFACES[0] or key not in cache:
                cache.clear()
                cache[key] = surfaces_pg.scan_disk(audit_conn, pgdata, tables, secrets)
            got = cache[key][surface]
            if not got.readable:
                return SurfaceResult(surface, "not_checked", reason=why or got.reason)
            out = SurfaceResult(surface, notes=list(got.notes), partial="; ".join(got.partial) or None)
            for s, locs in got.hits.items():
                for loc in locs:
                    out.add(s, loc)
            return out

        return scan

    def each(sql_text: str) -> Callable[[], None]:
        def run() -> None:
            for t in surfaces_pg.resolve_tables(audit_conn, tables):  # in the connection's search_path
                audit_conn.execute(f'{sql_text} "{t.schema}"."{t.name}"')

        return run

    def checkpoint_wal() -> None:
        audit_conn.execute("CHECKPOINT")
        audit_conn.execute("SELECT pg_switch_wal()")
        audit_conn.execute("CHECKPOINT")

    surfaces: list[Surface] = []
    leftovers = None
    if store is not None:
        def leftovers() -> Any:
            from memkit.residue.vectors import pg_leftover_vectors

            return pg_leftover_vectors(audit_conn, pgdata)

        def vectors() -> list[tuple[tuple[str, ...], str, str, list[float]]]:
            if not surfaces_pg.tables_present(audit_conn, ["store_vectors"]):
                return []
            cur = audit_conn.execute("SELECT prefix, key, field_name, embedding::text FROM store_vectors")
            return [(tuple(p.split(".")), k, f, [float(x) for x in e.strip("[]").split(",")]) for p, k, f, e in cur]

        surfaces.append(vector_surface(store, vectors, embed))
    surfaces.append(FunctionSurface("pg_rows", rows, "live rows (SQL)"))
    surfaces += [FunctionSurface(s, disk(s), "data directory bytes") for s in surfaces_pg.DISK_SURFACES]
    steps = {"vacuum": each("VACUUM"), "vacuum_full": each("VACUUM FULL"), "checkpoint_wal": checkpoint_wal}
    return Attached(surfaces=surfaces, steps=steps, closers=[audit_conn.close], vectors=leftovers,
                    embedder=embed if leftovers is not None else None)


# --------------------------------------------------------------------------- attach


def _is(obj: Any, module: str, name: str) -> bool:
    """Whether ``obj`` is an instance of ``module.name`` (imported only if installed)."""
    import importlib

    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return False
    return isinstance(obj, cls)


def attach(store: Any = None, checkpointer: Any = None, *, also: Sequence[str | Path] = (),
           pgdata: str | Path | None = None) -> Attached:
    """Every surface and deletion step memkit can reach through these objects (module doc).

    Args:
        store: a LangGraph ``BaseStore``, memkit's ``MemkitStore`` or
            ``TieredMemoryStore``, or the path of a Chroma directory.
        checkpointer: a LangGraph checkpointer, or a list of them.
        also: side files or directories the memory layer keeps.
        pgdata: a PostgreSQL store's data directory, when the server cannot say it.

    Returns:
        :class:`Attached`.
    """
    from memkit.store.langgraph import MemkitStore
    from memkit.store.tiered import TieredMemoryStore

    out = Attached()
    savers = [] if checkpointer is None else list(checkpointer) if isinstance(checkpointer, (list, tuple)) \
        else [checkpointer]
    chroma = store.tiered if isinstance(store, MemkitStore) else store
    if isinstance(chroma, TieredMemoryStore | str | Path):
        from evaluators.targets.residue_surfaces import residue_surfaces

        path = Path(chroma).expanduser() if isinstance(chroma, str | Path) else chroma
        names = [*CHROMA_SURFACES, *(SIDE_SURFACES if also else ())]
        side = list(also)
        out.surfaces += residue_surfaces(lambda: path, names, also=lambda: side, check_embeddings=True)
        root = path.path if isinstance(path, TieredMemoryStore) else path
        if root is not None:
            from memkit.residue.vectors import chroma_leftover_vectors

            out.vectors = lambda: chroma_leftover_vectors(root)
            out.embedder = chroma.embedder if isinstance(chroma, TieredMemoryStore) else LazyEmbedder()
        if isinstance(store, MemkitStore):
            out.surfaces.insert(0, store_api_surface(store))
            out.restrict_tiers = store.restrict_tiers
        also = ()
    elif store is not None:
        out.surfaces.append(store_api_surface(store))
        embed = _index_embed(store)
        if _is(store, "langgraph.store.memory", "InMemoryStore"):
            out.surfaces.append(vector_surface(store, lambda: _memory_vectors(store), embed))
            if embed is not None:
                out.vectors, out.embedder = orphan_vectors(store, lambda: _memory_vectors(store)), embed
        elif _is(store, "langgraph.store.sqlite", "SqliteStore"):
            f = sqlite_file(store.conn)
            if embed is not None:
                out.surfaces.append(vector_surface(store, _sqlite_vectors(store.conn), embed))
                out.vectors, out.embedder = orphan_vectors(store, _sqlite_vectors(store.conn)), embed
            else:
                out.surfaces.append(UncheckedSurface(
                    "store_vectors", "the SqliteStore has no vector index, so it keeps no vectors", status="n/a"))
            if f is not None:
                files = [f]
                for saver in savers:
                    g = sqlite_file(saver.conn) if _is(saver, "langgraph.checkpoint.sqlite", "SqliteSaver") else None
                    if g is not None and g not in files:
                        files.append(g)
                out.surfaces += sqlite_surfaces(files)
                out.steps.update(_sqlite_steps(files))
        elif _is(store, "langgraph.store.postgres", "PostgresStore"):
            pg = postgres_attach(pg_conninfo(store.conn), pgdata, embed, store)
            out.surfaces += pg.surfaces
            out.steps.update(pg.steps)
            out.closers += pg.closers
            out.vectors, out.embedder = pg.vectors, pg.embedder
    if not any(s.name == "pg_rows" for s in out.surfaces):
        for saver in savers:
            if _is(saver, "langgraph.checkpoint.postgres", "PostgresSaver"):
                pg = postgres_attach(pg_conninfo(saver.conn), pgdata)
                out.surfaces += pg.surfaces
                out.steps.update(pg.steps)
                out.closers += pg.closers
                break
    if not any(s.name == "sqlite_rows" for s in out.surfaces):
        files = [f for saver in savers if _is(saver, "langgraph.checkpoint.sqlite", "SqliteSaver")
                 for f in [sqlite_file(saver.conn)] if f is not None]
        if files:
            out.surfaces += sqlite_surfaces(files)
            out.steps.update(_sqlite_steps(files))
    for saver in savers:
        out.surfaces.append(checkpoint_surface(saver))
    if len(savers) > 1:  # one surface per name: merge the savers' checkpoint scans
        out.surfaces = [s for s in out.surfaces if s.name != "checkpoint"] + [_merged_checkpoints(savers)]
    if also:
        from evaluators.targets.residue_surfaces import residue_surfaces

        side = list(also)
        out.surfaces += residue_surfaces(lambda: None, SIDE_SURFACES, also=lambda: side)
    return out


class LazyEmbedder:
    """memkit's embedder (:func:`memkit.models.embeddings`), loaded on its first ``encode``
    (a store whose vectors are never weighed never loads the model)."""

    def __init__(self) -> None:
        self._inner: Any = None

    def encode(self, texts: list[str]) -> Any:
        if self._inner is None:
            from memkit.models import embeddings

            self._inner = embeddings()
        return self._inner.encode(texts)


def _merged_checkpoints(savers: Sequence[Any]) -> Surface:
    parts = [checkpoint_surface(s) for s in savers]

    def scan(secrets: Sequence[str]) -> SurfaceResult:
        out = SurfaceResult("checkpoint")
        for p in parts:
            got = p.scan(secrets)
            for s, locs in got.hits.items():
                out.hits.setdefault(s, []).extend(locs)
            if got.partial:
                out.partial = "; ".join(x for x in (out.partial, got.partial) if x)
        return out

    return FunctionSurface("checkpoint", scan, "every checkpoint of every saver")


def _memory_vectors(store: Any) -> list[tuple[tuple[str, ...], str, str, list[float]]]:
    """``InMemoryStore`` keeps vectors in ``_vectors[namespace][key][path]`` (langgraph 1.x)."""
    out = []
    for ns, by_key in getattr(store, "_vectors", {}).items():
        for key, by_path in by_key.items():
            for path, vec in by_path.items():
                out.append((tuple(ns), key, path, list(vec)))
    return out
