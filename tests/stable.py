"""What two runs of one sweep must share: every record and metric except what
legitimately varies between runs (imported by the sweep, concurrency and Ray tests)."""

from __future__ import annotations

from typing import Any


def stable(obj: Any) -> Any:
    """``obj`` (records or metrics) without latencies, store sizes in bytes around
    compaction, and the number of byte-level copies on each forensic surface, which
    becomes whether a copy is there (chroma's page and log layout: how many stale
    copies SQLite's freed pages still hold depends on when chromadb's background work
    reuses them; two sequential runs differ too, e.g. 9 vs 10).

    Args:
        obj: a JSON-like value (dicts, lists, scalars).

    Returns:
        The same structure with those fields dropped or reduced.
    """
    if isinstance(obj, dict):
        return {
            k: ({s: n > 0 for s, n in v.items()} if k in ("counts", "copies") and isinstance(v, dict) else stable(v))
            for k, v in obj.items()
            if k not in ("latency_s", "forensic_total", "forensic_copies", "bytes_before", "bytes_after")
        }
    if isinstance(obj, list):
        return [stable(v) for v in obj]
    return obj
