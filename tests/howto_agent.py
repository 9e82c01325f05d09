"""An agent written the way LangGraph's long-term-memory how-to writes one (not memkit's
example): a ``StateGraph`` over ``MessagesState`` whose one node reads the user's
memories from ``store.search(("memories", user_id))``, stores what the user said with
``store.put``, and answers; compiled with a real store and checkpointer.

The model is a STAND-IN for an LLM (``echo_model``: it answers with the memories most
like the question, memkit's extractive ``answer``), so the test measures the memory, not
a model's choices. ``build(backend=...)`` returns ``{"agent", "store", "checkpointer"}``
only, as a user's factory for ``memkit audit howto_agent:build`` would.
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

from memkit.models.extractive import answer


def index() -> dict[str, Any]:
    """The store's semantic index: the real all-MiniLM-L6-v2 (bundled, offline)."""
    from memkit.models.chat import embeddings

    return {"dims": 384, "embed": embeddings(), "fields": ["data"]}


def echo_model() -> Any:
    """A stand-in chat model: the system message's user info, the memories most like
    the last question (memkit's extractive answer)."""

    def reply(messages: list[Any]) -> AIMessage:
        info = messages[0]["content"].split("User info:", 1)[1].strip().splitlines()
        return AIMessage(answer(str(messages[-1].content), [m for m in info if m.strip()]))

    return RunnableLambda(reply)


def build_graph(model: Any, store: BaseStore, checkpointer: Any) -> Any:
    """The how-to's graph: search the user's memories, remember the message, answer."""

    def call_model(state: MessagesState, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
        user_id = config["configurable"]["user_id"]
        namespace = ("memories", user_id)
        memories = store.search(namespace, query=str(state["messages"][-1].content), limit=3)
        info = "\n".join(d.value["data"] for d in memories)
        system_msg = f"You are a helpful assistant talking to the user. User info: {info}"
        last = state["messages"][-1]
        statements = [x.strip() for x in re.findall(r"[^.!?]+[.!]", last.content)]  # what the user told, not asked
        if last.type == "human" and statements:
            store.put(namespace, str(uuid.uuid4()), {"data": " ".join(statements)})
        response = model.invoke([{"role": "system", "content": system_msg}, *state["messages"]])
        return {"messages": response}

    builder = StateGraph(MessagesState)
    builder.add_node("call_model", call_model)
    builder.add_edge(START, "call_model")
    return builder.compile(checkpointer=checkpointer, store=store)


def build(backend: str = "memory", pg_uri: str | None = None, workdir: str | None = None) -> dict[str, Any]:
    """The user's factory: ``{"agent", "store", "checkpointer"}`` on ``backend``
    (``memory``, ``sqlite`` in ``workdir``, ``postgres`` on ``pg_uri``)."""
    if backend == "memory":
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        store, saver = InMemoryStore(index=index()), InMemorySaver()
    elif backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.store.sqlite import SqliteStore

        root = Path(workdir or tempfile.mkdtemp(prefix="howto-"))
        root.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(root / "memory.sqlite", check_same_thread=False, isolation_level=None)
        store = SqliteStore(conn, index=index() if hasattr(conn, "enable_load_extension") else None)
        store.setup()
        saver = SqliteSaver(sqlite3.connect(root / "threads.sqlite", check_same_thread=False))
        saver.setup()
    else:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row

        opts = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        store = PostgresStore(psycopg.connect(pg_uri, **opts), index=index())
        store.setup()
        saver = PostgresSaver(psycopg.connect(pg_uri, **opts))
        saver.setup()
    return {"agent": build_graph(echo_model(), store, saver), "store": store, "checkpointer": saver}
