"""The swappable nodes of memkit's memory graphs and their default implementations.

A node is a plain callable; the graph builders in :mod:`graphs.memory` take one per
step (docs/design.md, "The pipeline"), so a user swaps a writer, summarizer, retriever or
responder without touching the rest:

* :data:`Writer` -- ``(namespace, session_id, date, turns) -> list[Chunk]`` (raw chunks);
* :data:`Summarizer` -- ``(raw_chunks, S, prior_texts | None) -> list[SummaryItem]``;
* :data:`Retriever` -- ``(query, k, tiers, namespace | None) -> list[Chunk]``, best first;
* :data:`Responder` -- ``(query, chunks) -> str``.

Factories: :func:`make_summarizer` and :func:`make_responder` take a model spec
(``"extractive"``, ``"llamacpp:gemma3-270m"``, ``"ollama:gemma3:12b"``, ...) or a
LangChain chat model and an optional :class:`memkit.store.cache.LLMCache`;
:func:`make_retriever` wraps a :class:`memkit.store.tiered.TieredMemoryStore`.

LLM calls: an LLM summarizer makes one call per session at S>=1 (none at S=0);
an LLM responder one call per query (and per k when the caller responds for
several k). The ``extractive`` spec calls :mod:`memkit.models.extractive` directly (no
prompt, no call); an :class:`~memkit.models.extractive.ExtractiveChatModel` *instance* goes
through the prompts like any LLM and gives the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from langchain_core.language_models import BaseChatModel

from graphs.prompts import (
    facts_prompt,
    parse_fact_lines,
    parse_summary,
    respond_prompt,
    summary_prompt,
)
from memkit.models.extractive import answer, central_sentence, key_facts
from memkit.store.tiered import Chunk, TieredMemoryStore, chunk_id

__all__ = [
    "SUMMARY_LEVELS",
    "ChatResponder",
    "ChatSummarizer",
    "ExtractiveResponder",
    "ExtractiveSummarizer",
    "Responder",
    "Retriever",
    "StoreRetriever",
    "Summarizer",
    "SummaryItem",
    "Turn",
    "Writer",
    "attribute_sources",
    "check_level",
    "make_responder",
    "make_retriever",
    "make_summarizer",
    "tiers_for",
    "user_turn_chunks",
]

SUMMARY_LEVELS = (0, 1, 2)
"""Summary levels S (docs/design.md, "Vocabulary"): 0 raw turns, 1 key facts, 2 one sentence."""

Turn = str | Mapping[str, Any] | Any
"""A turn: a LongMemEval dict ``{"role", "content", "has_answer"?}``, an object with those
attributes (:class:`memkit.dataset.longmemeval.Turn`) or a plain user text."""


class SummaryItem(NamedTuple):
    """One derived memory: its ``text`` and the raw chunk ids (``source_ids``) it came from."""

    text: str
    source_ids: list[str]


Writer = Callable[[str, str, str, Sequence[Turn]], list[Chunk]]
"""``(namespace, session_id, date, turns) -> raw chunks`` (not yet stored)."""

Summarizer = Callable[[list[Chunk], int, list[str] | None], list[SummaryItem]]
"""``(raw chunks of one session, S, prior summary texts or None) -> summary items``.

``prior`` is given for rolling re-summarization (forget mode ``raw_plus_resummarize``)."""

Retriever = Callable[[str, int, Sequence[str], str | None], list[Chunk]]
"""``(query, k, tiers, namespace) -> up to k chunks, best first``."""

Responder = Callable[[str, list[Chunk]], str]
"""``(query, retrieved chunks in retrieval order) -> response text``."""


def check_level(S: int) -> int:
    """Return ``S`` if it is a summary level (0, 1, 2); raise ``ValueError`` otherwise."""
    if S not in SUMMARY_LEVELS:
        raise ValueError(f"summary level S must be one of {SUMMARY_LEVELS}, got {S!r}")
    return int(S)


def tiers_for(S: int) -> tuple[str, ...]:
    """The tiers the design reads at level S: ``("raw",)`` for S=0, ``("summary",)`` for S>=1."""
    return ("raw",) if check_level(S) == 0 else ("summary",)


# --------------------------------------------------------------------------- writer


def user_turn_chunks(namespace: str, session_id: str, date: str, turns: Sequence[Turn]) -> list[Chunk]:
    """Default :data:`Writer`: one ``raw`` chunk per non-empty user turn.

    Args:
        namespace: user / instance id.
        session_id: the session's id.
        date: the session date as the data gives it.
        turns: the session's turns (dicts or objects with ``role``/``content``);
            turns with ``role != "user"`` are skipped; plain strings are user turns.

    Returns:
        Chunks with ``turn_index`` = the turn's position in ``turns`` (counting every
        role), id :func:`memkit.store.tiered.chunk_id` ``(namespace, session_id, "raw",
        turn_index, text)`` and ``extra["has_answer"]`` when the turn carries it.

    Raises:
        ValueError: a dict turn without a string ``content`` or ``role`` (the message
            names the session and turn index).
    """
    out: list[Chunk] = []
    for i, turn in enumerate(turns):
        extra: dict[str, str | int | float | bool] = {}
        if isinstance(turn, str):
            text = turn
        else:
            if isinstance(turn, Mapping):
                role, text, has_answer = turn.get("role"), turn.get("content"), turn.get("has_answer")
            elif hasattr(turn, "role") and hasattr(turn, "content"):
                role, text = turn.role, turn.content
                has_answer = getattr(turn, "has_answer", None)
            else:
                raise ValueError(
                    f"session {session_id!r} turn {i}: expected a dict, a turn object or a "
                    f"str, got {type(turn).__name__}"
                )
            if not isinstance(role, str) or not isinstance(text, str):
                raise ValueError(
                    f"session {session_id!r} turn {i}: needs string 'role' and 'content', "
                    f"got role={role!r}, content of type {type(text).__name__}"
                )
            if role != "user":
                continue
            if has_answer is not None:
                extra["has_answer"] = bool(has_answer)
        if not text.strip():
            continue
        out.append(
            Chunk(
                id=chunk_id(namespace, session_id, "raw", i, text),
                text=text,
                tier="raw",
                namespace=namespace,
                session_id=session_id,
                turn_index=i,
                date=date,
                extra=extra,
            )
        )
    return out


# --------------------------------------------------------------------------- summarizers


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def attribute_sources(
    facts: Sequence[str], chunks: Sequence[Chunk], *, embedder: Any | None = None
) -> list[list[str]]:
    """Attribute each fact to the raw chunks it came from (``source_ids`` of S=1 facts).

    A fact found verbatim in chunks (case and white space ignored) is attributed to
    all of them; otherwise to the one chunk with the highest cosine similarity
    between the fact and the chunk text (all-MiniLM-L6-v2, rounded to 6 decimals,
    ties to the earlier chunk). One batched embedding call for all unmatched facts.

    Args:
        facts: fact texts.
        chunks: the session's raw chunks.
        embedder: ``encode(list[str]) -> (n, d)`` unit vectors; default the shared MiniLM.

    Returns:
        One list of chunk ids per fact (empty when ``chunks`` is empty).
    """
    if not chunks:
        return [[] for _ in facts]
    normed = [_norm(c.text) for c in chunks]
    out: list[list[str]] = []
    unmatched: list[int] = []
    for i, fact in enumerate(facts):
        hits = [c.id for c, t in zip(chunks, normed, strict=True) if _norm(fact) in t]
        out.append(hits)
        if not hits:
            unmatched.append(i)
    if unmatched:
        if embedder is None:
            from memkit.models.chat import embeddings

            embedder = embeddings()
        vecs = np.asarray(embedder.encode([facts[i] for i in unmatched] + [c.text for c in chunks]))
        fvecs, cvecs = vecs[: len(unmatched)], vecs[len(unmatched):]
        best = np.argmax(np.round(fvecs @ cvecs.T, 6), axis=1)
        for i, b in zip(unmatched, best, strict=True):
            out[i] = [chunks[int(b)].id]
    return out


class ExtractiveSummarizer:
    """Default :data:`Summarizer` of the ``extractive`` backend (no model call).

    S=1: :func:`memkit.models.extractive.key_facts` (prior facts carried, then the user's
    self-disclosing sentences), parsed with :func:`graphs.prompts.parse_fact_lines`
    exactly as an LLM output would be, ``source_ids`` by :func:`attribute_sources`.
    S=2: :func:`memkit.models.extractive.central_sentence`, ``source_ids`` = every raw id of
    the session (the choice depends on all of its sentences).
    """

    def __init__(self, *, min_words: int = 4, embedder: Any | None = None) -> None:
        self.min_words = min_words
        self.embedder = embedder

    def __call__(self, chunks: list[Chunk], S: int, prior: list[str] | None = None) -> list[SummaryItem]:
        """Summarize one session's raw chunks at level S (see the class docstring)."""
        if check_level(S) == 0 or not (chunks or prior):
            return []
        texts = [c.text for c in chunks]
        if S == 1:
            facts = parse_fact_lines("\n".join(key_facts(texts, prior or None, min_words=self.min_words)))
            return [SummaryItem(f, s) for f, s in zip(facts, attribute_sources(facts, chunks, embedder=self.embedder), strict=True)]
        sentence = parse_summary(central_sentence(texts, prior or None, embedder=self.embedder) or "")
        return [SummaryItem(sentence, [c.id for c in chunks])] if sentence else []


class ChatSummarizer:
    """:data:`Summarizer` that prompts a chat model (graphs/prompts.py).

    S=1: :data:`graphs.prompts.FACTS_PROMPT` (or ``FACTS_UPDATE_PROMPT`` with a prior),
    output parsed by :func:`graphs.prompts.parse_fact_lines`, each fact attributed to
    raw chunks by :func:`attribute_sources` (verbatim containment, else nearest by
    embedding). S=2: ``SUMMARY_PROMPT`` (or ``SUMMARY_UPDATE_PROMPT``), first sentence
    line by :func:`graphs.prompts.parse_summary`, ``source_ids`` = every raw id of the
    session (an abstractive sentence depends on all of them).

    One model call per session at S>=1; :attr:`calls` counts them.
    """

    def __init__(self, model: BaseChatModel, *, embedder: Any | None = None) -> None:
        self.model = model
        self.embedder = embedder
        self.calls = 0

    def __call__(self, chunks: list[Chunk], S: int, prior: list[str] | None = None) -> list[SummaryItem]:
        """Summarize one session's raw chunks at level S (see the class docstring)."""
        if check_level(S) == 0 or not (chunks or prior):
            return []
        texts = [c.text for c in chunks]
        prompt = facts_prompt(texts, prior or None) if S == 1 else summary_prompt(texts, prior or None)
        self.calls += 1
        output = self.model.invoke(prompt).text
        if S == 1:
            facts = parse_fact_lines(output)
            return [SummaryItem(f, s) for f, s in zip(facts, attribute_sources(facts, chunks, embedder=self.embedder), strict=True)]
        sentence = parse_summary(output)
        return [SummaryItem(sentence, [c.id for c in chunks])] if sentence else []


# --------------------------------------------------------------------------- responders


class ExtractiveResponder:
    """Default :data:`Responder` of the ``extractive`` backend: :func:`memkit.models.extractive.answer`
    over the chunk texts (the ``n`` sentences most similar to the query; no model call)."""

    def __init__(self, *, n: int = 2, embedder: Any | None = None) -> None:
        self.n = n
        self.embedder = embedder

    def __call__(self, query: str, chunks: list[Chunk]) -> str:
        """Answer ``query`` from the retrieved ``chunks``."""
        return answer(query, [c.text for c in chunks], n=self.n, embedder=self.embedder)


class ChatResponder:
    """:data:`Responder` that prompts a chat model with :data:`graphs.prompts.RESPOND_PROMPT`
    (memories prepended to the question, in retrieval order). One call per query;
    :attr:`calls` counts them. Returns the reply text, stripped."""

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model
        self.calls = 0

    def __call__(self, query: str, chunks: list[Chunk]) -> str:
        """Answer ``query`` with the retrieved ``chunks`` as context."""
        self.calls += 1
        return self.model.invoke(respond_prompt(query, [c.text for c in chunks])).text.strip()

    def many(
        self, items: Sequence[tuple[str, list[Chunk]]], *, concurrency: int = 1, rps: float | None = None
    ) -> list[tuple[str, float]]:
        """Answer many ``(query, chunks)`` pairs with up to ``concurrency`` calls in flight
        (:func:`memkit.models.chat.answer_many`: retries with backoff, optional ``rps`` cap,
        identical prompts sent once).

        Returns:
            ``[(reply text, seconds), ...]`` in the order of ``items`` (the same texts
            as calling this responder on each pair in turn).
        """
        from memkit.models.chat import answer_many

        prompts = [respond_prompt(q, [c.text for c in chunks]) for q, chunks in items]
        replies = answer_many(self.model, prompts, concurrency=concurrency, rps=rps)
        self.calls += sum(1 for _, dt in replies if dt > 0)
        return [(message.text.strip(), dt) for message, dt in replies]


# --------------------------------------------------------------------------- retriever


class StoreRetriever:
    """Default :data:`Retriever`: top-k by cosine similarity from a
    :class:`~memkit.store.tiered.TieredMemoryStore` (``store.search``)."""

    def __init__(self, store: TieredMemoryStore) -> None:
        self.store = store

    def __call__(self, query: str, k: int, tiers: Sequence[str], namespace: str | None = None) -> list[Chunk]:
        """Up to ``k`` chunks of ``tiers`` (in ``namespace``), best first."""
        if k < 1:
            raise ValueError(f"retrieve: k must be >= 1, got {k}")
        return self.store.search(query, k, tiers=tuple(tiers), namespace=namespace)

    def many(self, queries: Sequence[str], k: int, tiers: Sequence[str],
             namespace: str | None = None) -> list[list[Chunk]]:
        """:meth:`__call__` for many queries at once: one embedding batch and one
        scoring pass (``store.search_many``); the same rankings as calling this
        retriever on each query in turn (a subclass that overrides ``__call__`` is
        called once per query).

        Returns:
            One list of up to ``k`` chunks per query, best first, in query order.

        Raises:
            ValueError: ``k < 1``.
        """
        if k < 1:
            raise ValueError(f"retrieve: k must be >= 1, got {k}")
        if type(self).__call__ is not StoreRetriever.__call__:
            # A subclass that retrieves its own way is asked once per query.
            return [list(self(q, k, tiers, namespace)) for q in queries]
        return self.store.search_many(list(queries), k, tiers=tuple(tiers), namespace=namespace)


# --------------------------------------------------------------------------- factories


def _as_model(model_or_spec: str | BaseChatModel, cache: Any | None, model_kw: dict[str, Any]) -> BaseChatModel:
    if isinstance(model_or_spec, str):
        from memkit.models.chat import chat_model

        if cache is not None:
            model_kw = {**model_kw, "cache": cache}
        return chat_model(model_or_spec, **model_kw)
    if not isinstance(model_or_spec, BaseChatModel):
        raise TypeError(
            f"expected a model spec string or a LangChain BaseChatModel, got {type(model_or_spec).__name__}"
        )
    if model_kw:
        raise TypeError(f"model keyword arguments {sorted(model_kw)} need a spec string, not a model object")
    return model_or_spec if cache is None else model_or_spec.model_copy(update={"cache": cache})


def make_summarizer(
    model_or_spec: str | BaseChatModel = "extractive", *, cache: Any | None = None, **model_kw: Any
) -> Summarizer:
    """A :data:`Summarizer` for a model.

    Args:
        model_or_spec: ``"extractive"`` (-> :class:`ExtractiveSummarizer`, no model
            call, ``cache`` unused), any other spec of :func:`memkit.models.chat.chat_model`,
            or a chat model object (-> :class:`ChatSummarizer`).
        cache: an :class:`memkit.store.cache.LLMCache` (any LangChain ``BaseCache``) set as the
            model's own cache, so a repeated prompt is never sent twice.
        **model_kw: passed to :func:`memkit.models.chat.chat_model` (spec strings only).

    Raises:
        memkit.models.chat.ModelSpecError: the spec cannot be loaded.
        TypeError: neither a string nor a chat model, or ``model_kw`` with a model object.
    """
    if model_or_spec == "extractive":
        return ExtractiveSummarizer(**{k: v for k, v in model_kw.items() if k == "min_words"})
    return ChatSummarizer(_as_model(model_or_spec, cache, model_kw))


def make_responder(
    model_or_spec: str | BaseChatModel = "extractive", *, cache: Any | None = None, **model_kw: Any
) -> Responder:
    """A :data:`Responder` for a model (arguments as in :func:`make_summarizer`).

    ``"extractive"`` -> :class:`ExtractiveResponder` (``n_sentences`` keyword honoured);
    otherwise :class:`ChatResponder`.
    """
    if model_or_spec == "extractive":
        return ExtractiveResponder(n=int(model_kw.get("n_sentences", 2)))
    return ChatResponder(_as_model(model_or_spec, cache, model_kw))


def make_retriever(store: TieredMemoryStore) -> Retriever:
    """The default :data:`Retriever` over ``store`` (:class:`StoreRetriever`)."""
    return StoreRetriever(store)
