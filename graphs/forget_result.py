"""What a forget changed, and what its re-read found: :class:`ForgetResult`.

Kept apart from the forget graph (:mod:`graphs.forget`) so that readers of a forget's
outcome (the agents' facade, the runner) need not load the graph.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from memkit.residue.report import ResidueReport, SurfaceResult
from memkit.store.tiered import TIERS

__all__ = ["ForgetResult"]


def _tiers() -> dict[str, list[str]]:
    return {t: [] for t in TIERS}


@dataclass
class ForgetResult:
    """What a forget changed.

    Attributes:
        mode: the deletion mode.
        namespace: the namespace forgotten in (``None``: every namespace).
        steps: the steps run, in order (:data:`LADDER`).
        deleted, redacted, created: chunk ids per tier (``{"raw": [...], "summary": [...]}``).
        affected_sessions: session ids whose raw chunks held the secret.
        cache_entries_purged: LLM-cache entries deleted (:meth:`memkit.store.cache.LLMCache.purge`).
        bytes_before, bytes_after: store size on disk around compaction (bytes), else ``None``.
        compaction_seconds: wall time of compaction, else ``None``.
        tombstone: the audit record of ``tombstone_redaction``, else ``None``.
        verified: surfaces re-read after the steps and found free of the secret, within
            ``namespace`` for the store's own chunks (the whole store when ``None``)
            (``text_raw``, ``text_summary``, ``text_other`` (the directory's other
            collections), ``metadata``, ``cache``; residue-scanner names).
        remaining: copies found by that re-read, per surface (absent when none).
        rewritten: disk surfaces compaction rebuilt from live records (old files shredded).
        unverified: surfaces neither verified nor rewritten, with the reason.
        keys_destroyed: data keys ``crypto_shred`` destroyed.
    """

    mode: str
    namespace: str | None
    steps: list[str] = field(default_factory=list)
    deleted: dict[str, list[str]] = field(default_factory=_tiers)
    redacted: dict[str, list[str]] = field(default_factory=_tiers)
    created: dict[str, list[str]] = field(default_factory=_tiers)
    affected_sessions: list[str] = field(default_factory=list)
    cache_entries_purged: int = 0
    bytes_before: int | None = None
    bytes_after: int | None = None
    compaction_seconds: float | None = None
    tombstone: dict[str, Any] | None = None
    verified: list[str] = field(default_factory=list)
    remaining: dict[str, int] = field(default_factory=dict)
    rewritten: list[str] = field(default_factory=list)
    unverified: dict[str, str] = field(default_factory=dict)
    keys_destroyed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        return asdict(self)

    @property
    def verification(self) -> ResidueReport:
        """The re-read after the steps as the one report of what is left where.

        Returns:
            A :class:`~memkit.residue.report.ResidueReport` over one secret (the one
            forgotten, shown masked): ``verified`` surfaces checked and clean,
            ``remaining`` ones checked with their copies, ``rewritten`` disk surfaces
            checked and clean (rebuilt from live records, old files shredded), and
            ``unverified`` ones not checked, with the reason (never clean).
        """
        results: dict[str, SurfaceResult] = {s: SurfaceResult(s) for s in self.verified}
        for s, n in self.remaining.items():
            results.setdefault(s, SurfaceResult(s)).hits["<forgotten>"] = [f"{s}: {n} copies"] * n
        for s in self.rewritten:
            results.setdefault(s, SurfaceResult(s, notes=["rebuilt from live records; old files shredded"]))
        for s, why in self.unverified.items():
            results[s] = SurfaceResult(s, status="not_checked", reason=why)
        if not results:  # nothing was re-read ("none" changes nothing and checks nothing)
            results["store"] = SurfaceResult("store", "not_checked", reason=f"{self.mode}: nothing was re-read")
        return ResidueReport.from_results(f"forget ({self.mode})", ["<forgotten>"], results)

    def changes(self) -> dict[str, Any]:
        """What the forget changed, as a run's ``forensics`` record keeps it: chunks
        ``deleted`` / ``redacted`` / ``created`` per tier (counts), the cache entries
        purged, the store's bytes around compaction (``crypto_shred``: keys destroyed)."""
        shred = {"keys_destroyed": self.keys_destroyed} if self.mode == "crypto_shred" else {}
        return {
            "deleted": {t: len(v) for t, v in self.deleted.items()},
            "redacted": {t: len(v) for t, v in self.redacted.items()},
            "created": {t: len(v) for t, v in self.created.items()},
            "cache_entries_purged": self.cache_entries_purged,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            **shred,
        }
