"""What forgetting needs from the tiered store: finding the chunks that hold a secret,
tracing what was derived from them, redacting and tombstoning them, and copying a
namespace into another store.

:class:`StoreEdits` holds these operations; :class:`memkit.store.tiered.TieredMemoryStore`
inherits them (they use its reads, writes and locks).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

import memkit  # noqa: F401  (sets telemetry/offline environment before chromadb loads)
from memkit.scan.matching import matcher
from memkit.store.chunks import (
    TIERS,
    Chunk,
    holds,
    order_key,
    redact_chunk,
    where_filter,
)
from memkit.store.client import (
    copies_in_collections,
    locked,
)
from memkit.store.tombstones import hash_secret, tombstone_record

__all__ = ["StoreEdits"]

TOMBSTONE_SUFFIX = "-tombstones"
"""The tombstone collection's name: the store's collection name plus this."""
_DERIVED_BATCH = 100


class StoreEdits:
    """The forget-side operations of :class:`~memkit.store.tiered.TieredMemoryStore`
    (module doc)."""

    def find_containing(
        self,
        text: str,
        *,
        namespace: str | None = None,
        tiers: Sequence[str] | None = None,
        normalized: bool = False,
    ) -> list[Chunk]:
        """Chunks whose text contains ``text``.

        Args:
            text: substring to look for (exact, case-sensitive).
            namespace: restrict to one namespace.
            tiers: restrict to these tiers.
            normalized: match every spelling of ``text`` as a secret
                (:mod:`memkit.scan.matching`: normal forms, case, separators, escapes).

        Returns:
            Matching chunks in :meth:`chunks` order.

        Raises:
            ValueError: empty ``text``.
        """
        if not text:
            raise ValueError("find_containing: text must be non-empty")
        m = matcher(text) if normalized else None
        out = []
        for c in self.chunks(namespace=namespace, tiers=tiers):
            if text in c.text or (m is not None and holds(c, m)):
                out.append(c)
        return out


    @locked
    def copies_in_other_collections(self, secret: Any) -> dict[str, int]:
        """Records of the directory's other collections (not this store's chunks or
        tombstones: another memory layer's, a user's) whose document or metadata holds
        ``secret`` in any spelling (a string, or a matcher with ``search(text)``, e.g. a
        :class:`~memkit.scan.multi.MultiMatcher` of a user's fingerprints):
        ``{"text_other": n, "metadata": n}``. A forget does not touch them, so it must
        not call the store clean while they hold copies.
        """
        mine = {self.collection_name, self.collection_name + TOMBSTONE_SUFFIX}
        return copies_in_collections([c for c in self.own_collections() if c.name not in mine], secret)

    @locked
    def derived_from(
        self,
        raw_ids: Sequence[str],
        *,
        namespace: str | None = None,
        transitive: bool = True,
    ) -> list[Chunk]:
        """Chunks whose ``source_ids`` include any of ``raw_ids`` (provenance cascade).

        Args:
            raw_ids: ids of the chunks to cascade from.
            namespace: restrict to one namespace.
            transitive: also follow chunks derived from derived chunks.

        Returns:
            The derived chunks (excluding ``raw_ids`` themselves) in :meth:`chunks` order.
        """
        frontier = list(dict.fromkeys(raw_ids))
        seen: set[str] = set(frontier)
        found: dict[str, Chunk] = {}
        while frontier:
            nxt: list[str] = []
            for s in range(0, len(frontier), _DERIVED_BATCH):
                part = frontier[s : s + _DERIVED_BATCH]
                ors = [{"source_ids": {"$contains": i}} for i in part]
                cond = ors[0] if len(ors) == 1 else {"$or": ors}
                chunks, _ = self._get(where=where_filter(namespace, None, None, [cond]))
                for c in chunks:
                    if c.id not in seen:
                        seen.add(c.id)
                        found[c.id] = c
                        nxt.append(c.id)
            frontier = nxt if transitive else []
        return sorted(found.values(), key=order_key)

    @locked
    def redact(
        self,
        secret: str,
        *,
        replacement: str = "[REDACTED]",
        namespace: str | None = None,
        tiers: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[str]:
        """Replace every copy of ``secret`` (any spelling, :mod:`memkit.scan.matching`) in
        chunk text, session id, date, ``source_ids`` and metadata (keys, string values,
        and numbers, which become ``replacement``) with ``replacement``, and re-embed the
        changed texts so each vector matches its new text. A metadata string that holds
        a JSON document (a LangGraph store value) is decoded, redacted value by value and
        re-serialised. ``namespace``, ``tiers`` and ``ids`` (chunk ids) restrict which
        chunks are rewritten (``None``: no restriction).

        Returns:
            Ids of the chunks changed, in :meth:`chunks` order.

        Raises:
            ValueError: empty secret, a replacement that itself contains the secret, or a
                chunk whose id or namespace holds it (neither can be rewritten; nothing is
                changed then).
        """
        m = matcher(secret)
        if m.search(replacement):
            raise ValueError("redact: the replacement contains the secret")
        only = None if ids is None else set(ids)
        changed = [c for c in self.chunks(namespace=namespace, tiers=tiers)
                   if (only is None or c.id in only) and redact_chunk(c, secret, replacement, m)]
        if changed:
            # chroma merges metadata on upsert: a renamed (redacted) key would stay, so
            # those records are rewritten whole.
            before = {c.id: set(c.extra) for c in self.get([c.id for c in changed])}
            rekeyed = [c.id for c in changed if set(c.extra) != before.get(c.id, set(c.extra))]
            if rekeyed:
                self._collection.delete(ids=rekeyed)
            self._put(changed, self._encode([c.text for c in changed]))
        return [c.id for c in changed]

    # ------------------------------------------------------------------ tombstones

    @locked
    def tombstone(
        self,
        secret: str,
        chunk_ids: Sequence[str],
        *,
        namespace: str,
        reason: str = "forget",
    ) -> dict[str, Any]:
        """Write an audit record of a deletion: salted hash of the secret, time, ids.

        The hash is PBKDF2-HMAC-SHA256 (200,000 iterations, :mod:`memkit.store.tombstones`)
        keyed with the store's random 16-byte salt (kept in the tombstone collection's
        metadata); the secret itself is never written. The record lives in the ``<collection>-tombstones``
        collection (document = the record as JSON, a 1-d placeholder vector).

        Args:
            secret: the forgotten string.
            chunk_ids: ids of the chunks deleted or redacted.
            namespace: namespace the deletion applied to.
            reason: free-text label (must not contain the secret).

        Returns:
            The record: ``id``, ``namespace``, ``reason``, ``time`` (ISO-8601 UTC),
            ``chunk_ids``, ``hash``, ``hash_alg``, ``iterations``.

        Raises:
            ValueError: empty secret, or ``reason``/``namespace``/ids containing it.
        """
        record = tombstone_record(secret, chunk_ids, namespace=namespace, reason=reason, salt=self._salt)
        self._tombs.add(
            ids=[record["id"]],
            documents=[json.dumps(record, sort_keys=True)],
            metadatas=[{"namespace": namespace, "time": record["time"], "reason": reason}],
            embeddings=np.ones((1, 1), dtype=np.float32),
        )
        return record

    @locked
    def tombstones(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Tombstone records (see :meth:`tombstone`), oldest first."""
        kw: dict[str, Any] = {"include": ["documents"]}
        if namespace is not None:
            kw["where"] = {"namespace": namespace}
        res = self._tombs.get(**kw)
        recs = [json.loads(d) for d in res["documents"]]
        return sorted(recs, key=lambda r: (r["time"], r["id"]))

    def matches_tombstone(self, secret: str, record: dict[str, Any]) -> bool:
        """Whether ``secret`` is the string a tombstone ``record`` was written for."""
        return hmac.compare_digest(hash_secret(secret, self._salt), str(record.get("hash", "")))

    # ------------------------------------------------------------------ copy / compact

    @locked
    def copy_namespace(
        self,
        src: str,
        dst: str,
        *,
        target: Any = None,
        overwrite: bool = False,
    ) -> int:
        """Copy every chunk of namespace ``src`` into namespace ``dst`` with the stored
        vectors (no re-embedding).

        Ids are kept when ``dst == src`` (copy into another store); otherwise each id
        becomes ``<tier>-<sha256(dst, old id)[:32]>`` and ``source_ids`` are remapped
        the same way, so provenance stays consistent inside the copy. Tombstones are not
        copied.

        Args:
            src: source namespace.
            dst: destination namespace.
            target: destination store (default: this store).
            overwrite: first delete whatever ``dst`` already holds in ``target``.

        Returns:
            Number of chunks copied.

        Raises:
            ValueError: ``src == dst`` within one store, or ``dst`` is not empty and
                ``overwrite`` is False.
        """
        target = self if target is None else target
        if target is self and src == dst:
            raise ValueError("copy_namespace: src and dst are the same namespace of the same store")
        existing = target.chunks(namespace=dst)
        if existing:
            if not overwrite:
                raise ValueError(
                    f"copy_namespace: namespace {dst!r} already holds {len(existing)} chunks; "
                    "pass overwrite=True to replace them"
                )
            target.delete([c.id for c in existing])
        chunks, vecs = self._get(where=where_filter(src), embeddings=True)
        if not chunks:
            return 0

        def remap(old: str) -> str:
            if dst == src:
                return old
            tier = old.split("-", 1)[0] if old.split("-", 1)[0] in TIERS else "chunk"
            return f"{tier}-{hashlib.sha256(json.dumps([dst, old]).encode()).hexdigest()[:32]}"

        for c in chunks:
            c.id = remap(c.id)
            c.namespace = dst
            c.source_ids = [remap(s) for s in c.source_ids]
        assert vecs is not None
        target._put(chunks, vecs)
        return len(chunks)
