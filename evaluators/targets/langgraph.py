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
  (memkit's model-free ``extractive`` model by default, :func:`memkit.models.chat.chat_model`).

Backends (``build(backend=...)``), each with real LangGraph classes:

============ ============================================= ===========================
backend      store + checkpointer                          extra surfaces
============ ============================================= ===========================
``memory``   ``InMemoryStore`` + ``InMemorySaver``         (API only)
``sqlite``   ``SqliteStore`` + ``SqliteSaver`` (files in   ``sqlite_rows``,
             ``workdir``; langgraph-checkpoint-sqlite)     ``disk_sqlite``
``postgres`` ``PostgresStore`` (pgvector index) +          ``pg_rows``, ``disk_pg_*``
             ``PostgresSaver`` (``pg_uri``; the            (:mod:`memkit.postgres.surfaces`;
             ``postgres`` extra)                           with ``pgdata``)
============ ============================================= ===========================

The target is the one adapter over an agent and its memory objects
(:class:`evaluators.targets.agent.AgentTarget`): the surfaces and deletion steps are
those :func:`evaluators.targets.stores.attach` finds on the store and saver, exactly
as for a user's own graph (``store_api``, ``store_vectors``, ``checkpoint``; SQL rows
and files per backend). Forget: ``BaseStore.delete`` of every item of the user whose
value holds the secret (scope ``secret``) or of every item of the user and their
threads (scope ``user``). With ``pg_uri`` of a database memkit did not create, the
tables live in a schema of memkit's own (``memkit_<hex>``), dropped on close, so no
synthetic user is left behind.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig
from langgraph.graph import MessagesState
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, PutOp

from evaluators.targets.agent import AgentTarget

__all__ = ["BACKENDS", "NAMESPACE", "build", "build_graphs", "default_embed", "open_backend"]

BACKENDS = ("memory", "sqlite", "postgres")
"""Store + checkpointer pairs of :func:`build` (module doc)."""

NAMESPACE = "memories"


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
    from memkit.models.chat import chat_model

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


def _writer_feed(writer: Any) -> Callable[..., None]:
    """The writer graph as a feed: one thread ``<user>:<session>`` per session."""

    def feed(turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
        writer.invoke({"turns": turns, "session_id": session_id, "date": date, "user_id": user_id},
                      config={"configurable": {"thread_id": f"{user_id}:{session_id}", "user_id": user_id}})

    return feed


def _index(embed: Embeddings, dims: int) -> dict[str, Any]:
    return {"dims": dims, "embed": embed, "fields": ["content"]}


def default_embed(embed: Embeddings | None, dims: int | None) -> tuple[Embeddings, int]:
    """``(embed, dims)``: the given embeddings and their dimension, else memkit's
    all-MiniLM-L6-v2 (384)."""
    if embed is not None:
        return embed, int(dims or len(embed.embed_query("dimension probe")))
    from memkit.models.chat import embeddings

    return embeddings(), 384


def open_backend(backend: str, embed: Embeddings, dims: int, pg_uri: str | None,
             workdir: str | Path | None) -> tuple[Any, Any, list[Callable[[], Any]]]:
    """``(store, checkpointer, closers)`` of a backend (module doc); call the closers
    when done."""
    if backend == "memory":
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        return InMemoryStore(index=_index(embed, dims)), InMemorySaver(), []
    if backend == "sqlite":
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
        sconn = sqlite3.connect(root / "store.sqlite", check_same_thread=False, isolation_level=None)
        # SqliteStore's vector index needs the sqlite-vec extension, which a Python built
        # without loadable SQLite extensions cannot load: then the store runs unindexed
        # (search without semantic ranking) and store_vectors is n/a, saying why.
        store = SqliteStore(sconn, index=_index(embed, dims) if hasattr(sconn, "enable_load_extension") else None)
        store.setup()
        cconn = sqlite3.connect(root / "checkpoints.sqlite", check_same_thread=False)
        saver = SqliteSaver(cconn)
        saver.setup()
        return store, saver, [sconn.close, cconn.close, *closers]
    return _postgres(embed, dims, pg_uri)


def _postgres(embed: Embeddings, dims: int, pg_uri: str | None) -> tuple[Any, Any, list[Callable[[], Any]]]:
    """``PostgresStore`` + ``PostgresSaver`` in a schema of memkit's own on ``pg_uri``'s
    database (dropped on close: the audit's synthetic users never stay there)."""
    if not pg_uri:
        raise ValueError("backend 'postgres' needs pg_uri (e.g. postgresql://user@host/db; --pg-uri)")
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
        from psycopg.rows import dict_row
    except ImportError as exc:
        raise ImportError(f"target 'langgraph' --backend postgres needs {exc.name} "
                          "(pip install -e '.[postgres]')") from exc
    schema = f"memkit_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_uri, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    params = conninfo_to_dict(pg_uri)
    options = " ".join(x for x in (params.get("options"), f"-csearch_path={schema},public") if x)
    uri = make_conninfo(**{**params, "options": options})
    opts = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    conns: list[Any] = []

    def drop() -> None:
        for c in conns:
            c.close()
        with psycopg.connect(pg_uri, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    try:
        conns += [psycopg.connect(uri, **opts), psycopg.connect(uri, **opts)]
        store = PostgresStore(conns[0], index=_index(embed, dims))
        store.setup()
        saver = PostgresSaver(conns[1])
        saver.setup()
    except BaseException:
        drop()
        raise
    return store, saver, [drop]


def build(backend: str = "memory", *, pg_uri: str | None = None, pgdata: str | Path | None = None,
          workdir: str | Path | None = None, model: Any = "extractive", k: int = 3,
          embed: Embeddings | None = None, dims: int | None = None) -> AgentTarget:
    """The ``langgraph`` target on a backend (module doc).

    Args:
        backend: ``memory``, ``sqlite`` or ``postgres``.
        pg_uri: the PostgreSQL connection string (``postgres``: the tables are created
            in a schema of memkit's own there, dropped on close).
        pgdata: the server's data directory, when the server cannot say it (the
            ``disk_pg_*`` surfaces; without a readable one they are "not checked").
        workdir: where the SQLite files live (``sqlite``; default a temporary directory
            removed by ``close``).
        model: chat model spec or instance (:func:`memkit.models.chat.chat_model`).
        k: memories recalled per question.
        embed: LangChain embeddings for the store's index (default all-MiniLM-L6-v2,
            384 dimensions). dims: their dimension (default: measured).

    Returns:
        An :class:`~evaluators.targets.agent.AgentTarget`; close it (or use ``with``).

    Raises:
        ValueError: unknown backend; ``postgres`` without ``pg_uri``.
        ImportError: the backend's packages are missing (the message names the extra).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown langgraph backend {backend!r}; use one of {BACKENDS}")
    embed, dims = default_embed(embed, dims)
    store, saver, closers = open_backend(backend, embed, dims, pg_uri, workdir)
    try:
        agent, writer = build_graphs(store, saver, model, k)
        target = AgentTarget(agent, feed=_writer_feed(writer), store=store, checkpointer=saver, pgdata=pgdata,
                             name=f"langgraph[{backend}]", namespace_for=lambda u: (NAMESPACE, u), cleanup=False)
    except BaseException:
        for c in closers:
            c()
        raise
    target.attached.closers += closers
    return target
