"""Errors of memkit's store layer (:mod:`memkit.store.tiered`, :mod:`memkit.store.compaction`,
:mod:`memkit.store.dirlock`)."""

from __future__ import annotations

__all__ = ["StoreBusyError", "StoreError"]


class StoreError(RuntimeError):
    """A store operation that cannot run in the store's current configuration."""


class StoreBusyError(StoreError):
    """Another process holds the store's directory longer than the lock timeout
    (:mod:`memkit.store.dirlock`): a compaction runs while this operation waits, or
    operations of other processes run while a compaction waits. Nothing was changed;
    retrying later is safe.

    Attributes:
        holders: one line per process known to hold the directory (pid, program,
            since when), possibly empty where the OS does not say.
        retryable: always True.
    """

    retryable = True

    def __init__(self, message: str, holders: list[str] | None = None) -> None:
        super().__init__(message)
        self.holders = list(holders or [])
