"""The graphs ``langgraph.json`` serves (``langgraph dev``, LangGraph Platform).

``memory_write``, ``memory_read`` and ``forget`` are built over one persistent store
(``$MEMKIT_STORE_DIR``, default ``<memkit cache dir>/store``) and one LLM cache, with
the model ``$MEMKIT_MODEL`` (default ``extractive``). The factories are asynchronous
and build their graph in a worker thread, so a server's event loop never blocks on
opening the store.
"""

from __future__ import annotations

import asyncio
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from graphs.forget import build_forget_graph
from graphs.memory import build_read_graph, build_write_graph
from graphs.nodes import make_responder, make_summarizer
from memkit.store.tiered import TieredMemoryStore

__all__ = [
    "default_cache",
    "default_forget_graph",
    "default_read_graph",
    "default_store",
    "default_store_dir",
    "default_write_graph",
    "forget_graph",
    "read_graph",
    "write_graph",
]



def default_store_dir() -> Path:
    """``$MEMKIT_STORE_DIR`` or ``<memkit cache dir>/store`` (not created here)."""
    env = os.environ.get("MEMKIT_STORE_DIR")
    if env:
        return Path(env)
    from memkit.models.chat import cache_dir

    return cache_dir() / "store"


@lru_cache(maxsize=1)
def default_store() -> TieredMemoryStore:
    """The persistent store the ``langgraph.json`` graphs share (created on first call).

    :meth:`~memkit.store.tiered.TieredMemoryStore.open` keeps one object per directory per
    process, so graph files loaded twice by path (as LangGraph servers do) still share
    one store, one chroma client, and a forget can compact it."""
    return TieredMemoryStore.open(default_store_dir())


@lru_cache(maxsize=1)
def default_cache() -> Any:
    """The :class:`memkit.store.cache.LLMCache` the ``langgraph.json`` graphs share:
    ``$MEMKIT_LLM_CACHE`` or ``<store dir>/../llm_cache.sqlite`` (created on first call)."""
    from memkit.store.cache import LLMCache

    env = os.environ.get("MEMKIT_LLM_CACHE")
    return LLMCache(Path(env) if env else default_store_dir().parent / "llm_cache.sqlite")


def _default_model() -> str:
    return os.environ.get("MEMKIT_MODEL", "extractive")


@lru_cache(maxsize=1)
def default_write_graph() -> Any:
    """:func:`build_write_graph` over :func:`default_store`, summarizer of ``$MEMKIT_MODEL``
    (default ``extractive``) with :func:`default_cache`; built once per process."""
    return build_write_graph(default_store(), summarizer=make_summarizer(_default_model(), cache=default_cache()))


@lru_cache(maxsize=1)
def default_read_graph() -> Any:
    """:func:`build_read_graph` over :func:`default_store`, responder of ``$MEMKIT_MODEL``
    (default ``extractive``) with :func:`default_cache`; built once per process."""
    return build_read_graph(default_store(), responder=make_responder(_default_model(), cache=default_cache()))


async def write_graph() -> Any:
    """``langgraph.json`` factory for :func:`default_write_graph`.

    Asynchronous because LangGraph servers (``langgraph dev``, LangGraph Platform) call
    graph factories on their event loop, where opening the store (``mkdir``, SQLite,
    chroma) would block it; ``langgraph dev`` refuses such calls. The graph is built in
    a worker thread. Synchronous code calls :func:`default_write_graph` instead."""
    return await asyncio.to_thread(default_write_graph)


async def read_graph() -> Any:
    """``langgraph.json`` factory for :func:`default_read_graph` (asynchronous, built in
    a worker thread; see :func:`write_graph`)."""
    return await asyncio.to_thread(default_read_graph)


@lru_cache(maxsize=1)
def default_forget_graph() -> Any:
    """:func:`build_forget_graph` over the default store and LLM cache of
    :mod:`graphs.server`, summarizer of ``$MEMKIT_MODEL`` (default extractive); built once
    per process."""
    cache = default_cache()
    return build_forget_graph(
        default_store(), summarizer=make_summarizer(_default_model(), cache=cache), caches=[cache]
    )


async def forget_graph() -> Any:
    """``langgraph.json`` factory for :func:`default_forget_graph` (asynchronous, built in
    a worker thread; see :func:`write_graph`)."""
    return await asyncio.to_thread(default_forget_graph)
