"""Errors of memkit's store layer (:mod:`memkit.store`, :mod:`memkit.compaction`)."""

from __future__ import annotations

__all__ = ["StoreError"]


class StoreError(RuntimeError):
    """A store operation that cannot run in the store's current configuration."""
