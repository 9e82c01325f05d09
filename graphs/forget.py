"""The forget graph: deletion modes as conditional branches (docs/design.md, "Forget").

The study (arXiv 2606.10062, Setup and Reported results: deletion) compares five
deletion modes, a ladder where each rung adds one engineering decision:

=========================  ======================================================
mode                       steps (graph nodes, in order)
=========================  ======================================================
``none``                   -- (control)
``raw_only``               ``delete_raw``: delete the raw chunks containing the
                           secret (``find_containing`` on tier raw)
``raw_plus_resummarize``   ``delete_raw``, ``resummarize``: regenerate each affected
                           session's summaries from its remaining raw turns with the
                           prior summary as context (rolling summarization), so a
                           secret the prior summary holds can survive
``full_purge``             ``delete_raw``, ``cascade`` (every chunk derived from a
                           deleted raw chunk -- ``derived_from``, in any namespace --
                           and every chunk still containing the secret),
                           ``purge_caches``, ``compact``
``tombstone_redaction``    ``redact`` (the secret replaced in place in every tier,
                           re-embedded), ``tombstone`` (audit record: salted hash,
                           never the secret), ``purge_caches``, ``compact``
``crypto_shred``           ``delete_raw``, ``cascade``, ``purge_caches``, ``shred_key``
                           (the rest re-sealed under a new key, the old destroyed:
                           :mod:`memkit.store.keystore`; not in :data:`STUDY_MODES`)
=========================  ======================================================

:func:`build_forget_graph` compiles a LangGraph whose entry routes on ``mode`` with
conditional edges and whose every node routes to the next step of its mode
(:data:`LADDER` is the single source of both). :func:`forget` runs the same steps
without graph overhead. Both return what changed (:class:`ForgetResult`).

Matching is :mod:`memkit.scan.matching` (every spelling of the secret: normal forms, case,
any separator, JSON escapes), the same matcher
:meth:`~memkit.store.tiered.TieredMemoryStore.redact`, the LLM cache and the residue scanner
use.

A forget finishes or refuses before it changes anything: the modes that compact
check :meth:`~memkit.store.tiered.TieredMemoryStore.compaction_blocker` first (a store
behind a chroma server cannot be compacted by memkit) and raise
:class:`~memkit.store.tiered.StoreError` with the store untouched, unless
``unverified_ok=True``, which runs every step the API allows and lists the disk
surfaces as unverified. After its steps, every mode but ``none`` re-reads the store
and caches and reports which surfaces it verified clean, which still hold copies,
which compaction rewrote, and which it could not verify (:class:`ForgetResult`).

The graph state holds the secret: do not compile it with a checkpointer, or the
checkpoint database becomes one more place the secret lives.

Why this module is long: the forget graph's steps for both scopes (one secret's
ladder and the user-scope ladder) share one plan, one context and one verification,
so that every mode says the same thing about what it verified; the store's own
primitives and compaction live in :mod:`memkit.store.tiered` and :mod:`memkit.store.compaction`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from graphs.forget_result import ForgetResult
from graphs.memory import summarize_session
from graphs.nodes import Summarizer, check_level, make_summarizer
from memkit.scan.matching import matcher
from memkit.store.cache import contains_secret
from memkit.store.langgraph import NAMESPACE_SEPARATOR, chunk_namespace
from memkit.store.tiered import TIERS, StoreError, TieredMemoryStore

__all__ = ["DELETION_MODES", "LADDER", "MEMORIES", "STUDY_MODES", "USER_LADDER", "ForgetResult", "ForgetState",
           "build_forget_graph", "forget", "forget_strings", "forget_user", "owner_rule", "user_namespaces"]

DELETION_MODES = ("none", "raw_only", "raw_plus_resummarize", "full_purge", "tombstone_redaction", "crypto_shred")
"""Deletion modes in ladder order (docs/design.md, "Vocabulary")."""

STUDY_MODES = DELETION_MODES[:5]
"""The study's five modes: a sweep's default (a default run keeps its identity)."""

LADDER: dict[str, tuple[str, ...]] = {
    "none": (),
    "raw_only": ("delete_raw",),
    "raw_plus_resummarize": ("delete_raw", "resummarize"),
    "full_purge": ("delete_raw", "cascade", "purge_caches", "compact"),
    "tombstone_redaction": ("redact", "tombstone", "purge_caches", "compact"),
    "crypto_shred": ("delete_raw", "cascade", "purge_caches", "shred_key"),
}
"""The steps each deletion mode runs, in order."""


class ForgetState(TypedDict, total=False):
    """State of the forget graph. Input: ``secret``, ``mode``, ``namespace``, ``S``
    (summary level for ``raw_plus_resummarize``; ``None`` -> read from the session's
    summary chunks). Output: ``result`` (a :class:`ForgetResult`)."""

    secret: str
    mode: str
    namespace: str | None
    S: int | None
    unverified_ok: bool
    plan: list[str]
    deleted_raw_ids: list[str]
    redacted_ids: list[str]
    result: ForgetResult
    user_id: str
    namespaces: list[str | tuple[str, ...]]
    fingerprints: list[str]
    touched_namespaces: list[str]


# --------------------------------------------------------------------------- steps


@dataclass
class _Context:
    store: TieredMemoryStore
    summarizer: Summarizer
    caches: Sequence[Any]


def _by_tier(store: TieredMemoryStore, chunks: Sequence[Any], ids: Sequence[str]) -> dict[str, list[str]]:
    tier_of = {c.id: c.tier for c in chunks}
    out: dict[str, list[str]] = {t: [] for t in TIERS}
    for i in ids:
        out.setdefault(tier_of.get(i, "raw"), []).append(i)
    return out


def _merge(into: dict[str, list[str]], more: dict[str, list[str]]) -> None:
    for tier, ids in more.items():
        into.setdefault(tier, []).extend(i for i in ids if i not in into.get(tier, []))


def _delete_raw(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    hits = ctx.store.find_containing(
        state["secret"], namespace=state.get("namespace"), tiers=["raw"], normalized=True
    )
    deleted = ctx.store.delete([c.id for c in hits])
    _merge(result.deleted, _by_tier(ctx.store, hits, deleted))
    result.affected_sessions = sorted({c.session_id for c in hits if c.id in set(deleted)})
    return {"deleted_raw_ids": list(deleted), "touched_namespaces": _touched(state, hits)}


def _touched(state: ForgetState, chunks: Sequence[Any]) -> list[str]:
    """The namespaces a forget deleted from so far (``crypto_shred`` rotates their keys)."""
    return sorted({*state.get("touched_namespaces", []), *(c.namespace for c in chunks)})


def _resummarize(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    ns = state.get("namespace")
    for session_id in result.affected_sessions:
        prior = sorted(ctx.store.chunks(namespace=ns, tiers=["summary"], session_id=session_id),
                       key=lambda c: (int(c.extra.get("index", 0)), c.id))
        S = state.get("S")
        if S is None:
            levels = {int(c.extra["S"]) for c in prior if "S" in c.extra}
            S = max(levels) if levels else 0
        if check_level(S) == 0:
            continue
        raw = sorted(ctx.store.chunks(namespace=ns, tiers=["raw"], session_id=session_id),
                     key=lambda c: c.turn_index)
        anchor = (raw or prior)[0] if (raw or prior) else None
        if anchor is None:
            continue
        removed = ctx.store.delete([c.id for c in prior])
        _merge(result.deleted, {"summary": list(removed)})
        new_ids = summarize_session(
            ctx.store, raw, S, ctx.summarizer, namespace=anchor.namespace, session_id=session_id,
            date=anchor.date, prior=[c.text for c in prior],
        )
        _merge(result.created, {"summary": list(new_ids)})
    return {}


def _cascade(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    ns = state.get("namespace")
    # provenance crosses namespaces: a shared ``profiles`` summary derived from the
    # user's deleted turn goes too
    derived = ctx.store.derived_from(state.get("deleted_raw_ids", []), namespace=None)
    containing = ctx.store.find_containing(state["secret"], namespace=ns, normalized=True)
    doomed = {c.id: c for c in [*derived, *containing]}
    deleted = ctx.store.delete(list(doomed))
    _merge(result.deleted, _by_tier(ctx.store, list(doomed.values()), deleted))
    return {"touched_namespaces": _touched(state, list(doomed.values()))}


def _purge_caches(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    result.cache_entries_purged += sum(int(c.purge(state["secret"])) for c in ctx.caches)
    # The shared embedder memoises recent texts in process memory: drop the secret's.
    from memkit.models.chat import embeddings

    if embeddings.cache_info().currsize:  # loaded in this process
        embeddings().forget(state["secret"])
    return {}


def _compact(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    report = ctx.store.compact()
    result.bytes_before, result.bytes_after = int(report.bytes_before), int(report.bytes_after)
    result.compaction_seconds = float(report.seconds)
    return {}


def _redacted(ctx: _Context, result: ForgetResult, changed: list[str]) -> dict[str, Any]:
    """Record the chunks a redaction changed (per tier, and the raw turns' sessions)."""
    chunks = ctx.store.get(changed)
    _merge(result.redacted, _by_tier(ctx.store, chunks, changed))
    result.affected_sessions = sorted({c.session_id for c in chunks if c.tier == "raw"})
    return {"redacted_ids": list(changed)}


def _redact(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    return _redacted(ctx, result, ctx.store.redact(state["secret"], namespace=state.get("namespace")))


def _shred_key(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    """Rotate the keys of the forget's namespace(s) and those it deleted from."""
    from memkit.store.keystore import rotate_keys

    ns = state.get("namespace")
    names = {c.namespace for c in ctx.store.chunks()} if ns is None else {ns}
    result.keys_destroyed += rotate_keys(ctx.store, names | set(state.get("touched_namespaces", [])))
    return {}


def _shred_user_keys(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    """Destroy the user's keys (namespaces stored joined), rotate those it deleted from."""
    from memkit.store.keystore import shred_keys

    mine: set[str] = set()
    shared: set[str] = set()
    for ns in state["namespaces"]:
        if isinstance(ns, str):
            mine.add(ns)
            continue
        # a label tuple is stored joined, so another owner's namespace can join to the same
        # string ("memories.u1" and ("memories", "u1")) and share its key: their chunks stay,
        # re-sealed under a new key, and only the old key is destroyed
        joined = NAMESPACE_SEPARATOR.join(ns)
        others = any(chunk_namespace(c) != tuple(ns) for c in ctx.store.chunks(namespace=joined))
        (shared if others else mine).add(joined)
    mine -= shared
    n, ids = shred_keys(ctx.store, mine, (set(state.get("touched_namespaces", [])) | shared) - mine)
    result.keys_destroyed += n
    _merge(result.deleted, {"raw": list(ids)} if ids else {})
    return {}


def _tombstone(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    result.tombstone = ctx.store.tombstone(
        state["secret"], state.get("redacted_ids", []), namespace=state.get("namespace") or "*",
        reason="forget:tombstone_redaction",
    )
    return {}


# --------------------------------------------------------------------------- user scope


def _namespace_chunks(store: TieredMemoryStore, namespaces: Sequence[str | Sequence[str]],
                      tiers: Sequence[str] | None = None) -> list[Any]:
    """The chunks of ``namespaces``: a string is a memkit namespace as stored (every
    chunk under it); a tuple is a namespace's labels (the chunks whose
    :func:`~memkit.store.langgraph.chunk_namespace` equals it exactly)."""
    out: dict[str, Any] = {}
    for ns in namespaces:
        if isinstance(ns, str):
            out.update((c.id, c) for c in store.chunks(namespace=ns, tiers=tiers))
            continue
        labels = tuple(ns)
        for c in store.chunks(namespace=NAMESPACE_SEPARATOR.join(labels), tiers=tiers):
            if chunk_namespace(c) == labels:
                out[c.id] = c
    return list(out.values())


def _user_chunks(ctx: _Context, state: ForgetState, tiers: Sequence[str] | None = None) -> list[Any]:
    return _namespace_chunks(ctx.store, state["namespaces"], tiers)


def _delete_user_raw(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    hits = _user_chunks(ctx, state, ["raw"])
    deleted = ctx.store.delete([c.id for c in hits])
    _merge(result.deleted, _by_tier(ctx.store, hits, deleted))
    result.affected_sessions = sorted({c.session_id for c in hits if c.id in set(deleted)})
    return {"deleted_raw_ids": list(deleted)}


def _delete_user_all(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    """Every chunk of the user's namespaces (all tiers) and every chunk derived from
    them in any namespace (provenance, transitively)."""
    mine = _user_chunks(ctx, state)
    derived = ctx.store.derived_from([c.id for c in mine] + state.get("deleted_raw_ids", []), namespace=None)
    doomed = {c.id: c for c in [*mine, *derived]}
    deleted = ctx.store.delete(list(doomed))
    _merge(result.deleted, _by_tier(ctx.store, list(doomed.values()), deleted))
    return {"touched_namespaces": _touched(state, list(doomed.values()))}


def _purge_user_caches(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    fps = state.get("fingerprints") or []
    if fps:
        result.cache_entries_purged += sum(int(c.purge_any(fps)) for c in ctx.caches)
        from memkit.models.chat import embeddings

        if embeddings.cache_info().currsize:  # the shared embedder's memo of recent texts
            from memkit.scan.multi import MultiMatcher

            mm, emb = MultiMatcher(fps), embeddings()
            held = {fps[i] for t in list(getattr(emb, "_memo", {})) for i in mm.candidates(t)}
            for fp in sorted(held):
                emb.forget(fp)
    return {}


def _redact_user(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    changed: list[str] = []
    ids = [c.id for c in _user_chunks(ctx, state)]
    for fp in (state.get("fingerprints") or []) if ids else []:
        changed += [i for i in ctx.store.redact(fp, ids=ids) if i not in changed]
    return _redacted(ctx, result, changed)


def _tombstone_user(ctx: _Context, state: ForgetState, result: ForgetResult) -> dict[str, Any]:
    # one audit record for the user: the salted hash of the user id, never the data
    result.tombstone = ctx.store.tombstone(
        state["user_id"], state.get("redacted_ids", []), namespace="*",
        reason="forget_user:tombstone_redaction",
    )
    return {}


USER_LADDER: dict[str, tuple[str, ...]] = {
    "none": (),
    "raw_only": ("delete_user_raw",),
    "raw_plus_resummarize": ("delete_user_raw", "resummarize"),
    "full_purge": ("delete_user_raw", "delete_user_all", "purge_user_caches", "compact"),
    "tombstone_redaction": ("redact_user", "tombstone_user", "purge_user_caches", "compact"),
    "crypto_shred": ("delete_user_raw", "delete_user_all", "purge_user_caches", "shred_user_keys"),
}
"""The steps of each deletion mode at user scope (:func:`forget_user`): the user's
namespaces instead of the chunks holding one secret, the user's fingerprint
(:func:`memkit.residue.fingerprint.fingerprint`) instead of one secret for redaction and the
LLM-cache purge."""


_STEPS: dict[str, Callable[[_Context, ForgetState, ForgetResult], dict[str, Any]]] = {
    "delete_user_raw": _delete_user_raw,
    "delete_user_all": _delete_user_all,
    "purge_user_caches": _purge_user_caches,
    "redact_user": _redact_user,
    "tombstone_user": _tombstone_user,
    "delete_raw": _delete_raw,
    "resummarize": _resummarize,
    "cascade": _cascade,
    "purge_caches": _purge_caches,
    "compact": _compact,
    "redact": _redact,
    "tombstone": _tombstone,
    "shred_key": _shred_key,
    "shred_user_keys": _shred_user_keys,
}


DISK_SURFACES = ("disk_sqlite", "disk_wal", "disk_log", "disk_fulltext", "disk_hnsw", "disk_other")
"""Residue-scanner surfaces that only compaction cleans."""


def _plan(ctx: _Context, mode: str, unverified_ok: bool, *, user: bool = False) -> tuple[list[str], dict[str, str]]:
    """The steps ``mode`` will run here and the surfaces it cannot clean, decided
    before any change.

    Raises:
        StoreError: the mode compacts, the store cannot be compacted, and
            ``unverified_ok`` is False (nothing has been changed).
    """
    steps = list((USER_LADDER if user else LADDER)[mode])
    unverified: dict[str, str] = {}
    if mode == "crypto_shred" and getattr(ctx.store, "keystore", None) is None:
        raise StoreError("forget crypto_shred refused before changing anything: the store does not encrypt at "
                         "rest, so there is no key to destroy (TieredMemoryStore(..., keystore=KeyStore(dir)))")
    if "compact" in steps:
        reason = ctx.store.compaction_blocker()
        if reason is not None:
            if not unverified_ok:
                raise StoreError(
                    f"forget {mode} refused before changing anything: {reason}. Pass "
                    "unverified_ok=True to delete through the API anyway; the result then "
                    "lists the disk surfaces as unverified."
                )
            steps.remove("compact")
            unverified = dict.fromkeys(DISK_SURFACES, reason)
    for c in ctx.caches:
        path = getattr(c, "path", None)
        if path is not None and not os.path.isfile(path):
            raise StoreError(f"forget {mode} refused before changing anything: LLM cache {path} does not exist")
    return steps, unverified


def _files_keep_live_copies(result: ForgetResult, holders: str) -> None:
    """Compaction rebuilt the files from live records, and ``holders`` still hold copies:
    the rewritten files are not clean, so they are unverified with the reason."""
    why = f"compaction rebuilt the files from live records, and {holders} hold copies"
    result.unverified.update(dict.fromkeys(result.rewritten, why))
    result.rewritten = []


def _disk_status(state: ForgetState, result: ForgetResult) -> None:
    """The disk surfaces: rewritten by compaction, or unverified with the reason; never
    rewritten-and-clean while a live record (``remaining``) holds a copy."""
    if "compact" in result.steps:
        result.rewritten = list(DISK_SURFACES)
        live = sorted(k for k in result.remaining if k != "cache")  # the store's own records
        if live:
            _files_keep_live_copies(result, f"live records ({', '.join(live)})")
    elif state["mode"] == "crypto_shred" and not result.unverified:
        result.unverified = dict.fromkeys(DISK_SURFACES, "crypto_shred does not rewrite the files: old bytes stay, "
                                          "sealed under destroyed keys; vectors stay in clear")
    elif not result.unverified:
        result.unverified = dict.fromkeys(DISK_SURFACES, f"{state['mode']} does not compact the store")


def _verify_user(ctx: _Context, state: ForgetState, result: ForgetResult) -> None:
    """Re-read the whole store (every namespace) and the caches for any of the user's
    fingerprints; fill ``verified``/``remaining`` (chunks holding one, per surface)."""
    from memkit.scan.multi import MultiMatcher

    fps = state.get("fingerprints") or []
    counts = {"text_raw": 0, "text_summary": 0, "text_other": 0, "metadata": 0}
    if fps:
        mm = MultiMatcher(fps)
        for c in ctx.store.chunks():
            if mm.search(c.text):
                counts[f"text_{c.tier}" if c.tier in TIERS else "text_other"] += 1
            elif mm.contains([c.id, c.namespace, c.session_id, *c.source_ids,
                              *(str(k) for k in c.extra), *(str(v) for v in c.extra.values())]):
                counts["metadata"] += 1
        for surface, n in ctx.store.copies_in_other_collections(mm).items():
            counts[surface] += n
        if ctx.caches:
            counts["cache"] = sum(1 for cache in ctx.caches for entry in cache.entries()
                                  if mm.contains(list(entry)))
    left = len(_user_chunks(ctx, state))
    if state["mode"] in ("full_purge", "crypto_shred") and left:
        counts["text_other"] += left  # chunks of the user's namespaces (full_purge deletes them all)
    result.remaining = {k: v for k, v in counts.items() if v}
    result.verified = [k for k, v in counts.items() if not v]
    _disk_status(state, result)


def _verify(ctx: _Context, state: ForgetState, result: ForgetResult) -> None:
    """Re-read the store and the caches for the secret; fill ``verified``/``remaining``."""
    if state["mode"] == "none":
        return
    if state.get("user_id") is not None:
        _verify_user(ctx, state, result)
        return
    m = matcher(state["secret"])
    left = ctx.store.find_containing(state["secret"], namespace=state.get("namespace"), normalized=True)
    counts = {"text_raw": 0, "text_summary": 0, "text_other": 0, "metadata": 0}
    for c in left:
        if m.search(c.text):
            counts[f"text_{c.tier}" if c.tier in TIERS else "text_other"] += 1
        else:
            counts["metadata"] += 1
    for surface, n in ctx.store.copies_in_other_collections(state["secret"]).items():
        counts[surface] += n
    if state.get("namespace") is not None:
        # chunks of other namespaces derived from what this forget deleted or redacted
        # (provenance, transitively) that still hold the secret: the forget is not
        # verified while they do
        touched = [*state.get("deleted_raw_ids", []), *state.get("redacted_ids", []),
                   *(i for ids in result.deleted.values() for i in ids)]
        for c in ctx.store.derived_from(list(dict.fromkeys(touched)), namespace=None):
            if c.namespace != state["namespace"] and m.search(c.text):
                counts[f"text_{c.tier}" if c.tier in TIERS else "text_other"] += 1
    if ctx.caches:
        counts["cache"] = sum(
            1 for cache in ctx.caches for entry in cache.entries() if contains_secret(list(entry), state["secret"])
        )
    result.remaining = {k: v for k, v in counts.items() if v}
    result.verified = [k for k, v in counts.items() if not v]
    _disk_status(state, result)
    if result.rewritten and state.get("namespace") is not None and not result.remaining:
        others = [c for c in ctx.store.find_containing(state["secret"], namespace=None, normalized=True)
                  if c.namespace != state["namespace"]]
        if others:
            _files_keep_live_copies(result, f"{len(others)} records of other namespaces (outside this forget)")


def _check(secret: str, mode: str) -> None:
    if mode not in DELETION_MODES:
        raise ValueError(f"unknown deletion mode {mode!r}; use one of {DELETION_MODES}")
    if not isinstance(secret, str) or not secret.strip():
        raise ValueError("forget: the secret must be a non-empty string")


def _caches(cache: Any | Sequence[Any] | None) -> list[Any]:
    if cache is None:
        return []
    if isinstance(cache, (list, tuple)):
        return list(cache)
    return [cache]


# --------------------------------------------------------------------------- plain function


def forget(
    store: TieredMemoryStore,
    secret: str,
    mode: str,
    *,
    namespace: str | None,
    S: int | None = None,
    summarizer: Summarizer | None = None,
    cache: Any | Sequence[Any] | None = None,
    unverified_ok: bool = False,
) -> ForgetResult:
    """Forget ``secret`` from ``store`` with a deletion mode (the steps of :data:`LADDER`).

    Args:
        store: the memory (changed in place).
        secret: the string to forget (e.g. the canary value ``XQ7-VIOLET-3829``).
        mode: one of :data:`DELETION_MODES`.
        namespace: the user / instance to forget in (``None``: all namespaces).
        S: summary level used when re-summarizing (``None``: read from each session's
            summary chunks, ``extra["S"]``).
        summarizer: the summarizer ``raw_plus_resummarize`` uses (default extractive);
            pass the one the memory was written with.
        cache: an :class:`memkit.store.cache.LLMCache` or a list of them, purged by
            ``full_purge`` and ``tombstone_redaction``.
        unverified_ok: when the store cannot be compacted (behind a chroma server),
            run the other steps anyway and list the disk surfaces as unverified,
            instead of refusing.

    Returns:
        A :class:`ForgetResult`, with what was verified, rewritten and left unverified.

    Raises:
        ValueError: unknown mode or empty secret.
        StoreError: the mode needs compaction the store cannot do (a chroma server;
            processes that hold its directory open without memkit's lock) and
            ``unverified_ok`` is False; raised before anything is changed.
        StoreBusyError: other processes' operations held the store's directory past
            its lock timeout; raised before anything is changed, retryable.
    """
    _check(secret, mode)
    ctx = _Context(store, summarizer or make_summarizer("extractive"), _caches(cache))
    # A forget that compacts holds the store's directory exclusively from its plan to
    # its verification, so other processes' writes land after it (or fail retryably
    # with StoreBusyError, raised here before anything is changed).
    with store.exclusive(f"forget {mode}") if "compact" in LADDER[mode] or mode == "crypto_shred" else nullcontext():
        plan, unverified = _plan(ctx, mode, unverified_ok)
        state: ForgetState = {"secret": secret, "mode": mode, "namespace": namespace, "S": S}
        result = ForgetResult(mode=mode, namespace=namespace, unverified=unverified)
        for step in plan:
            state.update(_STEPS[step](ctx, state, result))  # type: ignore[typeddict-item]
            result.steps.append(step)
        _verify(ctx, state, result)
    return result


MEMORIES = "memories"
"""The first label of the conventional per-user LangGraph namespace ``("memories", user_id)``
(LangGraph's and langmem's examples)."""


def forget_strings(store: TieredMemoryStore, strings: Sequence[str], mode: str, **kw: Any) -> list[ForgetResult]:
    """:func:`forget` of each string in turn (``kw`` as :func:`forget`), one result each."""
    return [forget(store, s, mode, **kw) for s in strings]


def owner_rule(user_id: str, namespace_for: Callable[[str], Sequence[str]] | None = None
               ) -> Callable[[tuple[str, ...]], bool]:
    """Whether a namespace (labels) belongs to ``user_id`` (:func:`user_namespaces`)."""
    if namespace_for is None:
        return lambda labels: labels == (user_id,) or labels[:2] == (MEMORIES, user_id)
    prefix = namespace_for(user_id)
    prefix = (prefix,) if isinstance(prefix, str) else tuple(prefix)
    if not prefix or not all(isinstance(x, str) and x for x in prefix):
        raise ValueError(f"namespace_for({user_id!r}) must give a non-empty tuple of labels, got {prefix!r}")
    return lambda labels: labels[: len(prefix)] == prefix


def user_namespaces(
    store: TieredMemoryStore, user_id: str, *, namespace_for: Callable[[str], Sequence[str]] | None = None,
) -> list[tuple[str, ...]]:
    """The store's namespaces that belong to ``user_id``, as label tuples (sorted).

    Namespaces compare as tuples of labels (:func:`memkit.store.langgraph.chunk_namespace`:
    a memkit namespace such as a user id is one label; a
    :class:`~memkit.store.langgraph.MemkitStore` item's namespace is its LangGraph
    labels), label by label and whole: never as joined strings, never as a part or
    prefix of a label. Without ``namespace_for``, a namespace belongs to ``user_id`` when
    it **equals** ``(user_id,)`` (memkit's own writers: the namespace is the user id) or
    **starts with** ``("memories", user_id)`` (the LangGraph convention, e.g.
    ``("memories", user_id, "facts")``). With ``namespace_for``, when it equals or starts
    with ``namespace_for(user_id)`` (e.g. ``lambda u: (u, "memories")``). So user ``"7"``
    owns neither ``("orgs", "7", "notes")`` nor ``("17",)``, and user ``"alice"`` does
    not own ``("alice.smith@example.com",)`` or ``("memories", "alice.smith@example.com")``.

    Raises:
        ValueError: ``namespace_for`` gives no labels.
    """
    owns = owner_rule(user_id, namespace_for)
    return sorted({labels for c in store.chunks() if owns(labels := chunk_namespace(c))})


def forget_user(
    store: TieredMemoryStore,
    user_id: str,
    mode: str,
    *,
    fingerprints: Sequence[str] | None = None,
    turns: Sequence[Any] | None = None,
    others: Sequence[Any] = (),
    canaries: Sequence[str] = (),
    namespaces: Sequence[str | Sequence[str]] | None = None,
    namespace_for: Callable[[str], Sequence[str]] | None = None,
    S: int | None = None,
    summarizer: Summarizer | None = None,
    cache: Any | Sequence[Any] | None = None,
    unverified_ok: bool = False,
) -> ForgetResult:
    """Forget a *user* (:data:`USER_LADDER`): every chunk of the user's namespaces in
    every tier, what derives from them in any namespace, the LLM-cache entries whose
    prompts hold any of the user's fingerprints, then compaction -- as far as ``mode``
    goes (``raw_only``: the user's raw chunks only; ``tombstone_redaction``: every
    fingerprint redacted in the user's namespaces).

    Args:
        store: the memory (changed in place).
        user_id: the user.
        mode: one of :data:`DELETION_MODES`.
        fingerprints: the strings that identify the user's data
            (:func:`memkit.residue.fingerprint.fingerprint`); default: computed from
            ``turns`` (default: the texts of the user's raw chunks), ``others``
            (default: the raw chunks of every other namespace) and ``canaries``.
        namespaces: the user's namespaces: label tuples (the chunks whose namespace is
            exactly that tuple) or memkit namespace strings (every chunk stored under
            that string). Default: :func:`user_namespaces` ``(store, user_id,
            namespace_for=namespace_for)``: the namespace equal to ``(user_id,)`` and
            those starting with ``("memories", user_id)``, compared label by label, so
            no other user's namespace (``("orgs", "7", "notes")`` for user ``"7"``,
            ``"alice.smith@example.com"`` for user ``"alice"``) is ever included.
        namespace_for: ``user_id -> labels`` of the user's own namespace prefix when the
            store uses another layout (:func:`user_namespaces`).
        S, summarizer, cache, unverified_ok: as :func:`forget`.

    Returns:
        A :class:`ForgetResult` whose ``namespace`` is ``user_id`` and whose
        ``remaining`` counts chunks (any namespace) and cache entries that still hold a
        fingerprint, per surface.

    Raises:
        ValueError: unknown mode, empty user id. StoreError: as :func:`forget`.
    """
    from memkit.residue.fingerprint import fingerprint

    if mode not in DELETION_MODES:
        raise ValueError(f"unknown deletion mode {mode!r}; use one of {DELETION_MODES}")
    if not isinstance(user_id, str) or not user_id:
        raise ValueError("forget_user: user_id must be a non-empty string")
    ns: list[str | tuple[str, ...]] = (
        [n if isinstance(n, str) else tuple(n) for n in namespaces] if namespaces is not None
        else list(user_namespaces(store, user_id, namespace_for=namespace_for)))
    if fingerprints is None:
        if turns is None:
            mine = _namespace_chunks(store, ns, ["raw"])
            turns = [c.text for c in mine]
            ids = {c.id for c in mine}
            others = others or [c.text for c in store.chunks(tiers=["raw"]) if c.id not in ids]
        fingerprints = fingerprint(turns, others=others, canaries=canaries)
    ctx = _Context(store, summarizer or make_summarizer("extractive"), _caches(cache))
    plan, unverified = _plan(ctx, mode, unverified_ok, user=True)
    state: ForgetState = {"secret": "", "mode": mode, "namespace": None, "S": S, "user_id": user_id,
                          "namespaces": ns, "fingerprints": list(fingerprints)}
    result = ForgetResult(mode=mode, namespace=user_id, unverified=unverified)
    for step in plan:
        state.update(_STEPS[step](ctx, state, result))  # type: ignore[typeddict-item]
        result.steps.append(step)
    _verify(ctx, state, result)
    return result


# --------------------------------------------------------------------------- graph


def build_forget_graph(
    store: TieredMemoryStore,
    *,
    summarizer: Summarizer | None = None,
    caches: Any | Sequence[Any] | None = None,
) -> Any:
    """Compile the forget graph: ``START`` routes on ``mode`` to the first step of its
    :data:`LADDER` branch; each step routes to the next step of the mode, the last to ``END``.

    Args:
        store: the memory.
        summarizer: for ``raw_plus_resummarize`` (default extractive).
        caches: LLM cache(s) purged by ``full_purge`` / ``tombstone_redaction``.

    Returns:
        A compiled LangGraph taking :class:`ForgetState` input (``secret``, ``mode``,
        ``namespace``, optional ``S``; or, for the user-scope branch, ``user_id``,
        ``namespaces`` and ``fingerprints`` -- see :func:`forget_user`) and returning it
        with ``result``
        (:class:`ForgetResult`). An unknown mode raises ``ValueError`` at invoke.
    """
    ctx = _Context(store, summarizer or make_summarizer("extractive"), _caches(caches))

    def next_after(step: str | None) -> Callable[[ForgetState], str]:
        def route(state: ForgetState) -> str:
            steps = state["plan"]
            i = 0 if step is None else steps.index(step) + 1
            return steps[i] if i < len(steps) else "verify"

        return route

    def start(state: ForgetState) -> dict[str, Any]:
        user = state.get("user_id") is not None
        if user:  # the user-scope branch (USER_LADDER)
            if state.get("mode") not in DELETION_MODES:
                raise ValueError(f"unknown deletion mode {state.get('mode')!r}; use one of {DELETION_MODES}")
        else:
            _check(state.get("secret", ""), state.get("mode", ""))
        plan, unverified = _plan(ctx, state["mode"], bool(state.get("unverified_ok")), user=user)
        result = ForgetResult(mode=state["mode"], namespace=state.get("user_id") or state.get("namespace"),
                              unverified=unverified)
        return {"result": result, "plan": plan}

    def verify(state: ForgetState) -> dict[str, Any]:
        _verify(ctx, state, state["result"])
        return {"result": state["result"]}

    def node(step: str) -> Callable[[ForgetState], dict[str, Any]]:
        def run(state: ForgetState) -> dict[str, Any]:
            result = state["result"]
            update = _STEPS[step](ctx, state, result)
            result.steps.append(step)
            return {**update, "result": result}

        return run

    graph = StateGraph(ForgetState)
    graph.add_node("route", start)
    graph.add_node("verify", verify)
    graph.add_edge(START, "route")
    graph.add_edge("verify", END)
    successors: dict[str | None, set[str]] = {}
    for steps in [*LADDER.values(), *USER_LADDER.values()]:
        for plan in {steps, tuple(s for s in steps if s != "compact")}:
            chain = [None, *plan]
            for a, b in zip(chain, [*plan, "verify"], strict=True):
                successors.setdefault(a, set()).add(b)
    for step in _STEPS:
        graph.add_node(step, node(step))
    for step, targets in successors.items():
        source = "route" if step is None else step
        graph.add_conditional_edges(source, next_after(step), sorted(targets))
    return graph.compile(name="memkit-forget")
