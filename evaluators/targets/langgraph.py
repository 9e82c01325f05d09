"""Built-in target ``langgraph``: a LangGraph agent over any ``BaseStore`` + checkpointer.

The agent is the usual LangGraph long-term-memory pattern (as in
``examples/01_audit_react_agent.py``), built from stock parts and compiled with the
store and checkpointer under audit:

* a **memory writer** graph, run after each conversation with the checkpointer (one
  thread per session, as a chat app keeps its conversations): it stores every user
  turn under the namespace ``("memories", user_id)`` (value ``{"content", "date",
  "session_id"}``, indexed on ``content``);
* a **recall-then-answer** agent (``MessagesState``): ``store.search`` under
  ``("memories", user_id)`` for the top ``k`` memories, then a chat model answers
  (memkit's model-free ``extractive`` model by default, :func:`memkit.models.chat_model`).

Backends (``build(backend=...)``), each with real LangGraph classes:

============ ============================================= ===========================
backend      store + checkpointer                          extra surfaces
============ ============================================= ===========================
``memory``   ``InMemoryStore`` + ``InMemorySaver``         (API only)
``sqlite``   ``SqliteStore`` + ``SqliteSaver`` (files in   ``sqlite_rows``,
             ``workdir``; langgraph-checkpoint-sqlite)     ``disk_sqlite``
``postgres`` ``PostgresStore`` (pgvector index) +          ``pg_rows``, ``disk_pg_*``
             ``PostgresSaver`` (``pg_uri``; the            (:mod:`memkit.surfaces_pg`;
             ``postgres`` extra)                           with ``pgdata``)
============ ============================================= ===========================

Every backend has ``store_api`` (every namespace, item and value field through the
``BaseStore`` API), ``store_vectors`` (stored vectors whose item is gone or whose
text changed, where the store exposes its vectors) and ``checkpoint`` (every
checkpoint and pending write of every thread, through the saver's ``list``).

Forget: ``forget_secret`` deletes, through ``BaseStore.delete``, every item of the
user whose value holds the secret; ``forget_user`` deletes every item of the user
and their threads (``delete_thread``). Deletion steps beyond the API delete:
``postgres``: ``vacuum`` (``VACUUM``), ``vacuum_full`` (``VACUUM FULL``),
``checkpoint_wal`` (``CHECKPOINT``, ``pg_switch_wal()``, ``CHECKPOINT``); ``sqlite``:
``vacuum`` (``VACUUM``), ``wal_checkpoint`` (``PRAGMA wal_checkpoint(TRUNCATE)``).
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig
from langgraph.graph import MessagesState
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, PutOp

from evaluators.targets.base import (
    FunctionSurface,
    Surface,
    SurfaceScan,
    Target,
    UncheckedSurface,
    copies_in,
)
from memkit.matching import matcher

__all__ = ["BACKENDS", "LangGraphTarget", "build", "checkpoint_surface", "store_api_surface", "store_items"]

BACKENDS = ("memory", "sqlite", "postgres")
"""Store + checkpointer pairs of :func:`build` (module doc)."""

NAMESPACE = "memories"


# --------------------------------------------------------------------------- surfaces


def store_items(store: BaseStore, prefix: tuple[str, ...] = (), page: int = 500) -> Iterator[Any]:
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


def store_api_surface(store: BaseStore) -> Surface:
    """``store_api``: copies in every namespace label, key and value field of every
    item, read through the ``BaseStore`` API."""

    def scan(secrets: Sequence[str]) -> SurfaceScan:
        out = SurfaceScan("store_api")
        for item in store_items(store):
            where = f"{'/'.join(item.namespace)}:{item.key}"
            for s in secrets:
                out.add(s, where, copies_in([list(item.namespace), item.key, item.value], s))
        return out

    return FunctionSurface("store_api", scan, "every namespace, key and value field through the BaseStore API")


def checkpoint_surface(saver: Any) -> Surface:
    """``checkpoint``: copies in every checkpoint (channel values, metadata) and
    pending write of every thread, read through the saver's ``list(None)``."""

    def scan(secrets: Sequence[str]) -> SurfaceScan:
        out = SurfaceScan("checkpoint")
        for tup in saver.list(None):
            cfg = (tup.config or {}).get("configurable", {})
            where = f"thread={cfg.get('thread_id')}:checkpoint={cfg.get('checkpoint_id')}"
            channels = (tup.checkpoint or {}).get("channel_values") or {}
            for s in secrets:
                for channel, value in channels.items():
                    out.add(s, f"{where}:{channel}", copies_in(value, s))
                out.add(s, f"{where}:<metadata>", copies_in(tup.metadata or {}, s))
                for task, channel, value in tup.pending_writes or ():
                    out.add(s, f"{where}:<pending {task}>:{channel}", copies_in(value, s))
        return out

    return FunctionSurface("checkpoint", scan, "every checkpoint and pending write of every thread (saver API)")


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    import numpy as np

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y / d) if d else 0.0


def vector_surface(
    store: BaseStore, read_vectors: Callable[[], list[tuple[tuple[str, ...], str, str, list[float]]]],
    embed: Embeddings, threshold: float = 0.99,
) -> Surface:
    """``store_vectors``: stored vectors that no longer encode their item's current
    text: the item is gone (an orphan vector) or the text at the vector's field
    changed without re-embedding (cosine to the re-embedded current text below
    ``threshold``, as :mod:`memkit.residue`'s ``stale_embedding``). A vector cannot be
    read back into text, so such vectors are not attributed to a secret: they are
    counted as ``unattributed`` copies of *some* old text.

    ``read_vectors`` returns ``(namespace, key, field, vector)`` of every stored vector.
    """

    def scan(secrets: Sequence[str]) -> SurfaceScan:
        out = SurfaceScan("store_vectors")
        for ns, key, fld, vec in read_vectors():
            item = store.get(ns, key)
            text = item.value.get(fld) if item is not None and isinstance(item.value, dict) else None
            if not isinstance(text, str):
                out.unattributed.append(f"{'/'.join(ns)}:{key}:{fld} (item gone)")
            elif _cosine(vec, embed.embed_query(text)) < threshold:
                out.unattributed.append(f"{'/'.join(ns)}:{key}:{fld} (text changed)")
        return out

    return FunctionSurface("store_vectors", scan, "stored vectors vs. their items' current text")


# --------------------------------------------------------------------------- the agent


class _WriterState(TypedDict):
    turns: list[dict[str, Any]]
    session_id: str
    date: str
    user_id: str


class _AgentState(MessagesState):
    memories: list[str]


def build_graphs(store: BaseStore, checkpointer: Any, model: Any = "extractive", k: int = 3) -> tuple[Any, Any]:
    """``(agent, writer)``: the recall-then-answer agent and the memory writer (module
    doc), both compiled with ``store`` and ``checkpointer``."""
    from graphs.memory import sequence_graph
    from graphs.prompts import respond_prompt
    from memkit.models import chat_model

    llm = chat_model(model) if isinstance(model, str) else model

    def recall(state: _AgentState, config: RunnableConfig, runtime: Runtime) -> dict[str, Any]:
        user = config["configurable"]["user_id"]
        query = str(state["messages"][-1].content)
        items = runtime.store.search((NAMESPACE, user), query=query, limit=k)
        return {"memories": [str(item.value.get("content", "")) for item in items]}

    def answer(state: _AgentState) -> dict[str, Any]:
        query = str(state["messages"][-1].content)
        return {"messages": [llm.invoke(respond_prompt(query, state["memories"]))]}


    def remember(state: _WriterState, runtime: Runtime) -> dict[str, Any]:
        ns = (NAMESPACE, state["user_id"])
        ops = [PutOp(ns, f"{state['session_id']}/{i}",
                     {"content": t["content"], "date": state["date"], "session_id": state["session_id"]})
               for i, t in enumerate(state["turns"]) if t.get("role") == "user" and str(t.get("content", "")).strip()]
        # One batch per run of distinct texts: langgraph 1.2's InMemoryStore raises
        # "Number of embeddings ... does not match" on two puts of one text in a batch.
        batch: list[PutOp] = []
        for op in ops:
            if any(o.value["content"] == op.value["content"] for o in batch):
                runtime.store.batch(batch)
                batch = []
            batch.append(op)
        if batch:
            runtime.store.batch(batch)
        return {}

    return (sequence_graph(_AgentState, [("recall", recall), ("answer", answer)], name="memory-agent",
                           store=store, checkpointer=checkpointer),
            sequence_graph(_WriterState, [("remember", remember)], name="memory-writer",
                           store=store, checkpointer=checkpointer))


class LangGraphTarget(Target):
    """A LangGraph agent over ``store`` + ``checkpointer`` (module doc).

    Args:
        store: any ``BaseStore`` (with an index on ``content`` for semantic recall).
        checkpointer: any ``BaseCheckpointSaver``.
        name: the label in reports.
        model: chat model spec or instance. k: memories recalled per question.
        surfaces: extra surfaces of the backend (SQL rows, files).
        steps: deletion steps beyond the API delete, by name, in order.
        closers: called by :meth:`close`, in order.
    """

    def __init__(self, store: BaseStore, checkpointer: Any, *, name: str = "langgraph", model: Any = "extractive",
                 k: int = 3, surfaces: Sequence[Surface] = (), steps: dict[str, Callable[[], Any]] | None = None,
                 closers: Sequence[Callable[[], Any]] = ()) -> None:
        self.name, self.store, self.checkpointer = name, store, checkpointer
        self.agent, self.writer = build_graphs(store, checkpointer, model, k)
        self._surfaces = [store_api_surface(store), *surfaces, checkpoint_surface(checkpointer)]
        self._steps = dict(steps or {})
        self._closers = list(closers)
        self.threads: dict[str, set[str]] = {}

    def feed(self, turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
        """Run the memory writer on the session, in the thread ``<user>:<session>``."""
        thread = f"{user_id}:{session_id}"
        self.threads.setdefault(user_id, set()).add(thread)
        self.writer.invoke({"turns": turns, "session_id": session_id, "date": date, "user_id": user_id},
                           config={"configurable": {"thread_id": thread, "user_id": user_id}})

    def ask(self, text: str, user_id: str, thread_id: str) -> str:
        """Invoke the agent in thread ``thread_id``; the last message's text."""
        self.threads.setdefault(user_id, set()).add(thread_id)
        out = self.agent.invoke({"messages": [{"role": "user", "content": text}]},
                                config={"configurable": {"thread_id": thread_id, "user_id": user_id}})
        return out["messages"][-1].text

    def forget_secret(self, secret: str, user_id: str) -> int:
        """``BaseStore.delete`` of every item of the user whose value holds ``secret``;
        returns how many."""
        m = matcher(secret)
        doomed = [(tuple(i.namespace), i.key) for i in store_items(self.store, (NAMESPACE, user_id))
                  if m.contains(i.value)]
        for ns, key in doomed:
            self.store.delete(ns, key)
        return len(doomed)

    def forget_user(self, user_id: str) -> int:
        """Delete every item of the user (``BaseStore.delete``) and their threads."""
        doomed = [(tuple(i.namespace), i.key) for i in store_items(self.store, (NAMESPACE, user_id))]
        for ns, key in doomed:
            self.store.delete(ns, key)
        self.delete_threads(user_id)
        return len(doomed)

    def delete_threads(self, user_id: str) -> int:
        """``delete_thread`` for every thread the target opened for the user."""
        threads = sorted(self.threads.get(user_id, ()))
        for t in threads:
            self.checkpointer.delete_thread(t)
        return len(threads)

    def surfaces(self) -> list[Surface]:
        """``store_api``, the backend's surfaces, ``checkpoint``."""
        return list(self._surfaces)

    def deletion_steps(self) -> dict[str, Callable[[], Any]]:
        """The backend's steps (module doc)."""
        return dict(self._steps)

    def close(self) -> None:
        """Close the backend's connections and remove temporary files (idempotent)."""
        while self._closers:
            self._closers.pop(0)()


# --------------------------------------------------------------------------- backends


def _index(embed: Embeddings, dims: int) -> dict[str, Any]:
    return {"dims": dims, "embed": embed, "fields": ["content"]}


def _default_embed(embed: Embeddings | None, dims: int | None) -> tuple[Embeddings, int]:
    if embed is not None:
        return embed, int(dims or len(embed.embed_query("dimension probe")))
    from memkit.models import embeddings

    return embeddings(), 384


def _memory(embed: Embeddings, dims: int, **kw: Any) -> LangGraphTarget:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore(index=_index(embed, dims))

    def vectors() -> list[tuple[tuple[str, ...], str, str, list[float]]]:
        # InMemoryStore keeps vectors in ``_vectors[namespace][key][path]`` (langgraph 1.x)
        out = []
        for ns, by_key in getattr(store, "_vectors", {}).items():
            for key, by_path in by_key.items():
                for path, vec in by_path.items():
                    out.append((tuple(ns), key, path, list(vec)))
        return out

    return LangGraphTarget(store, InMemorySaver(), name="langgraph[memory]",
                           surfaces=[vector_surface(store, vectors, embed)], **kw)


def _sqlite_surfaces(files: Sequence[Path]) -> list[Surface]:
    def rows(secrets: Sequence[str]) -> SurfaceScan:
        out = SurfaceScan("sqlite_rows")
        with tempfile.TemporaryDirectory(prefix="memkit-sqlite-") as tmp:
            for f in files:
                if not f.exists():
                    continue
                copy = Path(tmp) / f.name
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

    def disk(secrets: Sequence[str]) -> SurfaceScan:
        out = SurfaceScan("disk_sqlite")
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


def _sqlite(embed: Embeddings, dims: int, workdir: str | Path | None = None, **kw: Any) -> LangGraphTarget:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.store.sqlite import SqliteStore
    except ModuleNotFoundError as exc:
        raise ImportError("backend 'sqlite' needs langgraph-checkpoint-sqlite (pip install -e '.[dev]')") from exc
    closers: list[Callable[[], Any]] = []
    if workdir is None:
        tmp = tempfile.mkdtemp(prefix="memkit-langgraph-sqlite-")
        closers.append(lambda: shutil.rmtree(tmp, ignore_errors=True))
        root = Path(tmp)
    else:
        root = Path(workdir)
        root.mkdir(parents=True, exist_ok=True)
    store_db, saver_db = root / "store.sqlite", root / "checkpoints.sqlite"
    sconn = sqlite3.connect(store_db, check_same_thread=False, isolation_level=None)
    # SqliteStore's vector index needs the sqlite-vec extension, which a Python built
    # without loadable SQLite extensions cannot load: then the store runs unindexed
    # (search without semantic ranking) and store_vectors is n/a, saying why.
    can_load = hasattr(sconn, "enable_load_extension")
    store = SqliteStore(sconn, index=_index(embed, dims) if can_load else None)
    store.setup()
    cconn = sqlite3.connect(saver_db, check_same_thread=False)
    saver = SqliteSaver(cconn)
    saver.setup()
    closers[:0] = [sconn.close, cconn.close]

    def vacuum() -> None:
        sconn.execute("VACUUM")
        cconn.execute("VACUUM")

    def wal_checkpoint() -> None:
        for c in (sconn, cconn):
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def vectors() -> list[tuple[tuple[str, ...], str, str, list[float]]]:
        import struct

        out = []
        for prefix, key, fld, blob in sconn.execute("SELECT prefix, key, field_name, embedding FROM store_vectors"):
            out.append((tuple(prefix.split(".")), key, fld, list(struct.unpack(f"{len(blob) // 4}f", blob))))
        return out

    vec = vector_surface(store, vectors, embed) if can_load else UncheckedSurface(
        "store_vectors", "this Python's sqlite3 cannot load extensions (sqlite-vec), so SqliteStore runs "
        "without a vector index and keeps no vectors", status="n/a")
    return LangGraphTarget(store, saver, name="langgraph[sqlite]",
                           surfaces=[vec, *_sqlite_surfaces([store_db, saver_db])],
                           steps={"vacuum": vacuum, "wal_checkpoint": wal_checkpoint}, closers=closers, **kw)


def _postgres(embed: Embeddings, dims: int, pg_uri: str | None = None, pgdata: str | Path | None = None,
              **kw: Any) -> LangGraphTarget:
    if not pg_uri:
        raise ValueError("backend 'postgres' needs pg_uri (e.g. postgresql://user@host/db; --pg-uri)")
    try:
        try:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
            from langgraph.store.postgres import PostgresStore
        except ImportError as exc:
            raise ImportError(f"target 'langgraph' --backend postgres needs {exc.name} "
                              "(pip install -e '.[postgres]')") from exc
        from psycopg.rows import dict_row
    except ModuleNotFoundError as exc:
        raise ImportError("backend 'postgres' needs the postgres extra (pip install -e '.[postgres]')") from exc
    from memkit import surfaces_pg

    opts = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    sconn = psycopg.connect(pg_uri, **opts)
    cconn = psycopg.connect(pg_uri, **opts)
    audit_conn = psycopg.connect(pg_uri, autocommit=True)
    store = PostgresStore(sconn, index=_index(embed, dims))
    store.setup()
    saver = PostgresSaver(cconn)
    saver.setup()
    tables = [*surfaces_pg.STORE_TABLES, *surfaces_pg.SAVER_TABLES]

    def rows(secrets: Sequence[str]) -> SurfaceScan:
        got = surfaces_pg.scan_rows(audit_conn, tables, secrets)
        out = SurfaceScan("pg_rows")
        for s, locs in got.hits.items():
            for loc in locs:
                out.add(s, loc)
        return out

    cache: dict[tuple[str, ...], dict[str, surfaces_pg.PgScan]] = {}

    def disk(surface: str) -> Callable[[Sequence[str]], SurfaceScan]:
        def scan(secrets: Sequence[str]) -> SurfaceScan:
            # one pass over the data directory serves every disk surface of a phase
            key = tuple(secrets)
            if surface == surfaces_pg.DISK_SURFACES[0] or key not in cache:
                cache.clear()
                cache[key] = surfaces_pg.scan_disk(audit_conn, pgdata, tables, secrets)
            got = cache[key][surface]
            if not got.readable:
                return SurfaceScan(surface, "not_checked", reason=got.reason)
            out = SurfaceScan(surface, notes=list(got.notes), partial="; ".join(got.partial) or None)
            for s, locs in got.hits.items():
                for loc in locs:
                    out.add(s, loc)
            return out

        return scan

    def each(sql_text: str) -> Callable[[], None]:
        def run() -> None:
            for t in surfaces_pg.tables_present(audit_conn, tables):
                audit_conn.execute(f'{sql_text} "{t}"')

        return run

    def checkpoint_wal() -> None:
        audit_conn.execute("CHECKPOINT")
        audit_conn.execute("SELECT pg_switch_wal()")
        audit_conn.execute("CHECKPOINT")

    def vectors() -> list[tuple[tuple[str, ...], str, str, list[float]]]:
        cur = audit_conn.execute("SELECT prefix, key, field_name, embedding::text FROM store_vectors")
        return [(tuple(p.split(".")), k, f, [float(x) for x in e.strip("[]").split(",")]) for p, k, f, e in cur]

    surfaces = [vector_surface(store, vectors, embed), FunctionSurface("pg_rows", rows, "live rows (SQL)")]
    surfaces += [FunctionSurface(s, disk(s), "data directory bytes") for s in surfaces_pg.DISK_SURFACES]
    return LangGraphTarget(
        store, saver, name="langgraph[postgres]", surfaces=surfaces,
        steps={"vacuum": each("VACUUM"), "vacuum_full": each("VACUUM FULL"), "checkpoint_wal": checkpoint_wal},
        closers=[sconn.close, cconn.close, audit_conn.close], **kw)


def build(backend: str = "memory", *, pg_uri: str | None = None, pgdata: str | Path | None = None,
          workdir: str | Path | None = None, model: Any = "extractive", k: int = 3,
          embed: Embeddings | None = None, dims: int | None = None) -> LangGraphTarget:
    """The ``langgraph`` target on a backend (module doc).

    Args:
        backend: ``memory``, ``sqlite`` or ``postgres``.
        pg_uri: the PostgreSQL connection string (``postgres``; the store's and saver's
            tables are created there with ``setup()``).
        pgdata: the server's data directory, when it is on this machine (``postgres``:
            the ``disk_pg_*`` surfaces; without it they are "not checked").
        workdir: where the SQLite files live (``sqlite``; default a temporary directory
            removed by ``close``).
        model: chat model spec or instance (:func:`memkit.models.chat_model`).
        k: memories recalled per question.
        embed: LangChain embeddings for the store's index (default all-MiniLM-L6-v2,
            384 dimensions). dims: their dimension (default: measured).

    Returns:
        A :class:`LangGraphTarget`; close it (or use ``with``) when done.

    Raises:
        ValueError: unknown backend; ``postgres`` without ``pg_uri``.
        ImportError: the backend's packages are missing (the message names the extra).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown langgraph backend {backend!r}; use one of {BACKENDS}")
    embed, dims = _default_embed(embed, dims)
    kw: dict[str, Any] = {"model": model, "k": k}
    if backend == "memory":
        return _memory(embed, dims, **kw)
    if backend == "sqlite":
        return _sqlite(embed, dims, workdir=workdir, **kw)
    return _postgres(embed, dims, pg_uri=pg_uri, pgdata=pgdata, **kw)

