"""How :func:`evaluators.audit.audit` talks to an agent and its memory: the ask, feed and
forget adapters (a callable or a LangGraph Runnable), the store helpers for a
:class:`~memkit.store.langgraph.MemkitStore` or :class:`~memkit.store.tiered.TieredMemoryStore`,
and the instances an audit draws (docs/audit.md, "What audit needs").

The agent (``agent=``):

* a LangChain ``Runnable`` (a compiled LangGraph graph included): invoked with
  ``config={"configurable": {"thread_id": <fresh>, "user_id": <user>}}``; the input
  is ``{"messages": [{"role": "user", "content": text}]}`` for a graph with a
  ``messages`` channel, else the text (``input_fn`` overrides); the response is read
  from a string, a message, the last of ``output["messages"]`` or one of the keys
  ``response``/``answer``/``output`` (``output_fn`` overrides);
* or a callable :data:`ASK_SIGNATURE`: ``ask(text, user_id)``, called positionally;
  one that takes a third positional parameter also gets a fresh ``thread_id``. A
  plain callable must start a fresh conversation on each call itself.

``feed``: a callable :data:`FEED_SIGNATURE`, ``feed(turns, session_id, date,
user_id)``, called positionally (``turns`` are LongMemEval dicts ``{"role",
"content", "has_answer"?}``), or a Runnable invoked with ``{"turns", "session_id",
"date", "user_id"}`` and the same ``configurable`` keys (``thread_id`` = the session
id). :func:`store_feeder` writes each user turn into a MemkitStore. ``forget``: a
callable :data:`FORGET_SIGNATURE`, ``forget(secret, user_id)``, called positionally;
:func:`store_forgetter` runs a deletion mode of :mod:`graphs.forget` on a MemkitStore.

The callables' parameter names do not matter, only their positions: :func:`evaluators.audit.audit`
checks each one against its signature before it feeds anything and raises a
``TypeError`` that shows the expected signature.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from graphs.forget import DELETION_MODES, ForgetResult
from graphs.forget import forget as run_forget
from memkit.dataset.longmemeval import Instance
from memkit.store.langgraph import MemkitStore, namespace_key
from memkit.store.tiered import TieredMemoryStore

__all__ = [
    "ASK_SIGNATURE",
    "FEED_SIGNATURE",
    "FORGET_SIGNATURE",
    "Asker",
    "as_asker",
    "call_feed",
    "check_callable",
    "forget_in_store",
    "load_audit_instances",
    "store_feeder",
    "store_forgetter",
    "user_id_for",
]

Asker = Callable[[str, str, str], str]
"""``(text, user_id, thread_id) -> response``: one question in a fresh conversation."""


# --------------------------------------------------------------------------- adapters


ASK_SIGNATURE = "ask(text: str, user_id: str[, thread_id: str]) -> str"
FEED_SIGNATURE = "feed(turns: list[dict], session_id: str, date: str, user_id: str) -> None"
FORGET_SIGNATURE = "forget(secret: str, user_id: str) -> Any"


def _binds(fn: Callable[..., Any], n: int) -> bool | None:
    """Whether ``fn`` takes ``n`` positional arguments (``None``: no signature to read)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*(["x"] * n))
    except TypeError:
        return False
    return True


def check_callable(fn: Any, n: int, what: str, expected: str) -> None:
    """Raise ``TypeError`` unless ``fn`` is a callable taking ``n`` positional arguments.

    Args:
        fn: the user's callable. n: positional arguments it must take.
        what: its role (``"agent"``, ``"feed"``, ``"forget"``). expected: the signature.
    """
    if not callable(fn):
        raise TypeError(f"audit: {what} must be a callable {expected}, got {type(fn).__name__}")
    if _binds(fn, n) is False:
        name = getattr(fn, "__name__", type(fn).__name__)
        raise TypeError(
            f"audit: {what} {name}{inspect.signature(fn)} cannot be called as {expected}: it must "
            f"take {n} positional arguments (their names do not matter)"
        )


def _default_output(out: Any) -> str:
    if isinstance(out, str):
        return out
    if isinstance(out, BaseMessage):
        return out.text
    if isinstance(out, Mapping):
        msgs = out.get("messages")
        if isinstance(msgs, Sequence) and msgs:
            last = msgs[-1]
            if isinstance(last, BaseMessage):
                return last.text
            if isinstance(last, Mapping) and isinstance(last.get("content"), str):
                return str(last["content"])
        for key in ("response", "answer", "output"):
            if isinstance(out.get(key), str):
                return str(out[key])
    raise TypeError(
        f"cannot read a response from the agent's output of type {type(out).__name__} "
        f"(keys {sorted(out) if isinstance(out, Mapping) else '-'}); pass output_fn=..."
    )


def has_messages_channel(agent: Any) -> bool:
    """Whether the agent (or the graph a ``with_config`` binding wraps) has a
    ``messages`` channel."""
    for _ in range(8):
        channels = getattr(agent, "channels", None)
        if isinstance(channels, Mapping):
            return "messages" in channels
        agent = getattr(agent, "bound", None)
        if agent is None:
            return False
    return False


def as_asker(
    agent: Any,
    *,
    input_fn: Callable[[str], Any] | None = None,
    output_fn: Callable[[Any], str] | None = None,
) -> Asker:
    """Wrap an agent as an :data:`Asker` ``(text, user_id, thread_id) -> response``.

    Args:
        agent: a LangChain Runnable (compiled LangGraph graphs included) or a callable
            ``(text) -> str`` (see the module doc for how each is called).
        input_fn: ``text -> agent input`` (Runnables only).
        output_fn: ``agent output -> response text`` (Runnables only).

    Returns:
        The asker. It raises ``TypeError`` when the agent's output holds no text.

    Raises:
        TypeError: ``agent`` is neither a Runnable nor callable.
    """
    if hasattr(agent, "invoke"):
        wants_messages = has_messages_channel(agent)

        def ask_runnable(text: str, user_id: str, thread_id: str) -> str:
            if input_fn is not None:
                payload = input_fn(text)
            elif wants_messages:
                payload = {"messages": [{"role": "user", "content": text}]}
            else:
                payload = text
            config = {"configurable": {"thread_id": thread_id, "user_id": user_id}}
            out = agent.invoke(payload, config=config)
            return output_fn(out) if output_fn is not None else _default_output(out)

        return ask_runnable
    check_callable(agent, 2, "agent", ASK_SIGNATURE)
    with_thread = bool(_binds(agent, 3))

    def ask_callable(text: str, user_id: str, thread_id: str) -> str:
        out = agent(text, user_id, thread_id) if with_thread else agent(text, user_id)
        if not isinstance(out, str):
            out = _default_output(out)
        return out

    return ask_callable


def call_feed(feed: Any, turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
    """Feed one session into the agent's memory with the user's ``feed`` (module doc).

    Raises:
        TypeError: ``feed`` is neither a Runnable nor callable.
    """
    if hasattr(feed, "invoke"):
        feed.invoke(
            {"turns": turns, "session_id": session_id, "date": date, "user_id": user_id},
            config={"configurable": {"thread_id": session_id, "user_id": user_id}},
        )
        return
    check_callable(feed, 4, "feed", FEED_SIGNATURE)
    feed(turns, session_id, date, user_id)


def user_id_for(instance: Instance) -> str:
    """The audit's user id of an instance: ``"user-" + question_id`` with ``"."`` and
    ``"/"`` replaced by ``"_"`` (valid as a LangGraph namespace label)."""
    return "user-" + instance.question_id.replace(".", "_").replace("/", "_")


# --------------------------------------------------------------------------- store helpers


def store_feeder(
    store: MemkitStore,
    *,
    namespace: Callable[[str], tuple[str, ...]] = lambda user_id: ("memories", user_id),
    field_name: str = "content",
) -> Callable[..., None]:
    """A ``feed`` that writes every user turn of a session into ``store`` as one item.

    Item: namespace ``namespace(user_id)``, key ``"<session_id>/<turn index>"``, value
    ``{field_name: text, "session_id": ..., "date": ..., "turn_index": ...}``.

    Args:
        store: the agent's store.
        namespace: user id -> LangGraph namespace of that user's memories.
        field_name: value field holding the turn text (index it: ``MemkitStore(index=
            {"fields": [field_name]})``).

    Returns:
        ``feed(turns, session_id, date, user_id="default") -> None``.
    """

    def feed(turns: list[dict[str, Any]], session_id: str, date: str, user_id: str = "default") -> None:
        ns = namespace(user_id)
        for i, turn in enumerate(turns):
            if turn.get("role") == "user" and str(turn.get("content", "")).strip():
                store.put(ns, f"{session_id}/{i}", {
                    field_name: turn["content"], "session_id": session_id, "date": date, "turn_index": i,
                })

    return feed


def forget_in_store(
    store: MemkitStore | TieredMemoryStore,
    secret: str,
    mode: str = "full_purge",
    *,
    namespace_prefix: Sequence[str] | None = None,
    summarizer: Any = None,
    cache: Any = None,
) -> list[ForgetResult]:
    """Run a deletion mode (:func:`graphs.forget.forget`) on a store.

    Args:
        store: a :class:`~memkit.store.langgraph.MemkitStore` (its tiered store is used)
            or a :class:`~memkit.store.tiered.TieredMemoryStore`.
        secret: the string to forget.
        mode: one of :data:`graphs.forget.DELETION_MODES`.
        namespace_prefix: forget only in the LangGraph namespaces under this prefix
            (MemkitStore only; one forget per namespace); ``None``: the whole store.
        summarizer, cache: passed to :func:`graphs.forget.forget`
            (``raw_plus_resummarize`` re-summarizes only memkit summary chunks, which
            carry their level ``S``; LangGraph items do not, so it acts as ``raw_only``
            on them).

    Returns:
        One :class:`~graphs.forget.ForgetResult` per namespace forgotten in.

    Raises:
        ValueError: unknown mode or empty secret; a prefix with a TieredMemoryStore.
    """
    if mode not in DELETION_MODES:
        raise ValueError(f"unknown deletion mode {mode!r}; use one of {DELETION_MODES}")
    tiered = store.tiered if isinstance(store, MemkitStore) else store
    if namespace_prefix is None:
        return [run_forget(tiered, secret, mode, namespace=None, summarizer=summarizer, cache=cache)]
    if not isinstance(store, MemkitStore):
        raise ValueError("forget_in_store: namespace_prefix needs a MemkitStore")
    names = store.list_namespaces(prefix=tuple(namespace_prefix), limit=1_000_000)
    return [
        run_forget(tiered, secret, mode, namespace=namespace_key(ns), summarizer=summarizer, cache=cache)
        for ns in names
    ]


def store_forgetter(
    store: MemkitStore | TieredMemoryStore,
    mode: str = "full_purge",
    *,
    namespace_for: Callable[[str], Sequence[str]] | None = None,
    summarizer: Any = None,
    cache: Any = None,
) -> Callable[..., list[ForgetResult]]:
    """A ``forget`` for :func:`audit`: ``forget(secret, user_id=None)`` runs
    :func:`forget_in_store` with ``mode`` (in ``namespace_for(user_id)`` when both are
    given, else in the whole store). Pass ``forget_mode=mode`` to :func:`audit` for the
    report's label.

    Raises:
        ValueError: unknown mode.
    """
    if mode not in DELETION_MODES:
        raise ValueError(f"unknown deletion mode {mode!r}; use one of {DELETION_MODES}")

    def forget(secret: str, user_id: str | None = None) -> list[ForgetResult]:
        prefix = namespace_for(user_id) if (namespace_for is not None and user_id is not None) else None
        return forget_in_store(store, secret, mode, namespace_prefix=prefix, summarizer=summarizer, cache=cache)

    return forget


# --------------------------------------------------------------------------- data


def load_audit_instances(
    data: str | Sequence[Instance] = "synthetic",
    n: int = 4,
    seed: int = 0,
    *,
    synthetic_sessions: int | tuple[int, int] = (2, 4),
    synthetic_turns: int | tuple[int, int] = (6, 8),
) -> list[Instance]:
    """The audit's instances: ``n`` synthetic ones, a seeded stratified sample of a
    LongMemEval file (as the sweep draws them, :func:`memkit.dataset.draw.draw_instances`),
    or the given instances.

    Raises:
        ValueError: ``n < 1`` or larger than the file.
        memkit.dataset.longmemeval.LongMemEvalError: a malformed file (names file, record, field).
    """
    if not isinstance(data, str):
        return list(data)
    if n < 1:
        raise ValueError(f"audit: n must be >= 1, got {n}")
    from memkit.dataset.draw import draw_instances

    return draw_instances(data, n, seed, sessions=synthetic_sessions, turns=synthetic_turns)
