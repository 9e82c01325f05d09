"""A LangGraph ``BaseStore`` backed by memkit's :class:`~memkit.store.tiered.TieredMemoryStore`.

Any LangGraph graph compiled with ``store=MemkitStore(...)`` (``create_react_agent``,
a hand-written ``StateGraph``, langmem's memory tools) then keeps its long-term
memory in memkit's tiered Chroma store, where memkit can measure it: probe it for
extraction (:mod:`evaluators.audit`), forget with any deletion mode of
:mod:`graphs.forget` and scan the residue (:func:`memkit.residue.chroma.scan`). docs/design.md
(Layers): ``memkit`` never imports ``graphs``, so the forget convenience lives in
:func:`evaluators.audit.forget_in_store`; this module is pure storage.

Mapping (one chunk per item; :class:`~memkit.store.tiered.Chunk` fields):

================  ==============================================================
chunk field       content
================  ==============================================================
``id``            ``"lg-" + sha256(json([namespace labels, key]))[:32]`` (tier-free,
                  so a changed tier rule overwrites the item instead of copying it)
``namespace``     the LangGraph namespace joined with ``"."``: ``("memories",
                  "alice")`` -> ``"memories.alice"``. LangGraph forbids ``"."`` in
                  labels (``validate_op_namespace``; a dotted label is refused), so
                  the join is injective over the namespaces a store can hold.
``text``          the text that is embedded: the item's texts at the index
                  ``fields`` (LangGraph's ``get_text_at_path``), joined by newlines;
                  the canonical JSON of the value when nothing is indexed
``tier``          ``raw`` by default; a rule per namespace prefix picks another
``session_id``    the item key; ``turn_index`` 0 (``raw``) or -1 (``summary``)
``date``          creation time (ISO-8601 UTC)
``extra``         ``lg_key``, ``lg_value`` (the value as JSON), ``lg_namespace``
                  (the labels as a JSON list), ``lg_created``, ``lg_updated``
                  (ISO-8601), ``lg_seq`` (insertion order, int), ``lg_indexed``
                  (bool: the item takes part in vector ranking)
================  ==============================================================

Semantics follow :class:`langgraph.store.memory.InMemoryStore` (tests run the same
operation sequences against both): within one ``batch`` every read sees the state
before the batch's writes, and of several puts to one ``(namespace, key)`` the last
wins; a ``PutOp`` with ``value=None`` deletes; ``search`` with a query ranks the
indexed items under the prefix by cosine similarity (descending, ties by chunk id)
and, when fewer than ``limit`` are ranked, fills with unindexed ones (score
``None``), exactly as InMemoryStore does; without a query, items come in insertion
order (namespaces by their oldest live item, then items by creation), and the page
is ``[offset : offset + limit]``; ``filter`` is matched against the value (exact
values, nested dicts, lists, and the operators ``$eq $ne $gt $gte $lt $lte``);
``list_namespaces`` takes prefix/suffix conditions with ``"*"`` wildcards and
``max_depth``, sorted, then paged.

Differences from InMemoryStore (documented, not hidden):

* vectors always come from the tiered store's embedder (all-MiniLM-L6-v2 by
  default), so every item is searchable; ``index`` configures the ``fields`` only
  (an ``embed`` entry is rejected: give ``TieredMemoryStore(embedder=...)``);
* an item whose index yields several texts (several fields, or ``"a[*].b"``) is
  embedded as one text (the texts joined by newlines), where InMemoryStore keeps one
  vector per text and takes the best; rankings of such items can differ;
* values must be JSON-serializable (they are stored as JSON, as PostgresStore does);
* ``created_at`` is kept when an item is overwritten (PostgresStore's behaviour;
  InMemoryStore resets it);
* no TTL support (``supports_ttl = False``).

Forgetting and the index: deletion modes find a secret in chunk *text*, i.e. in the
indexed text. A secret in a value field outside the index ``fields`` is only reached
by ``tombstone_redaction`` (which also redacts string metadata, the stored value
included). Index every field that can hold user data (the default ``"$"`` indexes the
whole value).

Tier restriction: :meth:`MemkitStore.restrict_tiers` limits what ``get`` and
``search`` return to some tiers, for the Forgetting Residue Score per tier
(docs/metrics.md, FRS: the probes are re-run after the forget with retrieval
restricted to tier t).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from memkit.store.tiered import TIERS, Chunk, TieredMemoryStore

__all__ = ["NAMESPACE_SEPARATOR", "MemkitStore", "chunk_namespace", "item_chunk_id", "namespace_key"]

NAMESPACE_SEPARATOR = "."
"""Joins namespace labels into a memkit namespace (LangGraph labels never contain it)."""

_KEY, _VALUE, _CREATED, _UPDATED, _SEQ, _INDEXED, _LABELS = (
    "lg_key", "lg_value", "lg_created", "lg_updated", "lg_seq", "lg_indexed", "lg_namespace",
)
_FILTER_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def namespace_key(namespace: Sequence[str]) -> str:
    """The memkit namespace of a LangGraph namespace: labels joined with ``"."``.

    Args:
        namespace: a non-empty tuple of labels (no ``"."``, no NUL, not empty).

    Returns:
        e.g. ``"memories.alice"`` for ``("memories", "alice")``.

    Raises:
        langgraph.store.base.InvalidNamespaceError: an empty namespace or a bad label.
    """
    namespace = tuple(namespace)
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    validate_op_namespace(GetOp(namespace, ""))
    return NAMESPACE_SEPARATOR.join(namespace)


def chunk_namespace(chunk: Chunk) -> tuple[str, ...]:
    """The namespace of a stored chunk as a tuple of labels, the form namespaces are
    compared in (never the joined string, never a part of a label).

    A :class:`MemkitStore` item's namespace is its LangGraph labels: read from its
    ``lg_namespace`` metadata, or, for an item written before that metadata existed,
    the ``"."``-split of its namespace (exact: LangGraph labels never contain ``"."``).
    Any other chunk's namespace (memkit's own writers: a user id, ``"profiles"``) is one
    label, whatever characters it holds: ``"alice.smith@example.com"`` is
    ``("alice.smith@example.com",)``.
    """
    extra = chunk.extra
    if _KEY not in extra or _VALUE not in extra:
        return (chunk.namespace,)
    try:
        labels = json.loads(str(extra[_LABELS]))
    except (KeyError, ValueError):
        labels = None
    if isinstance(labels, list) and labels and all(isinstance(x, str) for x in labels):
        return tuple(labels)
    return tuple(chunk.namespace.split(NAMESPACE_SEPARATOR))


def item_chunk_id(namespace: Sequence[str], key: str) -> str:
    """Chunk id of the item ``(namespace, key)``: ``"lg-"`` + the first 128 bits (hex)
    of SHA-256 over the JSON list ``[list(namespace), key]``."""
    payload = json.dumps([list(namespace), key], ensure_ascii=False)
    return "lg-" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _matches_prefix(namespace: tuple[str, ...], pattern: Sequence[str], *, wildcards: bool = True) -> bool:
    """``namespace`` starts with ``pattern``. With ``wildcards`` (``list_namespaces``
    match conditions, tier rules) a ``"*"`` label in the pattern matches any label;
    without (a search's namespace prefix) every label is literal, as in LangGraph's
    ``InMemoryStore``, so a user whose id is ``"*"`` reads only their own items."""
    if len(namespace) < len(pattern):
        return False
    return all((wildcards and p == "*") or p == n for n, p in zip(namespace, pattern, strict=False))


def _matches_condition(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's ``MatchCondition`` (prefix or suffix, ``"*"`` wildcards)."""
    path = tuple(condition.path)
    if condition.match_type == "prefix":
        return _matches_prefix(namespace, path)
    if condition.match_type == "suffix":
        return _matches_prefix(tuple(reversed(namespace)), tuple(reversed(path)))
    raise ValueError(f"Unsupported match type: {condition.match_type!r}")


def _apply_operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if value is None:
        return False
    try:
        a, b = float(value), float(operand)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"filter operator {operator} compares numbers; got {value!r} and {operand!r}"
        ) from exc
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[operator]


def _matches_filter(value: Any, condition: Any) -> bool:
    """Whether a stored value satisfies one filter condition (JSONB-like, nested).

    A dict condition with ``$`` keys applies the operators (all must hold); another
    dict matches a dict value key by key; a list matches an equal-length list item by
    item; anything else must be equal.

    Raises:
        ValueError: an unknown ``$`` operator, or an order operator on non-numbers.
    """
    if isinstance(condition, dict):
        if any(k.startswith("$") for k in condition):
            bad = [k for k in condition if k not in _FILTER_OPS]
            if bad:
                raise ValueError(f"Unsupported operator: {bad[0]} (use one of {_FILTER_OPS})")
            return all(_apply_operator(value, op, arg) for op, arg in condition.items())
        if not isinstance(value, dict):
            return False
        return all(_matches_filter(value.get(k), v) for k, v in condition.items())
    if isinstance(condition, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(condition)
            and all(_matches_filter(v, c) for v, c in zip(value, condition, strict=True))
        )
    return bool(value == condition)


def _check_filter(condition: Any, where: str) -> None:
    """Raise ``ValueError`` for an unknown ``$`` operator anywhere in a filter."""
    if isinstance(condition, dict):
        for k, v in condition.items():
            if k.startswith("$") and k not in _FILTER_OPS:
                raise ValueError(f"{where}: Unsupported operator: {k} (use one of {_FILTER_OPS})")
            _check_filter(v, where)
    elif isinstance(condition, (list, tuple)):
        for v in condition:
            _check_filter(v, where)


def _now() -> datetime:
    return datetime.now(UTC)


class MemkitStore(BaseStore):
    """LangGraph ``BaseStore`` over a :class:`~memkit.store.tiered.TieredMemoryStore` (module doc).

    Args:
        store: the tiered store that holds the items (default: a new in-memory one);
            it may hold other memkit chunks too, which this view ignores.
        index: LangGraph ``IndexConfig``; only ``fields`` (default ``["$"]``, the whole
            value) and ``dims`` (checked against the embedder on first write) are used.
        tiers: tier per namespace prefix, e.g. ``{("memories", "*", "facts"):
            "summary"}``; ``"*"`` matches any label; the longest matching prefix wins
            (the first given on a tie). Namespaces matching no rule get ``default_tier``.
        default_tier: ``"raw"`` (default) or ``"summary"``.

    Raises:
        ValueError: an ``embed`` entry in ``index``, an unknown tier, an empty prefix.

    Example::

        from langgraph.graph import StateGraph
        store = MemkitStore(index={"fields": ["content"]})
        graph = builder.compile(store=store)  # nodes use runtime.store / get_store()
    """

    supports_ttl = False

    def __init__(
        self,
        store: TieredMemoryStore | None = None,
        *,
        index: IndexConfig | None = None,
        tiers: Mapping[Sequence[str], str] | None = None,
        default_tier: str = "raw",
    ) -> None:
        config = dict(index or {})
        if config.get("embed") is not None:
            raise ValueError(
                "MemkitStore: index['embed'] is not supported; vectors come from the "
                "TieredMemoryStore's embedder (pass TieredMemoryStore(embedder=...))"
            )
        unknown = sorted(set(config) - {"dims", "fields", "embed"})
        if unknown:
            raise ValueError(f"MemkitStore: unknown index config keys {unknown}")
        fields = list(config.get("fields") or ["$"])
        self.index_config: dict[str, Any] = {"fields": fields}
        if "dims" in config:
            self.index_config["dims"] = int(config["dims"])
        self._fields = [(p, p if p == "$" else tokenize_path(p)) for p in fields]
        if default_tier not in TIERS:
            raise ValueError(f"MemkitStore: default_tier must be one of {TIERS}, got {default_tier!r}")
        self.default_tier = default_tier
        self._tier_rules: list[tuple[tuple[str, ...], str]] = []
        for prefix, tier in (tiers or {}).items():
            prefix = (prefix,) if isinstance(prefix, str) else tuple(prefix)
            if not prefix:
                raise ValueError("MemkitStore: a tier rule needs a non-empty namespace prefix")
            if tier not in TIERS:
                raise ValueError(f"MemkitStore: tier for prefix {prefix} must be one of {TIERS}, got {tier!r}")
            self._tier_rules.append((prefix, tier))
        self._store = store if store is not None else TieredMemoryStore(collection="memkit-langgraph")
        self._read_tiers: tuple[str, ...] = TIERS
        self._lock = threading.RLock()
        self._last_seq = 0
        self._dims_checked = "dims" not in self.index_config

    # ------------------------------------------------------------------ introspection

    @property
    def tiered(self) -> TieredMemoryStore:
        """The underlying :class:`~memkit.store.tiered.TieredMemoryStore` (for forget / residue)."""
        return self._store

    def tier_for(self, namespace: Sequence[str]) -> str:
        """The tier items of ``namespace`` land in (longest matching rule, else default)."""
        namespace = tuple(namespace)
        best: tuple[int, str] | None = None
        for prefix, tier in self._tier_rules:
            if _matches_prefix(namespace, prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), tier)
        return best[1] if best else self.default_tier

    @property
    def read_tiers(self) -> tuple[str, ...]:
        """Tiers ``get`` and ``search`` currently return (all, unless restricted)."""
        return self._read_tiers

    @contextmanager
    def restrict_tiers(self, tiers: Sequence[str]) -> Iterator[MemkitStore]:
        """Within the block, ``get`` and ``search`` only see items of ``tiers``.

        Used for the per-tier Forgetting Residue Score (docs/metrics.md, FRS). The
        restriction is store-wide (all threads), so do not share the store with
        unrelated traffic while it is active.

        Raises:
            ValueError: an empty or unknown tier list.
        """
        tiers = tuple(tiers)
        bad = [t for t in tiers if t not in TIERS]
        if bad or not tiers:
            raise ValueError(f"restrict_tiers: tiers must be a non-empty subset of {TIERS}, got {list(tiers)}")
        with self._lock:
            before, self._read_tiers = self._read_tiers, tiers
        try:
            yield self
        finally:
            with self._lock:
                self._read_tiers = before

    def close(self) -> None:
        """Close the underlying tiered store."""
        self._store.close()

    def __repr__(self) -> str:
        return f"MemkitStore({self._store!r}, fields={self.index_config['fields']})"

    # ------------------------------------------------------------------ encoding

    def _seq(self) -> int:
        with self._lock:
            self._last_seq = max(time.time_ns(), self._last_seq + 1)
            return self._last_seq

    def _index_texts(self, value: dict[str, Any], index: Any) -> list[str]:
        if index is False:
            return []
        paths = self._fields if index is None else [(p, p if p == "$" else tokenize_path(p)) for p in index]
        texts: list[str] = []
        for _, tokens in paths:
            texts.extend(get_text_at_path(value, tokens))
        return texts

    def _to_chunk(self, op: PutOp, previous: Chunk | None, now: datetime) -> Chunk:
        value = op.value
        where = f"put({op.namespace}, {op.key!r})"
        if not isinstance(value, dict):
            raise TypeError(f"{where}: value must be a dict, got {type(value).__name__}")
        try:
            value_json = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{where}: value must be JSON-serializable ({exc})") from exc
        texts = self._index_texts(value, op.index)
        tier = self.tier_for(op.namespace)
        created = str(previous.extra.get(_CREATED)) if previous is not None else now.isoformat()
        return Chunk(
            id=item_chunk_id(op.namespace, op.key),
            text="\n".join(texts) if texts else json.dumps(value, sort_keys=True, ensure_ascii=False),
            tier=tier,
            namespace=namespace_key(op.namespace),
            session_id=op.key,
            turn_index=0 if tier == "raw" else -1,
            date=created,
            extra={
                _KEY: op.key,
                _VALUE: value_json,
                _LABELS: json.dumps(list(op.namespace), ensure_ascii=False),
                _CREATED: created,
                _UPDATED: now.isoformat(),
                _SEQ: int(previous.extra[_SEQ]) if previous is not None else self._seq(),
                _INDEXED: bool(texts),
            },
        )

    @staticmethod
    def _is_item(chunk: Chunk) -> bool:
        return _KEY in chunk.extra and _VALUE in chunk.extra

    @staticmethod
    def _namespace_of(chunk: Chunk) -> tuple[str, ...]:
        return chunk_namespace(chunk)

    def _item(self, chunk: Chunk) -> Item:
        return Item(
            value=json.loads(str(chunk.extra[_VALUE])),
            key=str(chunk.extra[_KEY]),
            namespace=self._namespace_of(chunk),
            created_at=datetime.fromisoformat(str(chunk.extra[_CREATED])),
            updated_at=datetime.fromisoformat(str(chunk.extra[_UPDATED])),
        )

    def _search_item(self, chunk: Chunk, score: float | None) -> SearchItem:
        item = self._item(chunk)
        return SearchItem(
            namespace=item.namespace, key=item.key, value=item.value,
            created_at=item.created_at, updated_at=item.updated_at, score=score,
        )

    # ------------------------------------------------------------------ batch

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``GetOp``/``SearchOp``/``ListNamespacesOp``/``PutOp`` operations.

        Reads see the state before the batch's puts; puts are applied last (one
        embedding call for all of them), the last put per ``(namespace, key)`` wins.

        Args:
            ops: the operations.

        Returns:
            One result per op, in order: ``Item | None`` (get), ``list[SearchItem]``
            (search), ``list[tuple[str, ...]]`` (list_namespaces), ``None`` (put).

        Raises:
            ValueError: an unknown op type or filter operator.
            langgraph.store.base.InvalidNamespaceError: a bad namespace label, or a put
                to the empty namespace.
            TypeError: a put whose value is not a JSON-serializable dict.
        """
        ops = list(ops)
        for op in ops:
            if not isinstance(op, (GetOp, SearchOp, ListNamespacesOp, PutOp)):
                raise ValueError(f"Unknown operation type: {type(op)}")
            validate_op_namespace(op)
            if isinstance(op, SearchOp) and op.filter:
                _check_filter(op.filter, f"search({op.namespace_prefix}) filter")
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        with self._lock:
            gets = [(i, op) for i, op in enumerate(ops) if isinstance(op, GetOp)]
            if gets:
                self._run_gets(gets, results)
            searches = [(i, op) for i, op in enumerate(ops) if isinstance(op, SearchOp)]
            if searches:
                self._run_searches(searches, results)
            lists = [(i, op) for i, op in enumerate(ops) if isinstance(op, ListNamespacesOp)]
            if lists:
                names = sorted({self._namespace_of(c) for c in self._store.chunks() if self._is_item(c)})
                for i, op in lists:
                    results[i] = self._list_namespaces(op, names)
            for op in ops:
                if isinstance(op, PutOp):
                    puts[(tuple(op.namespace), op.key)] = op
            if puts:
                self._apply_puts(list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (the event loop is not blocked)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _run_gets(self, gets: list[tuple[int, GetOp]], results: list[Result]) -> None:
        ids = [item_chunk_id(op.namespace, op.key) for _, op in gets]
        found = {c.id: c for c in self._store.get(list(dict.fromkeys(ids)))}
        for (i, _), cid in zip(gets, ids, strict=True):
            chunk = found.get(cid)
            if chunk is not None and self._is_item(chunk) and chunk.tier in self._read_tiers:
                results[i] = self._item(chunk)

    def _insertion_order(self, chunks: list[Chunk]) -> list[Chunk]:
        first: dict[str, int] = {}
        for c in chunks:
            seq = int(c.extra[_SEQ])
            first[c.namespace] = min(seq, first.get(c.namespace, seq))
        return sorted(chunks, key=lambda c: (first[c.namespace], c.namespace, int(c.extra[_SEQ]), c.id))

    def _candidates(self, chunks: Iterable[Chunk], op: SearchOp) -> list[Chunk]:
        prefix = tuple(op.namespace_prefix)
        out = []
        for c in chunks:
            if not self._is_item(c) or c.tier not in self._read_tiers:
                continue
            if not _matches_prefix(self._namespace_of(c), prefix, wildcards=False):
                continue
            if op.filter and not _matches_filter(json.loads(str(c.extra[_VALUE])), op.filter):
                continue
            out.append(c)
        return out

    def _run_searches(self, searches: list[tuple[int, SearchOp]], results: list[Result]) -> None:
        queries = list(dict.fromkeys(op.query for _, op in searches if op.query))
        ranked: dict[str, list[Chunk]] = {}
        if queries:
            total = self._store.count()
            lists = self._store.search_many(queries, total, tiers=self._read_tiers)
            ranked = dict(zip(queries, lists, strict=True))
        snapshot: list[Chunk] = []

        def in_order() -> list[Chunk]:  # every item, insertion order (read once per batch)
            if not snapshot:
                snapshot.extend(self._insertion_order(
                    [c for c in self._store.chunks(tiers=self._read_tiers) if self._is_item(c)]
                ))
            return snapshot

        for i, op in searches:
            if op.query:
                scored = [c for c in self._candidates(ranked[op.query], op) if c.extra.get(_INDEXED)]
                kept: list[tuple[float | None, Chunk]] = [
                    (c.score, c) for c in scored[op.offset : op.offset + op.limit]
                ]
                if len(kept) < op.limit:
                    scoreless = [c for c in self._candidates(in_order(), op) if not c.extra.get(_INDEXED)]
                    kept.extend((None, c) for c in scoreless[: op.limit - len(kept)])
                results[i] = [
                    self._search_item(c, None if s is None else float(s)) for s, c in kept
                ]
            else:
                page = self._candidates(in_order(), op)[op.offset : op.offset + op.limit]
                results[i] = [self._search_item(c, None) for c in page]

    @staticmethod
    def _list_namespaces(op: ListNamespacesOp, names: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        if op.match_conditions:
            names = [n for n in names if all(_matches_condition(m, n) for m in op.match_conditions)]
        if op.max_depth is not None:
            names = sorted({n[: op.max_depth] for n in names})
        return names[op.offset : op.offset + op.limit]

    def _check_dims(self) -> None:
        if self._dims_checked:
            return
        emb = self._store.embedder
        vec = emb.encode(["dims"]) if hasattr(emb, "encode") else [emb.embed_query("dims")]
        got = len(vec[0])
        want = self.index_config["dims"]
        if got != want:
            raise ValueError(f"MemkitStore: index dims={want} but the embedder gives {got}-d vectors")
        self._dims_checked = True

    def _apply_puts(self, puts: list[PutOp]) -> None:
        for op in puts:
            if not op.namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            if not isinstance(op.key, str):
                raise TypeError(f"put({op.namespace}, {op.key!r}): key must be a str")
        ids = [item_chunk_id(op.namespace, op.key) for op in puts]
        previous = {c.id: c for c in self._store.get(ids) if self._is_item(c)}
        doomed = [cid for op, cid in zip(puts, ids, strict=True) if op.value is None]
        now = _now()
        chunks = [
            self._to_chunk(op, previous.get(cid), now)
            for op, cid in zip(puts, ids, strict=True)
            if op.value is not None
        ]
        if chunks:
            self._check_dims()
        if doomed:
            self._store.delete(doomed)
        if chunks:
            self._store.add(chunks)
