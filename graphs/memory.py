"""memkit's memory pipeline as LangGraph graphs: write -> summarize, retrieve -> respond.

docs/design.md, "The pipeline" (after arXiv 2606.10062, Setup):

* **write path**, once per session: ``write`` stores each user turn as a ``raw``
  chunk (metadata: namespace, session_id, turn_index, date), then ``summarize``
  derives ``summary`` chunks at level S -- S=0 nothing, S=1 one chunk per key
  personal fact, S=2 one chunk with one sentence for the session. Every summary
  chunk carries ``source_ids``: for S=1 the raw ids of the turns the fact came from
  (:func:`graphs.nodes.attribute_sources`), for S=2 all raw ids of the session (the
  sentence is written -- or, extractively, chosen -- from the whole session).
* **read path**, once per query: ``retrieve`` takes the top-k chunks by cosine
  similarity from the tiers the design reads (S=0 -> ``raw``, S>=1 -> ``summary``;
  overridable per call with ``tiers``), then ``respond`` prepends them to the
  responder's context and answers.

The nodes are callables passed to the builders (types in :mod:`graphs.nodes`), so a
user swaps them. The same steps exist as plain functions without graph overhead
(:func:`write_session`, :func:`retrieve`, :func:`respond`); the sweep retrieves once
at the largest k and responds for each k-prefix (``store.search`` results for k are a
prefix of those for a larger k).

Model calls: a write makes 0 LLM calls at S=0 and 1 per session at S>=1 (none with
the ``extractive`` spec); a read makes 1 responder call (0 with ``extractive``) and
one batched embedding of the query.

The graphs ``langgraph.json`` serves are built over these builders in
:mod:`graphs.server`. Importing this module
creates no file and loads no model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from graphs.nodes import (
    Responder,
    Retriever,
    Summarizer,
    SummaryItem,
    Turn,
    Writer,
    check_level,
    make_responder,
    make_retriever,
    make_summarizer,
    tiers_for,
    user_turn_chunks,
)
from memkit.store.tiered import TIERS, Chunk, TieredMemoryStore, chunk_id

__all__ = [
    "ReadState",
    "SessionInput",
    "SessionOutput",
    "WriteState",
    "build_read_graph",
    "build_write_graph",
    "sequence_graph",
    "make_responder",
    "make_retriever",
    "make_summarizer",
    "respond",
    "retrieve",
    "summarize_session",
    "summary_chunks",
    "write_session",
    "write_sessions",
]


# --------------------------------------------------------------------------- plain functions


def summary_chunks(
    items: Sequence[SummaryItem],
    *,
    namespace: str,
    session_id: str,
    date: str,
    S: int,
    raw_ids: Sequence[str],
) -> list[Chunk]:
    """Turn a summarizer's items into ``summary`` chunks of one session.

    Ids are :func:`memkit.store.tiered.chunk_id` ``(namespace, session_id, "summary", i, text)``;
    ``turn_index`` is -1; ``extra["S"]`` records the level and ``extra["index"]`` the
    item's position in the summarizer's output (the order a rolling re-summarization
    gives the prior summary back).

    Raises:
        ValueError: an item with empty text, or a source id that is not one of the
            session's ``raw_ids`` (the message names the item).
    """
    allowed = set(raw_ids)
    out: list[Chunk] = []
    for i, item in enumerate(items):
        text, sources = item[0], list(item[1])
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"summary item {i} of session {session_id!r} has empty text")
        stray = [s for s in sources if s not in allowed]
        if stray:
            raise ValueError(
                f"summary item {i} of session {session_id!r} cites source ids {stray} "
                "that are not raw chunks of the session"
            )
        out.append(
            Chunk(
                id=chunk_id(namespace, session_id, "summary", i, text),
                text=text,
                tier="summary",
                namespace=namespace,
                session_id=session_id,
                turn_index=-1,
                date=date,
                source_ids=sources,
                extra={"S": S, "index": i},
            )
        )
    return out


def summarize_session(
    store: TieredMemoryStore,
    raw: Sequence[Chunk],
    S: int,
    summarizer: Summarizer,
    *,
    namespace: str,
    session_id: str,
    date: str,
    prior: Sequence[str] | None = None,
) -> list[str]:
    """Run ``summarizer`` on one session's raw chunks and store the summary chunks.

    Args:
        store: the memory.
        raw: the session's raw chunks, in turn order.
        S: summary level (0 stores nothing).
        summarizer: a :data:`graphs.nodes.Summarizer`.
        namespace, session_id, date: metadata of the summary chunks.
        prior: prior summary texts for rolling re-summarization, or ``None``.

    Returns:
        The stored summary chunk ids.
    """
    if check_level(S) == 0:
        return []
    items = summarizer(list(raw), S, None if prior is None else list(prior))
    chunks = summary_chunks(
        items, namespace=namespace, session_id=session_id, date=date, S=S, raw_ids=[c.id for c in raw]
    )
    return store.add(chunks) if chunks else []


def write_session(
    store: TieredMemoryStore,
    namespace: str,
    session_id: str,
    date: str,
    turns: Sequence[Turn],
    S: int,
    summarizer: Summarizer | None = None,
    *,
    writer: Writer = user_turn_chunks,
) -> dict[str, list[str]]:
    """The write path for one session, without graph overhead.

    Args:
        store: the memory.
        namespace: user / instance id.
        session_id: the session's id (LongMemEval ``haystack_session_ids`` entry).
        date: the session date (``haystack_dates`` entry).
        turns: the session's turns (dicts with ``role``/``content`` or user texts).
        S: summary level 0, 1 or 2.
        summarizer: a :data:`graphs.nodes.Summarizer` (default extractive).
        writer: a :data:`graphs.nodes.Writer` (default: one raw chunk per user turn).

    Returns:
        ``{"raw_ids": [...], "summary_ids": [...]}``; writing a session again upserts
        the same raw ids.

    Raises:
        ValueError: bad S, a malformed turn or summary item.
    """
    check_level(S)
    raw = writer(namespace, session_id, date, turns)
    raw_ids = store.add(raw) if raw else []
    summarizer = summarizer or make_summarizer("extractive")
    summary_ids = summarize_session(
        store, raw, S, summarizer, namespace=namespace, session_id=session_id, date=date
    )
    return {"raw_ids": list(raw_ids), "summary_ids": list(summary_ids)}


def write_sessions(
    write: Any,
    namespace: str,
    sessions: Sequence[tuple[str, str, Sequence[Turn]]],
    S: int,
) -> list[SessionOutput]:
    """The write path for one user's sessions: one batched invocation of a write graph.

    A session is a handful of user turns, so writing sessions one invocation at a time
    embeds in small batches and pays the store's per-write cost once per session. One
    invocation with ``sessions`` writes every session's raw chunks in one
    :meth:`memkit.store.tiered.TieredMemoryStore.add` (one batched embedding, one upsert) and
    then summarizes the sessions in order. What is stored is what one invocation per
    session stores (tested).

    Args:
        write: a compiled write graph (:func:`build_write_graph`, or a design's
            :meth:`graphs.designs.MemoryDesign.write_graph`).
        namespace: user / instance id.
        sessions: ``(session_id, date, turns)`` per session, in order; turns are dicts
            with ``role``/``content``, turn objects with ``to_dict()`` or user texts.
        S: summary level 0, 1 or 2.

    Returns:
        A :class:`SessionOutput` per session, in order.

    Raises:
        ValueError: bad S, a malformed turn (the message names the session and turn).
    """
    batch = [
        {"session_id": sid, "date": date, "turns": [t.to_dict() if hasattr(t, "to_dict") else t for t in turns]}
        for sid, date, turns in sessions
    ]
    if not batch:
        return []
    return list(write.invoke({"namespace": namespace, "S": S, "sessions": batch})["by_session"])


def retrieve(
    store: TieredMemoryStore,
    query: str,
    k: int,
    tiers: Sequence[str],
    namespace: str | None,
    *,
    retriever: Retriever | None = None,
) -> list[Chunk]:
    """The retrieve step: up to ``k`` chunks of ``tiers`` in ``namespace``, best first.

    Raises:
        ValueError: an unknown tier or ``k < 1``.
    """
    bad = [t for t in tiers if t not in TIERS]
    if bad or not tiers:
        raise ValueError(f"retrieve: tiers must be a non-empty subset of {TIERS}, got {list(tiers)}")
    return (retriever or make_retriever(store))(query, k, tuple(tiers), namespace)


def respond(responder: Responder, query: str, chunks: Sequence[Chunk]) -> str:
    """The respond step: ``responder(query, chunks)`` (chunks prepended to its context)."""
    return responder(query, list(chunks))


# --------------------------------------------------------------------------- graphs


class SessionInput(TypedDict, total=False):
    """One session of a batched write: ``session_id``, ``date`` and ``turns``."""

    session_id: str
    date: str
    turns: list[Turn]


class SessionOutput(TypedDict):
    """What a batched write stored for one session."""

    session_id: str
    raw_ids: list[str]
    summary_ids: list[str]


class WriteState(TypedDict, total=False):
    """State of the write graph.

    Input: ``namespace`` and ``S``, and either one session (``session_id``, ``date``,
    ``turns``) or several (``sessions``: a list of :class:`SessionInput`, in order).
    Output adds ``raw_ids`` and ``summary_ids`` (all sessions', in order) and
    ``by_session`` (a :class:`SessionOutput` per session, in order)."""

    namespace: str
    session_id: str
    date: str
    turns: list[Turn]
    sessions: list[SessionInput]
    S: int
    raw_ids: list[str]
    summary_ids: list[str]
    by_session: list[SessionOutput]


class ReadState(TypedDict, total=False):
    """State of the read graph. Input: query, namespace, k (default 3) and S (default 0)
    or tiers. Output adds chunks (best first) and response."""

    query: str
    namespace: str | None
    k: int
    S: int
    tiers: list[str]
    chunks: list[Chunk]
    response: str


def _need(state: dict[str, Any], key: str, graph: str) -> Any:
    if key not in state:
        raise ValueError(f"{graph} graph input is missing {key!r} (got {sorted(state)})")
    return state[key]


def sequence_graph(state: type, steps: list[tuple[str, Any]], *, name: str, **compile_kw: Any) -> Any:
    """A compiled LangGraph graph that runs ``steps`` one after another.

    Args:
        state: the graph's state schema (a ``TypedDict`` or ``MessagesState``).
        steps: ``(node name, node function)`` pairs, in order, from START to END.
        name: the compiled graph's name.
        **compile_kw: passed to ``compile`` (``store``, ``checkpointer``).

    Returns:
        The compiled graph (a LangChain Runnable).
    """
    graph = StateGraph(state)
    graph.add_sequence(steps)
    graph.add_edge(START, steps[0][0])
    graph.add_edge(steps[-1][0], END)
    return graph.compile(name=name, **compile_kw)


def build_write_graph(
    store: TieredMemoryStore,
    summarizer: Summarizer | None = None,
    writer: Writer | None = None,
) -> Any:
    """Compile the write graph ``START -> write -> summarize -> END``.

    Args:
        store: where chunks go.
        summarizer: the summarize node (default :func:`make_summarizer` ``("extractive")``).
        writer: the write node (default :func:`graphs.nodes.user_turn_chunks`).

    Returns:
        A compiled LangGraph (a Runnable) taking :class:`WriteState` input
        (``namespace, session_id, date, turns, S``, or ``namespace, sessions, S`` for
        several sessions in one batched write, :func:`write_sessions`) and returning
        it with ``raw_ids``, ``summary_ids`` and ``by_session``.

    Raises (when invoked):
        ValueError: a missing input field, both ``sessions`` and one session's fields,
            a malformed session or turn (the message names it), bad S.
    """
    summarize_fn = summarizer or make_summarizer("extractive")
    write_fn = writer or user_turn_chunks

    def sessions_of(state: WriteState) -> list[tuple[str, str, Any]]:
        if "sessions" not in state:
            return [(_need(state, "session_id", "write"), state.get("date", ""), _need(state, "turns", "write"))]
        if "session_id" in state or "turns" in state:
            raise ValueError("write graph input: give either 'sessions' or one session's 'session_id'/'turns', not both")
        out = []
        for i, sess in enumerate(state["sessions"]):
            if not isinstance(sess, Mapping) or "session_id" not in sess or "turns" not in sess:
                raise ValueError(f"write graph input: sessions[{i}] needs 'session_id' and 'turns' (got {sess!r:.120})")
            out.append((sess["session_id"], sess.get("date", ""), sess["turns"]))
        return out

    def write(state: WriteState) -> dict[str, Any]:
        check_level(_need(state, "S", "write"))
        namespace = _need(state, "namespace", "write")
        sessions = sessions_of(state)
        per_session = [write_fn(namespace, sid, date, turns) for sid, date, turns in sessions]
        # one add for all sessions: one batched embedding and one upsert; a chunk
        # written twice (a session repeated in the data) is stored once, as its last
        # version (one invocation per session would upsert twice, and chroma's upsert
        # keeps metadata keys that the last version lacks)
        unique = list({c.id: c for chunks in per_session for c in chunks}.values())
        if unique:
            store.add(unique)
        return {"raw_ids": [c.id for chunks in per_session for c in chunks],
                "by_session": [{"session_id": sid, "raw_ids": [c.id for c in chunks], "summary_ids": []}
                               for (sid, _, _), chunks in zip(sessions, per_session, strict=True)]}

    def summarize(state: WriteState) -> dict[str, Any]:
        S = state["S"]
        done: list[dict[str, Any]] = []
        for (sid, date, _), out in zip(sessions_of(state), state["by_session"], strict=True):
            ids: list[str] = []
            if S > 0:  # S=0 stores no summary: nothing to read back
                raw = sorted(store.get(out["raw_ids"]), key=lambda c: c.turn_index)
                ids = list(summarize_session(store, raw, S, summarize_fn,
                                             namespace=state["namespace"], session_id=sid, date=date))
            done.append({**out, "summary_ids": ids})
        return {"summary_ids": [i for o in done for i in o["summary_ids"]], "by_session": done}

    return sequence_graph(WriteState, [("write", write), ("summarize", summarize)], name="memkit-write")


def build_read_graph(
    store: TieredMemoryStore,
    retriever: Retriever | None = None,
    responder: Responder | None = None,
    *,
    default_k: int = 3,
) -> Any:
    """Compile the read graph ``START -> retrieve -> respond -> END``.

    Args:
        store: where chunks are read from (used by the default retriever).
        retriever: the retrieve node (default :func:`make_retriever` ``(store)``).
        responder: the respond node (default :func:`make_responder` ``("extractive")``).
        default_k: k when the input gives none.

    Returns:
        A compiled LangGraph taking :class:`ReadState` input (``query``, ``namespace``,
        ``k``, ``S`` or ``tiers``) and returning it with ``chunks`` and ``response``.
    """
    retrieve_fn = retriever or make_retriever(store)
    respond_fn = responder or make_responder("extractive")

    def retrieve_node(state: ReadState) -> dict[str, Any]:
        tiers = state.get("tiers") or tiers_for(state.get("S", 0))
        chunks = retrieve(
            store, _need(state, "query", "read"), int(state.get("k", default_k)), tiers,
            state.get("namespace"), retriever=retrieve_fn,
        )
        return {"chunks": chunks}

    def respond_node(state: ReadState) -> dict[str, Any]:
        return {"response": respond(respond_fn, state["query"], state["chunks"])}

    return sequence_graph(ReadState, [("retrieve", retrieve_node), ("respond", respond_node)], name="memkit-read")
