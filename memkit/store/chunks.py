"""Memory chunks: the data model of :mod:`memkit.store.tiered` and its Chroma encoding.

A memory is a set of *chunks* in two tiers, ``raw`` (a user turn as written) and
``summary`` (text derived from raw turns, carrying the ids of the raw chunks it came
from).

Storage layout (one chroma collection per store, cosine space, no chroma embedding
function: vectors always come from :func:`memkit.models.chat.embeddings`):

=============== ============================================================
chroma field    content
=============== ============================================================
id              :func:`chunk_id` (or any caller-chosen id)
document        chunk text
embedding       384-d unit vector of the text (all-MiniLM-L6-v2)
metadata        ``tier`` (str), ``namespace`` (str), ``session_id`` (str),
                ``turn_index`` (int), ``date`` (str), ``source_ids``
                (list[str], summaries only; omitted when empty because chroma
                rejects empty lists), plus :attr:`Chunk.extra` keys
=============== ============================================================

Provenance encoding: chroma >= 1.5 stores list-valued metadata natively (table
``embedding_metadata_array``) and filters it with ``{"source_ids": {"$contains": id}}``,
so :meth:`memkit.store.tiered.TieredMemoryStore.derived_from` is a chroma ``where`` query (``$or`` over
batches of ids), not a scan. A chroma server older than 1.5 behind
:meth:`memkit.store.tiered.TieredMemoryStore.http` cannot hold these chunks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memkit.scan.matching import matcher, redact_json, scalar_text

__all__ = ["TIERS", "Chunk", "chunk_id", "from_record", "holds", "order_key", "redact_chunk", "to_metadata",
           "top_k", "validate_chunk", "where_filter"]

TIERS: tuple[str, ...] = ("raw", "summary")
"""Chunk tiers (module doc): ``raw`` user turns and derived ``summary`` chunks."""

_RESERVED_KEYS = ("tier", "namespace", "session_id", "turn_index", "date", "source_ids")


@dataclass
class Chunk:
    """One memory chunk (module doc).

    Attributes:
        id: unique id in the store (see :func:`chunk_id`).
        text: the chunk text.
        tier: ``"raw"`` or ``"summary"`` (:data:`TIERS`).
        namespace: user or instance id; searches and deletions can be scoped to it.
        session_id: LongMemEval session id the chunk belongs to.
        turn_index: index of the turn in its session; ``-1`` for summaries.
        date: session date as given by the data (free text, e.g. ``2023/05/20 (Sat) 02:21``).
        source_ids: for summaries, the raw chunk ids the text was derived from.
        score: cosine similarity to the query, set on search results only.
        extra: additional scalar metadata (keys must not collide with the fields above).
    """

    id: str
    text: str
    tier: str
    namespace: str
    session_id: str
    turn_index: int
    date: str = ""
    source_ids: list[str] = field(default_factory=list)
    score: float | None = None
    extra: dict[str, str | int | float | bool] = field(default_factory=dict)


def chunk_id(namespace: str, session_id: str, tier: str, index: int, text: str) -> str:
    """Deterministic id of a chunk, stable across runs and machines.

    Args:
        namespace: user or instance id.
        session_id: session id.
        tier: ``"raw"`` or ``"summary"``.
        index: turn index for raw chunks; position of the summary chunk in its session.
        text: chunk text.

    Returns:
        ``"<tier>-<32 hex>"``: the first 128 bits of SHA-256 over the JSON list of the
        five arguments.

    Raises:
        ValueError: unknown tier.

    Note: the id is a one-way function of the text, so it is not the secret, but a party
    who holds the store and knows a secret's grammar and the surrounding text can test
    guesses against it (the same holds for the tombstone hash, which is why that one is
    salted and stretched with PBKDF2).
    """
    if tier not in TIERS:
        raise ValueError(f"chunk_id: tier must be one of {TIERS}, got {tier!r}")
    payload = json.dumps([namespace, session_id, tier, int(index), text], ensure_ascii=False)
    return f"{tier}-{hashlib.sha256(payload.encode('utf-8')).hexdigest()[:32]}"


def validate_chunk(chunk: Chunk, where: str) -> None:
    if not isinstance(chunk, Chunk):
        raise TypeError(f"{where}: expected Chunk, got {type(chunk).__name__}")
    if not isinstance(chunk.id, str) or not chunk.id:
        raise ValueError(f"{where}: field 'id' must be a non-empty string")
    if chunk.tier not in TIERS:
        raise ValueError(f"{where} (id {chunk.id!r}): field 'tier' must be one of {TIERS}, got {chunk.tier!r}")
    if not isinstance(chunk.namespace, str) or not chunk.namespace:
        raise ValueError(f"{where} (id {chunk.id!r}): field 'namespace' must be a non-empty string")
    if not isinstance(chunk.text, str):
        raise ValueError(f"{where} (id {chunk.id!r}): field 'text' must be a string")
    if not isinstance(chunk.session_id, str):
        raise ValueError(f"{where} (id {chunk.id!r}): field 'session_id' must be a string")
    if isinstance(chunk.turn_index, bool) or not isinstance(chunk.turn_index, (int, np.integer)):
        raise ValueError(f"{where} (id {chunk.id!r}): field 'turn_index' must be an int")
    if chunk.tier == "raw" and chunk.source_ids:
        raise ValueError(f"{where} (id {chunk.id!r}): raw chunks cannot have 'source_ids'")
    if any(not isinstance(s, str) or not s for s in chunk.source_ids):
        raise ValueError(f"{where} (id {chunk.id!r}): 'source_ids' must be non-empty strings")
    for key, value in chunk.extra.items():
        if key in _RESERVED_KEYS or key.startswith(("chroma:", "#", "$")):
            raise ValueError(f"{where} (id {chunk.id!r}): extra key {key!r} is reserved")
        if not isinstance(value, (str, int, float, bool)):
            raise ValueError(
                f"{where} (id {chunk.id!r}): extra[{key!r}] must be str/int/float/bool, "
                f"got {type(value).__name__}"
            )

def to_metadata(chunk: Chunk) -> dict[str, Any]:
    meta: dict[str, Any] = dict(chunk.extra)
    meta.update(
        tier=chunk.tier,
        namespace=chunk.namespace,
        session_id=chunk.session_id,
        turn_index=int(chunk.turn_index),
        date=chunk.date,
    )
    if chunk.source_ids:
        meta["source_ids"] = list(chunk.source_ids)
    return meta

def from_record(cid: str, doc: str | None, meta: dict[str, Any] | None) -> Chunk:
    meta = dict(meta or {})
    src = meta.pop("source_ids", None) or []
    return Chunk(
        id=cid,
        text=doc or "",
        tier=str(meta.pop("tier", "")),
        namespace=str(meta.pop("namespace", "")),
        session_id=str(meta.pop("session_id", "")),
        turn_index=int(meta.pop("turn_index", -1)),
        date=str(meta.pop("date", "")),
        source_ids=[str(s) for s in src],
        extra=meta,
    )

def where_filter(
    namespace: str | None = None,
    tiers: Sequence[str] | None = None,
    session_id: str | None = None,
    extra: Iterable[dict[str, Any]] = (),
) -> dict[str, Any] | None:
    conds: list[dict[str, Any]] = []
    if namespace is not None:
        conds.append({"namespace": namespace})
    if tiers is not None:
        tiers = list(tiers)
        bad = [t for t in tiers if t not in TIERS]
        if bad:
            raise ValueError(f"tiers must be drawn from {TIERS}, got {bad}")
        conds.append({"tier": {"$in": tiers}})
    if session_id is not None:
        conds.append({"session_id": session_id})
    conds.extend(extra)
    if not conds:
        return None
    return conds[0] if len(conds) == 1 else {"$and": conds}


def order_key(c: Chunk) -> tuple[Any, ...]:
    tier = TIERS.index(c.tier) if c.tier in TIERS else len(TIERS)
    return (c.namespace, tier, c.date, c.session_id, c.turn_index, c.id)


def redact_chunk(c: Chunk, secret: str, replacement: str, m: Any = None) -> bool:
    """Replace every copy of ``secret`` in chunk ``c`` (text, session id, date,
    ``source_ids``, metadata keys and values; a JSON document in a string value is
    redacted value by value) with ``replacement``, in place.

    Args:
        c: the chunk (changed in place).
        secret: the string to remove (every spelling, :mod:`memkit.scan.matching`).
        replacement: what replaces it.
        m: ``matcher(secret)``, if the caller has it.

    Returns:
        Whether ``c`` changed.

    Raises:
        ValueError: the chunk's id or namespace holds the secret (neither can be
            rewritten); ``c`` is then unchanged.
    """
    m = matcher(secret) if m is None else m

    def scrub(value: str) -> str:
        if value[:1] in "[{" and m.search(value):
            try:
                decoded = json.loads(value)
            except ValueError:
                return m.redact(value, replacement)
            return json.dumps(redact_json(decoded, secret, replacement), ensure_ascii=False)
        return m.redact(value, replacement)

    def scrub_value(v: Any) -> Any:
        if isinstance(v, str):
            return scrub(v)
        text = scalar_text(v)
        return replacement if text is not None and m.search(text) else v

    if m.search(c.id):
        raise ValueError(f"redact: the id of chunk {c.id!r} holds the secret and ids cannot be "
                         "rewritten; delete the chunk (full_purge) instead")
    new_text = m.redact(c.text, replacement)
    new_extra = {m.redact(k, replacement): scrub_value(v) for k, v in c.extra.items()}
    new_sources = [m.redact(x, replacement) for x in c.source_ids]
    new_fields = {f: m.redact(getattr(c, f), replacement) for f in ("session_id", "date", "namespace")}
    if new_text == c.text and new_extra == c.extra and new_sources == c.source_ids and all(
        new_fields[f] == getattr(c, f) for f in new_fields
    ):
        return False
    if new_fields["namespace"] != c.namespace:
        raise ValueError(f"redact: namespace of chunk {c.id!r} contains the secret")
    c.text, c.extra, c.source_ids = new_text, new_extra, new_sources
    c.session_id, c.date = new_fields["session_id"], new_fields["date"]
    return True


def holds(c: Chunk, m: Any) -> bool:
    """Whether chunk ``c`` holds a copy of matcher ``m``'s secret anywhere: text, id,
    namespace, session, date, ``source_ids``, metadata keys and values (numbers as
    written)."""
    fields = [c.text, c.id, c.namespace, c.session_id, c.date, *c.source_ids]
    for k, v in c.extra.items():
        fields += [k, scalar_text(v) or ""]
    return any(m.search(f) for f in fields)


def top_k(queries: np.ndarray, chunks: Sequence[Chunk], mat: np.ndarray, k: int) -> list[list[Chunk]]:
    """Exact cosine top-``k`` of each query: copies of ``chunks`` with ``score`` set.

    Args:
        queries: ``(n_queries, d)`` unit rows.
        chunks: the candidates, sorted by id (rows of ``mat``).
        mat: ``(len(chunks), d)`` unit rows.
        k: results per query.

    Returns:
        Per query, chunks by descending score (rounded to 1e-5, so float noise between
        two encodings of the same text cannot reorder ties), ties by ascending id.
    """
    out: list[list[Chunk]] = []
    for row in queries @ mat.T:
        row = np.round(row.astype(np.float64), 5)
        order = np.argsort(-row, kind="stable")[:k]
        out.append([
            Chunk(id=c.id, text=c.text, tier=c.tier, namespace=c.namespace, session_id=c.session_id,
                  turn_index=c.turn_index, date=c.date, source_ids=list(c.source_ids),
                  score=float(row[n]), extra=dict(c.extra))
            for n in order for c in (chunks[int(n)],)
        ])
    return out
