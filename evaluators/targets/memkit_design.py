"""Built-in target ``memkit``: a memory design (:class:`graphs.designs.MemoryDesign`)
as the sweep runs it.

The design's compiled write graph stores each user's sessions at summary level ``S``
(:func:`graphs.memory.write_sessions`, namespace = the user) in a
:class:`memkit.store.tiered.TieredMemoryStore`; its read graph answers a question from the
tiers the design reads at ``S`` (or the tiers a query names), top ``k``, through the
sweep's retrieval and response memos (:class:`evaluators.sweep.read_path.ReadPath`).
``forget_secret`` runs a deletion mode of :mod:`graphs.forget` (``mode``) in the
user's namespace; ``forget_user`` deletes every chunk of the user's namespace (with
``crypto_shred``, :func:`graphs.forget.forget_user`: the user's key destroyed too).
With ``mode="crypto_shred"`` the store seals every text under the user's data key
(:mod:`memkit.store.keystore`; keys in ``workdir/keys``, in memory without a workdir).
:meth:`MemkitDesignTarget.fork` copies the users' memory (and the LLM cache) into a
directory for one deletion mode, as the sweep forgets each mode on its own copy.
Deletion step: ``compact`` (:meth:`memkit.store.tiered.TieredMemoryStore.compact`). A
design keeps no conversations (n/a), and reading writes nothing.

Surfaces: every surface :func:`memkit.residue.chroma.scan` reads in a Chroma store
(``text_raw``, ``text_summary``, ``text_other``, ``metadata``, ``stale_embedding``,
the ``disk_*`` files) and, with an LLM cache, ``cache`` and ``cache_disk``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

from evaluators.targets.base import Answer, Query, Recalled, Surface, Target
from evaluators.targets.residue_surfaces import residue_surfaces

__all__ = ["CHROMA_SURFACES", "MemkitDesignTarget", "build"]

CHROMA_SURFACES = ("text_raw", "text_summary", "text_other", "metadata", "stale_embedding", "stale_vector", "disk_sqlite",
                   "disk_wal", "disk_log", "disk_fulltext", "disk_hnsw", "disk_other")
"""The residue surfaces of a Chroma directory."""


class MemkitDesignTarget(Target):
    """A memkit memory design over a tiered store (module doc).

    Args:
        design: a design or its name (:func:`graphs.designs.resolve_design`).
        workdir: where the Chroma directory lives (``None`` with ``collection``: an
            in-memory store, as in the sweep's main phase).
        S: summary level 0, 1 or 2. mode: the deletion mode of ``forget_secret``.
        model: responder model spec or object. summarizer_model: the summarizer's
            (default ``model``). k: chunks per question when a query names none.
        cache: an :class:`memkit.store.cache.LLMCache` for both models (``None``: none).
        concurrency, rps: responder calls in flight and requests per second.
        collection: the in-memory store's collection name.
        resolver: the chat model (or spec) that judges forget requests in words
            (:mod:`graphs.forget_request`); ``None``: the deterministic resolver.
        name: the label in records (default ``memkit[design, S=, mode]``).
        cleanup: remove ``workdir`` on :meth:`close`.
    """

    takes_k = True
    uses_threads = False
    reads_write = False

    def __init__(self, design: Any = "study", workdir: Path | None = None, *, S: int = 1,
                 mode: str = "full_purge", model: Any = "extractive", summarizer_model: Any = None, k: int = 3,
                 cache: Any = None, concurrency: int = 1, rps: float | None = None,
                 collection: str | None = None, name: str | None = None, cleanup: bool = False,
                 resolver: Any = None, _respond: Any = None, _store: Any = None) -> None:
        from evaluators.sweep.read_path import Responses
        from graphs.designs import resolve_design
        from graphs.forget import DELETION_MODES
        from memkit.store.tiered import TIERS, TieredMemoryStore

        if mode not in DELETION_MODES:
            raise ValueError(f"unknown deletion mode {mode!r}; use one of {DELETION_MODES}")
        self.design = resolve_design(design)
        self.name = name or f"memkit[{self.design.name}, S={S}, {mode}]"
        self.forget_label = mode
        self.tiers = TIERS
        self.S, self.mode, self.k, self.model = S, mode, k, model
        self.summarizer_model = summarizer_model if summarizer_model is not None else model
        self.cache, self.concurrency, self.rps = cache, concurrency, rps
        self.resolver = resolver
        self.workdir, self._cleanup = workdir, cleanup
        if _store is not None:
            self.store = _store
        elif workdir is None:
            self.store = TieredMemoryStore(collection=collection or "memory", keystore=_keys(mode, None))
        else:
            self.store = TieredMemoryStore(workdir / "chroma", collection=collection or "memory", create=True,
                                           keystore=_keys(mode, workdir))
        self.summarizer = self.design.summarizer(self.summarizer_model, cache=cache)
        self.respond = _respond or Responses(self.design.responder(model, cache=cache),
                                             concurrency=concurrency, rps=rps)
        self.write = self.design.write_graph(self.store, summarizer=self.summarizer)
        self.kmax = k
        self.users: list[str] = []
        self._path: Any = None
        self._path_kmax = 0

    def user_id_for(self, instance: Any) -> str:
        """The instance's ``question_id``: the namespace the sweep has always used."""
        return instance.question_id

    def feed(self, turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
        """The design's write graph on one session, namespace ``user_id``, level ``S``."""
        self.feed_sessions([(session_id, date, turns)], user_id)

    def feed_sessions(self, sessions: Sequence[tuple[str, str, list[dict[str, Any]]]], user_id: str) -> None:
        """Every session of a user in one write-graph invocation
        (:func:`graphs.memory.write_sessions`)."""
        from graphs.memory import write_sessions

        if user_id not in self.users:
            self.users.append(user_id)
        self._path = None
        write_sessions(self.write, user_id, list(sessions), self.S)

    def ask(self, text: str, user_id: str, thread_id: str) -> str:
        """The design's read graph: top ``k`` of the tiers read at ``S``."""
        return self.ask_many([Query(text, user_id, thread_id)])[0].response

    def ask_many(self, queries: Sequence[Query]) -> list[Answer]:
        """Each run of queries of one user and one tier setting through the read
        graph: retrieval once per query at the largest k (prefixes for smaller k),
        responses of identical contexts reused, concurrent calls where the responder
        has them (:class:`~evaluators.sweep.read_path.ReadPath`)."""
        from evaluators.sweep.read_path import ReadPath

        kmax = max([q.k for q in queries if q.k is not None] + [self.k, self.kmax])
        if self._path is None or self._path_kmax < kmax:
            self._path, self._path_kmax = ReadPath(self.design, self.store, self.respond, kmax), kmax
        path = self._path
        out: list[Answer] = []
        for (user, tiers), group in groupby(queries, key=lambda q: (q.user_id, q.tiers)):
            batch = list(group)
            tiers = tuple(tiers) if tiers is not None else tuple(self.design.tiers_for(self.S))
            texts = list(dict.fromkeys(q.text for q in batch))
            ks = sorted({q.k or self.k for q in batch})
            path.retrievals.prime(texts, tiers, user)
            latency_of = path.prefetch(texts, ks, tiers, user)
            for q in batch:
                k = q.k or self.k
                chunks, response, latency = path.read(q.text, k, tiers, user)
                latency = latency_of.get((q.text, k), latency)
                out.append(Answer(response, tuple(Recalled(c.id, c.tier, c.text) for c in chunks), latency))
        return out

    def forget_secret(self, secret: str, user_id: str) -> Any:
        """:func:`graphs.forget.forget` with ``mode`` in the user's namespace."""
        from graphs.forget import forget

        self._path = None
        return forget(self.store, secret, self.mode, namespace=user_id, S=self.S, summarizer=self.summarizer,
                      cache=self.cache)

    def forget_request(self, request: str, user_id: str) -> Any:
        """:func:`graphs.forget_request.forget_request` with ``mode`` in the user's namespace."""
        from graphs.forget_request import forget_request

        self._path = None
        if isinstance(self.resolver, str):
            from memkit.models import chat_model

            self.resolver = chat_model(self.resolver, max_tokens=16)
        return forget_request(self.store, request, self.mode, namespace=user_id, chat_model=self.resolver,
                              S=self.S, summarizer=self.summarizer, cache=self.cache)

    def leftover_vectors(self) -> tuple[Any, Any]:
        """The Chroma directory's leftover vectors (:func:`memkit.residue.vectors.chroma_leftover_vectors`)."""
        from evaluators.targets.base import NotApplicable
        from memkit.residue.vectors import chroma_leftover_vectors

        if self.store.path is None:
            raise NotApplicable("an in-memory store: chroma keeps its deleted vectors inside the process")
        return chroma_leftover_vectors(self.store.path), self.store.embedder

    def forget_user(self, user_id: str) -> Any:
        """Delete every chunk of the user's namespace (``crypto_shred``: and destroy its key)."""
        self._path = None
        if self.mode == "crypto_shred":
            from graphs.forget import forget_user

            return forget_user(self.store, user_id, self.mode, namespaces=[user_id], summarizer=self.summarizer,
                               cache=self.cache)
        return self.store.delete([c.id for c in self.store.chunks(namespace=user_id)])

    def fork(self, workdir: Path, mode: str | None = None) -> MemkitDesignTarget:
        """The users' chunks copied into a persistent store in ``workdir/chroma`` and
        the LLM cache into ``workdir/llm_cache.sqlite`` (so purging it measures what
        the mode removes without touching the run's cache); its forget runs ``mode``.
        The copy shares the response memo (identical contexts are answered once)."""
        from memkit.store.cache import LLMCache
        from memkit.store.tiered import TieredMemoryStore

        copy = TieredMemoryStore(workdir / "chroma", collection="memory", keystore=_keys(mode or self.mode, workdir))
        try:
            for user in self.users:
                self.store.copy_namespace(user, user, target=copy)
        except BaseException:
            copy.close()
            raise
        cache = None
        if self.cache is not None:
            shutil.copyfile(self.cache.path, workdir / "llm_cache.sqlite")
            cache = LLMCache(workdir / "llm_cache.sqlite")
        forked = MemkitDesignTarget(self.design, workdir, S=self.S, mode=mode or self.mode, model=self.model,
                                    summarizer_model=self.summarizer_model, k=self.k, cache=cache,
                                    name=self.name, resolver=self.resolver, _respond=self.respond, _store=copy)
        forked.kmax, forked.users = self.kmax, list(self.users)
        return forked

    def memories(self, user_id: str) -> list[Recalled]:
        """Every chunk of the user's namespace (raw turns and summaries at ``S``)."""
        return [Recalled(c.id, c.tier, c.text) for c in self.store.chunks(namespace=user_id)]

    def surfaces(self) -> list[Surface]:
        """The residue surfaces of the store, and of the LLM cache when there is one
        (module doc)."""
        names = [*CHROMA_SURFACES, *(("cache", "cache_disk") if self.cache is not None else ())]
        caches = [self.cache.path] if self.cache is not None else []
        return residue_surfaces(lambda: self.store, names, cache_paths=lambda: caches, check_embeddings=True)

    def deletion_steps(self) -> dict[str, Callable[[], Any]]:
        """``compact``: rewrite the Chroma directory."""
        return {"compact": self.store.compact}

    def usage(self) -> dict[str, int]:
        """LLM calls sent (cache misses) and cache hits of the target's cache."""
        if self.cache is None:
            return {"llm_calls": 0, "cache_hits": 0}
        return {"llm_calls": self.cache.misses, "cache_hits": self.cache.hits}

    def close(self) -> None:
        """Close the store; remove a temporary working directory."""
        self.store.close()  # idempotent; a closed copy is still scanned through its directory
        if self._cleanup and self.workdir is not None:
            self._cleanup = False
            shutil.rmtree(self.workdir, ignore_errors=True)


def _keys(mode: str, workdir: Path | None) -> Any:
    """The key store a ``crypto_shred`` memory seals with (``None`` for other modes)."""
    if mode != "crypto_shred":
        return None
    from memkit.store.keystore import KeyStore

    return KeyStore(workdir / "keys" if workdir is not None else None)


def build(design: Any = "study", *, workdir: str | Path | None = None, S: int = 1, mode: str = "full_purge",
          model: Any = "extractive", k: int = 3, resolver: Any = None) -> MemkitDesignTarget:
    """The ``memkit`` target (module doc); ``mode`` is the deletion mode, ``resolver``
    the chat model spec that judges forget requests (``None``: deterministic).

    Raises:
        ValueError: unknown design or deletion mode; a non-empty ``workdir``.
    """
    if workdir is not None:
        root = Path(workdir)
        if root.exists() and any(root.iterdir()):
            raise ValueError(f"memkit workdir {root} is not empty; give a new directory")
        root.mkdir(parents=True, exist_ok=True)
        cleanup = False
    else:
        root = Path(tempfile.mkdtemp(prefix="memkit-design-"))
        cleanup = True
    if mode == "none":
        mode = "full_purge"  # `memkit audit --mode none` skips the forget; the target still needs a mode
    return MemkitDesignTarget(design, root, S=S, mode=mode, model=model, k=k, cleanup=cleanup, resolver=resolver)
