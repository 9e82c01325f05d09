"""Any agent as a :class:`~evaluators.targets.base.Target`: a compiled LangGraph graph
with the store and checkpointer it was built on, or plain callables.

:func:`as_target` is the one adapter. It takes what a user has -- a graph written as
LangGraph's long-term-memory how-to writes it (a ``StateGraph`` whose nodes read and
write ``runtime.store``, compiled with a ``BaseStore`` and a checkpointer), a mapping
``{"agent", "store", "checkpointer", ...}`` from a factory, a tuple ``(agent, feed[,
forget[, store]])``, or callables -- and returns a target with every surface those
memory objects have attached (:func:`evaluators.targets.stores.attach`):

* **ask**: the agent, in a fresh conversation per call (:func:`evaluators.agents.as_asker`);
* **feed**: the user's ``feed`` when given; otherwise, for a graph with a ``messages``
  channel, the conversation itself: every user turn of a session is sent to the agent
  in one thread per session, and the agent's own nodes write what they keep;
* **forget a secret**: the user's ``forget(secret, user_id)``; else, on memkit's
  stores, a deletion mode (``forget_mode``) of :mod:`graphs.forget`; else
  ``BaseStore.delete`` of every item of the user whose value holds the secret;
* **forget a request in words** ("forget my doctor's name",
  :mod:`graphs.forget_request`): on memkit's stores, resolved over the user's
  namespaces and forgotten with ``forget_mode``; on any other ``BaseStore``, resolved
  over the user's items and every item holding what it resolved to deleted; n/a with
  only a user's ``forget(secret)``;
* **forget a user**: the user's ``forget_user(user_id)``; else
  :func:`graphs.forget.forget_user` on memkit's stores; else ``BaseStore.delete`` of
  every item of the user, and their threads;
* **delete threads**: ``delete_thread`` of every thread the checkpointer holds for
  the user (checkpoint metadata ``user_id``, which LangGraph copies from the run's
  ``configurable``) and every thread memkit opened for them.

A user's items are those in the namespaces the user owns (:func:`graphs.forget.owner_rule`:
namespaces compare as label tuples; ``(user_id,)`` or under ``("memories", user_id)``,
so user ``7`` owns ``("memories", "7")`` but not ``("orgs", "7", "notes")``); a factory
may say otherwise with ``namespace_for(user_id) -> prefix``. On an
SQLite or PostgreSQL store memkit did not create, every item and thread of the
audit's synthetic users is deleted again when the target closes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluators.agents import (
    FEED_SIGNATURE,
    FORGET_SIGNATURE,
    as_asker,
    call_feed,
    check_callable,
    has_messages_channel,
)
from evaluators.targets.base import Answer, NotApplicable, Query, Recalled, Target
from evaluators.targets.stores import LazyEmbedder, attach, store_items

__all__ = ["AgentTarget", "as_target"]


def _savers(objs: Sequence[Any], given: Any) -> list[Any]:
    """The checkpointers: ``given`` (one or a list), else those the objects were
    compiled with, each once."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    found = (list(given) if isinstance(given, (list, tuple)) else [given]) if given is not None \
        else [getattr(x, "checkpointer", None) for x in objs]
    out: list[Any] = []
    for saver in found:
        if isinstance(saver, BaseCheckpointSaver) and all(saver is not o for o in out):
            out.append(saver)
    return out


def _is_memkit_store(store: Any) -> bool:
    from memkit.store.langgraph import MemkitStore
    from memkit.store.tiered import TieredMemoryStore

    return isinstance(store, MemkitStore | TieredMemoryStore)


def _is_base_store(store: Any) -> bool:
    from langgraph.store.base import BaseStore

    return isinstance(store, BaseStore)


class AgentTarget(Target):
    """An agent memkit did not build, over the memory objects it is given (module doc).

    Args:
        agent: a LangChain Runnable (a compiled graph) or a callable ``ask(text,
            user_id[, thread_id])``.
        feed: ``feed(turns, session_id, date, user_id)`` or a Runnable (optional for
            a graph with a ``messages`` channel: the conversation feeds it).
        forget: ``forget(secret, user_id)``. forget_user: ``forget_user(user_id)``.
        forget_mode: a deletion mode of :mod:`graphs.forget` for memkit's stores, or
            the label reports give ``forget``.
        store: the agent's store (default the graph's own ``store``): any
            ``BaseStore``, memkit's stores, or a Chroma directory.
        checkpointer: one or a list (default those the agent and feed were compiled with).
        also: side files or directories of the memory layer.
        pgdata: a PostgreSQL store's data directory, when the server cannot say it.
        input_fn, output_fn: adapters for a Runnable agent (:func:`evaluators.agents.as_asker`).
        namespace_for: ``user_id -> namespace prefix`` of the user's items.
        name: the label in reports.
        cleanup: delete the synthetic users' items and threads on close (default: on
            SQLite and PostgreSQL stores).
    """

    def __init__(self, agent: Any, *, feed: Any = None, forget: Callable[..., Any] | None = None,
                 forget_user: Callable[..., Any] | None = None, forget_mode: str | None = None, store: Any = None,
                 checkpointer: Any = None, also: Sequence[str | Path] = (), pgdata: str | Path | None = None,
                 input_fn: Callable[[str], Any] | None = None, output_fn: Callable[[Any], str] | None = None,
                 namespace_for: Callable[[str], Sequence[str]] | None = None, name: str = "agent",
                 cleanup: bool | None = None) -> None:
        self.name = name
        self.ask_fn = as_asker(agent, input_fn=input_fn, output_fn=output_fn)
        self.agent = agent
        if feed is None:
            if not (hasattr(agent, "invoke") and has_messages_channel(agent)):
                raise TypeError(f"audit: feed is required (a callable {FEED_SIGNATURE}) unless the agent is a "
                                "graph with a 'messages' channel, which memkit feeds by talking to it")
        elif not hasattr(feed, "invoke"):
            check_callable(feed, 4, "feed", FEED_SIGNATURE)
        if forget is not None:
            check_callable(forget, 2, "forget", FORGET_SIGNATURE)
        if forget_user is not None:
            check_callable(forget_user, 1, "forget_user", "forget_user(user_id: str) -> Any")
        self.feed_fn, self.forget_fn, self.forget_user_fn = feed, forget, forget_user
        self.forget_mode = forget_mode
        if store is None:
            store = getattr(agent, "store", None) if hasattr(agent, "invoke") else None
        self.store = store
        if forget is not None or forget_user is not None:
            self.forget_label = forget_mode or "custom"
        elif _is_memkit_store(store) and forget_mode is not None:
            self.forget_label = forget_mode
        else:
            self.forget_label = "BaseStore.delete"
        self.savers = _savers([agent, feed], checkpointer)
        self.attached = attach(store, self.savers, also=also, pgdata=pgdata)
        from memkit.store.tiered import TIERS

        self.tiers = TIERS if self.attached.restrict_tiers is not None else ()
        self.namespace_for = namespace_for
        self.opened: dict[str, set[str]] = {}
        self.fed: list[str] = []
        if cleanup is None:
            kinds = {type(x).__name__ for x in [store, *self.savers]}
            cleanup = bool(kinds & {"SqliteStore", "PostgresStore", "SqliteSaver", "PostgresSaver"})
        self.cleanup = cleanup

    # the protocol --------------------------------------------------------

    def feed(self, turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
        """The user's ``feed``; without one, the session's user turns sent to the agent
        one by one in the thread ``memkit-feed:<user>:<session>``."""
        if user_id not in self.fed:
            self.fed.append(user_id)
        if self.feed_fn is not None:
            call_feed(self.feed_fn, turns, session_id, date, user_id)
            if hasattr(self.feed_fn, "invoke"):
                self.opened.setdefault(user_id, set()).add(session_id)
            return
        thread = f"memkit-feed:{user_id}:{session_id}"
        self.opened.setdefault(user_id, set()).add(thread)
        for t in turns:
            if t.get("role") == "user" and str(t.get("content", "")).strip():
                self.ask_fn(str(t["content"]), user_id, thread)

    def ask(self, text: str, user_id: str, thread_id: str) -> str:
        """The agent, in thread ``thread_id``."""
        self.opened.setdefault(user_id, set()).add(thread_id)
        return self.ask_fn(text, user_id, thread_id)

    def ask_many(self, queries: Sequence[Query]) -> list[Answer]:
        """Each query in turn; a query naming tiers runs with the store's recall
        restricted to them (memkit's ``MemkitStore``)."""
        out = []
        for q in queries:
            t0 = time.perf_counter()
            if q.tiers is not None and self.attached.restrict_tiers is not None:
                with self.attached.restrict_tiers(q.tiers):
                    text = self.ask(q.text, q.user_id, q.thread_id)
            else:
                text = self.ask(q.text, q.user_id, q.thread_id)
            out.append(Answer(text, None, time.perf_counter() - t0))
        return out

    def supports(self, operation: str) -> bool:
        """What this agent's objects allow (module doc)."""
        memkit_store = _is_memkit_store(self.store) and self.forget_mode is not None
        if operation == "forget_secret":
            return self.forget_fn is not None or memkit_store or _is_base_store(self.store)
        if operation == "forget_user":
            return self.forget_user_fn is not None or memkit_store or (
                _is_base_store(self.store) and not _is_memkit_store(self.store))
        if operation == "delete_threads":
            return bool(self.savers)
        if operation == "forget_request":
            return self.forget_fn is None and (memkit_store or _is_base_store(self.store))
        if operation == "leftover_vectors":
            return self.attached.vectors is not None
        return super().supports(operation)

    def _user_items(self, user_id: str) -> list[Any]:
        """The user's items: in the namespaces :func:`graphs.forget.owner_rule` gives the
        user (module doc)."""
        from graphs.forget import owner_rule

        owns = owner_rule(user_id, self.namespace_for)
        return [i for i in store_items(self.store) if owns(tuple(i.namespace))]

    def forget_secret(self, secret: str, user_id: str) -> Any:
        """Forget ``secret`` of the user (module doc)."""
        if self.forget_fn is not None:
            return self.forget_fn(secret, user_id)
        if _is_memkit_store(self.store) and self.forget_mode is not None:
            from evaluators.agents import forget_in_store

            self._check_keys()
            return forget_in_store(self.store, secret, self.forget_mode)
        if not _is_base_store(self.store):
            raise NotApplicable(f"{self.name}: no forget was given and no store to delete from")
        from memkit.scan.matching import matcher

        m = matcher(secret)
        doomed = [(tuple(i.namespace), i.key) for i in self._user_items(user_id) if m.contains(i.value)]
        for ns, key in doomed:
            self.store.delete(ns, key)
        return len(doomed)

    def forget_request(self, request: str, user_id: str) -> Any:
        """Forget what ``request`` asks (module doc); a :class:`graphs.forget_request.RequestForget`."""
        from graphs.forget import forget_strings
        from graphs.forget_request import Item, RequestForget, Resolution, resolve, store_items

        if self.forget_fn is not None or not (_is_base_store(self.store) or _is_memkit_store(self.store)):
            raise NotApplicable(f"{self.name} takes only a secret to forget, not a request in words")
        if _is_memkit_store(self.store) and self.forget_mode is not None:
            from graphs.forget import user_namespaces

            self._check_keys()
            tiered = getattr(self.store, "tiered", self.store)
            labels = user_namespaces(tiered, user_id, namespace_for=self.namespace_for)
            res = resolve(request, [it for n in labels for it in store_items(tiered, n)], tiered.embedder)
            results = []
            for n in sorted({m.item.namespace for m in res.matches}):  # as stored
                mine = [s for m in res.matches if m.item.namespace == n
                        for s in Resolution(request, res.resolver, [m]).strings()]
                results += forget_strings(tiered, list(dict.fromkeys(mine)), self.forget_mode, namespace=n)
            return RequestForget(res, results)
        from memkit.models.extractive import split_sentences
        from memkit.scan.matching import matcher

        items = []
        for i in self._user_items(user_id):
            text = i.value.get("content") if isinstance(i.value, dict) else None
            text = text if isinstance(text, str) else json.dumps(i.value, ensure_ascii=False)
            date = str(i.value.get("date", "")) if isinstance(i.value, dict) else ""
            items += [Item(f"{'/'.join(i.namespace)}:{i.key}", s, date, "/".join(i.namespace))
                      for s in split_sentences(text)]
        res = resolve(request, items, self.attached.embedder or LazyEmbedder())
        ms = [matcher(s) for s in res.strings()]
        doomed = [(tuple(i.namespace), i.key) for i in self._user_items(user_id) if any(m.contains(i.value) for m in ms)]
        for ns, key in doomed:
            self.store.delete(ns, key)
        return _StoreRequestForget(res, len(doomed))

    def leftover_vectors(self) -> tuple[Any, Any]:
        """The store's leftover vectors (:func:`evaluators.targets.stores.attach`)."""
        if self.attached.vectors is None:
            raise NotApplicable(f"{self.name}: memkit cannot read this store's vectors")
        return self.attached.vectors(), self.attached.embedder

    def _check_keys(self) -> None:
        """``crypto_shred`` on a memkit store that keeps no per-user keys: n/a."""
        tiered = getattr(self.store, "tiered", self.store)
        if self.forget_mode == "crypto_shred" and getattr(tiered, "keystore", None) is None:
            raise NotApplicable(f"{self.name}: crypto_shred needs a store that encrypts at rest with per-user "
                                "keys (TieredMemoryStore(..., keystore=KeyStore(dir))); this one does not")

    def forget_user(self, user_id: str) -> Any:
        """Forget everything of the user (module doc)."""
        if self.forget_user_fn is not None:
            return self.forget_user_fn(user_id)
        if _is_memkit_store(self.store) and self.forget_mode is not None:
            from graphs.forget import forget_user

            tiered = getattr(self.store, "tiered", self.store)
            self._check_keys()
            return forget_user(tiered, user_id, self.forget_mode)
        if not _is_base_store(self.store):
            raise NotApplicable(f"{self.name}: no forget_user was given and no store to delete from")
        doomed = [(tuple(i.namespace), i.key) for i in self._user_items(user_id)]
        for ns, key in doomed:
            self.store.delete(ns, key)
        if self.savers:
            self.delete_threads(user_id)
        return len(doomed)

    def memories(self, user_id: str) -> list[Recalled] | None:
        """The user's items of a ``BaseStore`` (text: a ``content`` string value, else
        the value as JSON); ``None`` for other stores."""
        if not _is_base_store(self.store) or _is_memkit_store(self.store):
            return None
        import json

        out = []
        for item in self._user_items(user_id):
            value = item.value
            text = value.get("content") if isinstance(value, dict) and isinstance(value.get("content"), str) \
                else json.dumps(value, ensure_ascii=False, default=str)
            out.append(Recalled("/".join([*item.namespace, str(item.key)]), None, text))
        return out

    def threads_of(self, user_id: str) -> set[str]:
        """Every thread of the user: the checkpointers' (metadata ``user_id``) and those
        memkit opened."""
        threads = set(self.opened.get(user_id, ()))
        for saver in self.savers:
            for tup in saver.list(None, filter={"user_id": user_id}):
                threads.add((tup.config or {}).get("configurable", {}).get("thread_id"))
        return {t for t in threads if t}

    def delete_threads(self, user_id: str) -> int:
        """``delete_thread`` of every thread of the user on every checkpointer."""
        if not self.savers:
            raise NotApplicable(f"{self.name} keeps no conversations to delete")
        threads = sorted(self.threads_of(user_id))
        for saver in self.savers:
            for t in threads:
                saver.delete_thread(t)
        return len(threads)

    def surfaces(self) -> list[Any]:
        """Every surface of the store, checkpointers and side files
        (:func:`evaluators.targets.stores.attach`)."""
        return list(self.attached.surfaces)

    def deletion_steps(self) -> dict[str, Callable[[], Any]]:
        """The backend's steps (``vacuum``, ``vacuum_full``, ``checkpoint_wal``,
        ``wal_checkpoint``)."""
        return dict(self.attached.steps)

    def close(self) -> None:
        """Delete the synthetic users' items and threads when ``cleanup``, then release
        memkit's connections (idempotent)."""
        if self.cleanup:
            self.cleanup = False
            for user in self.fed:
                if _is_base_store(self.store) and not _is_memkit_store(self.store):
                    for item in self._user_items(user):
                        self.store.delete(tuple(item.namespace), item.key)
                if self.savers:
                    self.delete_threads(user)
        while self.attached.closers:
            self.attached.closers.pop(0)()


class _StoreRequestForget:
    """A request forgotten from a ``BaseStore``: what it resolved to and the items deleted."""

    def __init__(self, resolution: Any, deleted: int) -> None:
        self.resolution, self.deleted = resolution, deleted

    @property
    def resolved_texts(self) -> list[str]:
        return self.resolution.texts()

    def changes(self) -> dict[str, Any]:
        return {"deleted": {"items": self.deleted},
                "request": {"items": len(self.resolution.matches), "resolver": self.resolution.resolver}}


def as_target(obj: Any, **options: Any) -> Target:
    """A :class:`Target` from what a user has (module doc).

    Args:
        obj: a :class:`Target` (returned as is); a mapping with ``agent`` and any of
            :class:`AgentTarget`'s keyword arguments; a tuple ``(agent, feed[,
            forget[, store]])``; or the agent itself (a Runnable or callable).
        options: :class:`AgentTarget` keyword arguments (they apply to the agent;
            a mapping's own keys win over them).

    Raises:
        TypeError: options given with a :class:`Target` (they would not apply), a
            mapping without ``agent``, an unknown key, or an agent that cannot be asked.
    """
    options = {k: v for k, v in options.items() if v is not None and v != ()}
    if isinstance(obj, Target):
        if options:
            raise TypeError(f"{', '.join(sorted(options))}: these apply to an agent; a Target brings its own "
                            "(pass them to the target's factory)")
        return obj
    if isinstance(obj, tuple):
        obj = dict(zip(("agent", "feed", "forget", "store"), obj, strict=False))
    if isinstance(obj, Mapping):
        if "agent" not in obj:
            raise TypeError(f"a mapping target needs 'agent' (and optionally store, checkpointer, feed, forget ...);"
                            f" got keys {sorted(obj)}")
        made = {k: v for k, v in obj.items() if v is not None}
        known = set(AgentTarget.__init__.__code__.co_varnames[1:AgentTarget.__init__.__code__.co_argcount
                                                                + AgentTarget.__init__.__code__.co_kwonlyargcount])
        unknown = set(made) - known
        if unknown:
            raise TypeError(f"a mapping target has unknown keys {sorted(unknown)}; use {sorted(known)}")
        return AgentTarget(**{**options, **made})
    return AgentTarget(obj, **options)

