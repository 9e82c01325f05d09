"""A design's read path with the sweep's retrieval and response memos."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from evaluators.sweep.config import SweepConfig
from graphs.designs import MemoryDesign
from memkit.store.tiered import Chunk, TieredMemoryStore

# --------------------------------------------------------------------------- one unit


_MODELS: dict[tuple[str, str], Any] = {}


def shared_model(spec: str, config: SweepConfig) -> Any:
    """One chat model per (spec, options) per process, shared by the summarizer,
    the responder and every unit (llama.cpp weights load once); ``extractive`` stays
    a spec string so the graphs call the model-free functions directly."""
    if spec == "extractive":
        return spec
    kw = config.model_kwargs()
    key = (spec, json.dumps(kw, sort_keys=True))
    if key not in _MODELS:
        from memkit.models.chat import chat_model

        _MODELS[key] = chat_model(spec, **kw)
    return _MODELS[key]


class Responses:
    """Responds for a query and a retrieved prefix, reusing the response of an
    identical context (same query, chunk ids and texts: fewer chunks stored than k
    gives identical prefixes; a redacted chunk keeps its id but not its text).

    :meth:`many` answers a list of contexts at once: a responder with a ``many``
    method (:class:`graphs.nodes.ChatResponder`) gets up to ``concurrency`` calls in
    flight (and the ``rps`` cap); results and latencies are assigned as if the
    contexts were answered one after another."""

    def __init__(self, responder: Callable[[str, list[Chunk]], str], *, concurrency: int = 1,
                 rps: float | None = None) -> None:
        self.responder = responder
        self.concurrency = concurrency
        self.rps = rps
        self.memo: dict[tuple[str, tuple[str, ...]], str] = {}

    def many(self, items: Sequence[tuple[str, list[Chunk]]]) -> list[tuple[str, float]]:
        """``[(response, latency_s), ...]`` for ``(query, chunks)`` pairs, in order."""
        keys = [(q, tuple((c.id, c.text) for c in chunks)) for q, chunks in items]
        first: dict[tuple[str, tuple[str, ...]], int] = {}
        for i, key in enumerate(keys):
            if key not in self.memo:
                first.setdefault(key, i)
        fresh: dict[int, float] = {}
        todo = list(first.values())
        many = getattr(self.responder, "many", None)
        if todo and many is not None:
            answers = many([items[i] for i in todo], concurrency=self.concurrency, rps=self.rps)
            for i, (text, dt) in zip(todo, answers, strict=True):
                self.memo[keys[i]] = text
                fresh[i] = dt
        else:
            for i in todo:
                t0 = time.perf_counter()
                self.memo[keys[i]] = self.responder(*items[i])
                fresh[i] = time.perf_counter() - t0
        return [(self.memo[key], fresh.get(i, 0.0)) for i, key in enumerate(keys)]

    def __call__(self, query: str, chunks: list[Chunk]) -> tuple[str, float]:
        key = (query, tuple((c.id, c.text) for c in chunks))
        if key in self.memo:
            return self.memo[key], 0.0
        t0 = time.perf_counter()
        text = self.responder(query, chunks)
        dt = time.perf_counter() - t0
        self.memo[key] = text
        return text, dt

    def text(self, query: str, chunks: list[Chunk]) -> str:
        """As a :data:`graphs.nodes.Responder` (the read graph's respond node); the
        latency of the call is left in :attr:`last_latency`."""
        text, self.last_latency = self(query, list(chunks))
        return text


class Retrievals:
    """The design's retriever over one store state, called once per (query, tiers,
    namespace) at the largest k when the design's rankings are prefixes
    (``prefix_retrieval``), else once per k; the read graph gets the k-prefix.

    A retriever with a ``many(queries, k, tiers, namespace)`` method (the default
    cosine top-k :class:`graphs.nodes.StoreRetriever`) answers a phase's queries in
    one batch: :meth:`prime` calls it once."""

    def __init__(self, retriever: Callable[..., list[Chunk]], kmax: int, prefix: bool) -> None:
        self.retriever = retriever
        self.kmax = kmax
        self.prefix = prefix
        self.memo: dict[tuple[str, tuple[str, ...], str | None, int | None], list[Chunk]] = {}

    def prime(self, queries: Sequence[str], tiers: Sequence[str], namespace: str | None) -> None:
        many = getattr(self.retriever, "many", None)
        if not self.prefix or many is None:
            return
        tiers = tuple(tiers)
        todo = [q for q in dict.fromkeys(queries) if (q, tiers, namespace, None) not in self.memo]
        if todo:
            ranked = many(todo, self.kmax, tiers, namespace)
            for q, chunks in zip(todo, ranked, strict=True):
                self.memo[(q, tiers, namespace, None)] = chunks

    def __call__(self, query: str, k: int, tiers: Sequence[str], namespace: str | None = None) -> list[Chunk]:
        key = (query, tuple(tiers), namespace, None if self.prefix else k)
        if key not in self.memo:
            self.memo[key] = list(self.retriever(query, self.kmax if self.prefix else k, tuple(tiers), namespace))
        return self.memo[key][:k]


class ReadPath:
    """A design's compiled read graph over one store state, with the sweep's
    retrieval memo (:class:`Retrievals`) and response memo (:class:`Responses`) as
    its nodes' wrappers."""

    def __init__(self, design: MemoryDesign, store: TieredMemoryStore, respond: Responses, kmax: int) -> None:
        self.retrievals = Retrievals(design.retriever(store), kmax, design.prefix_retrieval)
        self.respond = respond
        self.graph = design.read_graph(store, retriever=self.retrievals, responder=respond.text)
        self.answered: dict[tuple[Any, ...], str] = {}

    def prefetch(self, queries: Sequence[str], ks: Sequence[int], tiers: Sequence[str],
                 namespace: str) -> dict[tuple[str, int], float]:
        """Answer every (query, k-prefix) context whose ranking is known, concurrently,
        into the response memo (only with a responder that has ``many`` and more
        than one call in flight; otherwise nothing). Returns ``{(query, k):
        latency_s}`` of the calls made (0 for a context answered earlier)."""
        if self.respond.concurrency <= 1 or not hasattr(self.respond.responder, "many"):
            return {}
        pairs, keys = [], []
        for q in queries:
            ranking = self.retrievals.memo.get((q, tuple(tiers), namespace, None)) if self.retrievals.prefix else None
            if ranking is None:
                continue
            for k in ks:
                pairs.append((q, ranking[:k]))
                keys.append((q, k))
        if not pairs:
            return {}
        return {key: dt for key, (_, dt) in zip(keys, self.respond.many(pairs), strict=True)}

    def read(self, query: str, k: int, tiers: Sequence[str], namespace: str) -> tuple[list[Chunk], str, float]:
        """``(chunks, response, latency_s)`` of one pass through the read graph.

        When the design's rankings are prefixes and this query's ranking is known, a
        k whose prefix equals one already answered (the scope holds fewer chunks than
        k) is not run again: the graph would return that very prefix and the
        memoized response (latency 0)."""
        ranking = self.retrievals.memo.get((query, tuple(tiers), namespace, None)) if self.retrievals.prefix else None
        if ranking is not None:
            key = (query, tuple(tiers), namespace, tuple((c.id, c.text) for c in ranking[:k]))
            if key in self.answered:
                return ranking[:k], self.answered[key], 0.0
        state = self.graph.invoke({"query": query, "namespace": namespace, "k": k, "tiers": list(tiers)})
        if ranking is not None:
            self.answered[key] = state["response"]
        return state["chunks"], state["response"], self.respond.last_latency
