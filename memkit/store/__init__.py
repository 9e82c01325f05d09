"""memkit's tiered memory store and what lives beside it.

:class:`TieredMemoryStore` (:mod:`memkit.store.tiered`) keeps raw and summary chunks
with provenance (:mod:`memkit.store.chunks`) in Chroma (:mod:`memkit.store.client`),
rewrites its directory so deleted text is gone (:mod:`memkit.store.compaction`), and
coordinates processes with a directory lock (:mod:`memkit.store.dirlock`).
:mod:`memkit.store.langgraph` is a LangGraph ``BaseStore`` over it,
:mod:`memkit.store.cache` the LLM cache, :mod:`memkit.store.tombstones` the audit
records of redactions, :mod:`memkit.store.keystore` the per-user data keys of a store
that encrypts at rest (``crypto_shred``).
"""

from memkit.store.tiered import (
    TIERS,
    Chunk,
    CompactionReport,
    StoreBusyError,
    StoreError,
    TieredMemoryStore,
    chunk_id,
    compact_directory,
    secret_regex,
)

__all__ = ["TIERS", "Chunk", "CompactionReport", "StoreBusyError", "StoreError", "TieredMemoryStore", "chunk_id",
           "compact_directory", "secret_regex"]
