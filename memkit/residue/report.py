"""The one report of what is left where: every surface, its copies of each secret,
and what could not be read.

:class:`ResidueReport` (one per scan: per surface the :class:`Hit` copies found and
the reasons it was not, or only partly, read; a coverage record per file) is what
:func:`memkit.residue.scan`, the file reader (:mod:`memkit.residue.files`), the
checkpoint reader (:mod:`memkit.residue.checkpoints`) and the PostgreSQL reader
(:mod:`memkit.postgres.database`) fill; :mod:`memkit.residue.values` records the copies
in stored values into it.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from memkit.residue.coverage import FileCoverage, coverage_summary
from memkit.scan.matching import SecretMatcher

__all__ = ["SpanIndex", "Status", "SurfaceResult", "mask_secrets", "mask_text", "render_masked", "PAGE", "SQLITE_MAGIC", "SURFACES", "Hit",
           "ResidueReport"]

SURFACES: tuple[str, ...] = (
    "text_raw",
    "text_summary",
    "text_other",
    "metadata",
    "stale_embedding",
    "stale_vector",
    "cache",
    "cache_disk",
    "side_sqlite",
    "side_disk",
    "side_fulltext",
    "side_json",
    "side_pickle",
    "side_file",
    "checkpoint",
    "disk_sqlite",
    "disk_wal",
    "disk_log",
    "disk_fulltext",
    "disk_hnsw",
    "disk_other",
)
"""Every surface a :class:`ResidueReport` counts (module doc)."""

SQLITE_MAGIC = b"SQLite format 3\x00"
_MASK = "[SECRET]"
PAGE = 2000
"""Rows read per SQL page."""



Status = Literal["checked", "not_checked", "n/a"]
"""A surface's status: read (in full, or in part: :attr:`SurfaceResult.partial`), not
read (never clean), or not kept by the target."""


def mask_secrets(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every spelling of every secret replaced by ``[SECRET]``
    (:func:`mask_text` per secret), so a report never repeats a secret."""
    from memkit.scan.matching import matcher

    for s in secrets:
        text = mask_text(text, matcher(s))
    return text


@dataclass
class SurfaceResult:
    """What one surface holds of some secrets: one entry of a :class:`ResidueReport`
    (``report[surface]``), and what a target's surface scanner returns.

    Attributes:
        surface: the surface's name (e.g. ``store_api``, ``pg_rows``, ``disk_pg_wal``).
        status: ``checked``; ``not_checked`` (could not be read: ``reason`` says why;
            never clean); ``n/a`` (the target keeps no such surface).
        hits: secret -> locations of its copies (secrets masked), one per copy.
        reason: why the surface is not checked or n/a.
        notes: what a reader should know (partly unread parts, compressed values).
        unattributed: copies of some old text that cannot be tied to one secret
            (a stale vector), by location.
        partial: the surface was checked but part of it could not be read (values
            stored compressed, pages not flushed): why. Its zeros are then not clean.
    """

    surface: str
    status: Status = "checked"
    hits: dict[str, list[str]] = field(default_factory=dict)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    unattributed: list[str] = field(default_factory=list)
    partial: str | None = None

    def add(self, secret: str, location: str, n: int = 1) -> None:
        """Record ``n`` copies of ``secret`` at ``location`` (masked here)."""
        if n > 0:
            self.hits.setdefault(secret, []).extend([mask_secrets(location, [secret])] * n)

    def copies(self, secret: str) -> int | None:
        """Copies of ``secret`` found; ``None`` when the surface is not checked or n/a."""
        return len(self.hits.get(secret, [])) if self.status == "checked" else None

    def holders(self, secrets: Sequence[str]) -> int | None:
        """How many of ``secrets`` have at least one copy here (``None``: not checked / n/a)."""
        if self.status != "checked":
            return None
        return sum(1 for s in secrets if self.hits.get(s))

    def to_dict(self, secrets: Sequence[str]) -> dict[str, Any]:
        """JSON-ready: status, reason, copies per secret index, holders, sample
        locations (masked), notes."""
        return {
            "surface": self.surface, "status": self.status, "reason": self.reason,
            "holders": self.holders(secrets),
            "copies": None if self.status != "checked" else [len(self.hits.get(s, [])) for s in secrets],
            "locations": [loc for s in secrets for loc in self.hits.get(s, [])[:5]],
            "notes": list(self.notes),
            "unattributed": [mask_secrets(u, secrets) for u in self.unattributed],
            "partial": self.partial,
        }



@dataclass(frozen=True)
class Hit:
    """One copy of the secret.

    Attributes:
        surface: one of :data:`SURFACES`.
        location: ``collection:id[:key]``, ``file@offset``, ``table:row:column``...
        kind: ``exact``, ``normalized`` or ``stale``.
        snippet: surrounding text with every occurrence replaced by ``[SECRET]``.
        secret_index: with ``scan(..., secrets=[...])``, the index of the secret this
            is a copy of (``None`` for one secret, and for ``stale`` hits).
    """

    surface: str
    location: str
    kind: str
    snippet: str
    secret_index: int | None = None


@dataclass
class ResidueReport:
    """Copies of a secret per surface (module doc).

    Attributes:
        target: what was scanned.
        surfaces: hits per surface; every surface of :data:`SURFACES` is a key.
        notes: what was skipped and why.
        unchecked: surfaces (wholly or partly) not checked, with the reasons.
        not_given: surfaces whose inputs the caller did not give (no ``cache_paths``:
            ``cache``/``cache_disk``; no ``also``: the ``side_*`` surfaces; no
            ``checkpointer``: ``checkpoint``). Their count is 0 because nothing was
            scanned, not because something was found clean; the verdict covers what
            was given, and the CLI and :meth:`to_dict` say which were not.
        coverage: one :class:`~memkit.residue.coverage.FileCoverage` per file and container
            member read (module doc); those not fully covered are in ``unchecked``.
        names: the surfaces this report counts, in order (default :data:`SURFACES`,
            a Chroma directory's; a PostgreSQL database's are
            :data:`memkit.postgres.database.PG_SURFACES`).
    """

    target: str
    surfaces: dict[str, list[Hit]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unchecked: dict[str, list[str]] = field(default_factory=dict)
    not_given: list[str] = field(default_factory=list)
    coverage: list[FileCoverage] = field(default_factory=list)
    names: tuple[str, ...] = SURFACES
    na: dict[str, str] = field(default_factory=dict)
    """Surfaces the scanned thing does not keep, with why (never counted as 0)."""
    partly_read: set[str] = field(default_factory=set)
    """Surfaces in :attr:`unchecked` that were read in part (their hits count; their
    zeros are not clean)."""
    secrets: list[str] = field(default_factory=list, repr=False)
    """The secrets scanned for, by index (kept in memory to answer :meth:`__getitem__`;
    never written by :meth:`to_dict`)."""

    def __post_init__(self) -> None:
        for s in self.names:
            self.surfaces.setdefault(s, [])

    def cover(self, record: FileCoverage) -> None:
        """Record what was read of one file; one not fully covered is listed in
        :attr:`unchecked` under its surface (``path: reasons``)."""
        self.coverage.append(record)
        if not record.complete:
            why = "; ".join(record.left) or f"{record.bytes_read} of {record.size} bytes read"
            self.skip(record.surface, f"{record.path}: {why}")

    secret_labels: list[str] = field(default_factory=list)
    """With ``scan(..., secrets=[...])``: each secret masked
    (:func:`memkit.scan.multi.mask_secret`), by index; empty for one secret."""

    def per_secret(self) -> list[dict[str, Any]]:
        """With several secrets: ``[{"index", "secret" (masked), "total", "counts"
        (per surface, non-zero only)}]`` for every secret, in the order given."""
        rows = [{"index": i, "secret": label, "total": 0, "counts": {}}
                for i, label in enumerate(self.secret_labels)]
        for surface in self.names:
            for h in self.surfaces.get(surface, []):
                if h.secret_index is not None and h.secret_index < len(rows):
                    row = rows[h.secret_index]
                    row["total"] += 1
                    row["counts"][surface] = row["counts"].get(surface, 0) + 1
        return rows

    def skip(self, surface: str, reason: str) -> None:
        """Record that ``surface`` was not (fully) checked, and why."""
        if surface not in self.names:
            raise ValueError(f"unknown surface {surface!r}")
        self.unchecked.setdefault(surface, [])
        if reason not in self.unchecked[surface]:
            self.unchecked[surface].append(reason)
        note = f"{surface} not checked: {reason}"
        if note not in self.notes:
            self.notes.append(note)

    def part(self) -> dict[str, Any]:
        """What this report found, as a plain dict for :meth:`add_part`: the report of
        one part of a scan (a worker's file, or a surface read while files were read)."""
        return {"surfaces": {s: h for s, h in self.surfaces.items() if h}, "notes": self.notes,
                "unchecked": self.unchecked, "coverage": self.coverage, "na": self.na,
                "partly_read": self.partly_read}

    def add_part(self, part: dict[str, Any]) -> None:
        """Add a part's findings (:meth:`part`) after what this report holds: hits and
        coverage in order, notes and reasons once each, as if this report had been
        written to directly."""
        for s, hits in part["surfaces"].items():
            self.surfaces.setdefault(s, []).extend(hits)
        for note in part["notes"]:
            if note not in self.notes:
                self.notes.append(note)
        for s, reasons in part["unchecked"].items():
            have = self.unchecked.setdefault(s, [])
            have.extend(r for r in reasons if r not in have)
        self.coverage.extend(part["coverage"])
        self.na.update(part.get("na", {}))
        self.partly_read |= part.get("partly_read", set())

    def counts(self) -> dict[str, int]:
        """Number of hits per surface, zeros included, in :attr:`names` order."""
        return {s: len(self.surfaces.get(s, [])) for s in self.names}

    @property
    def total(self) -> int:
        """Hits over all surfaces."""
        return sum(self.counts().values())

    @property
    def clean(self) -> bool:
        """True when every surface was checked, at least one was, and none holds a copy
        (a report that read nothing is never clean)."""
        return self.total == 0 and not self.unchecked and any(s not in self.na for s in self.names)

    @property
    def verdict(self) -> str:
        """``"clean"``, ``"copies remain"``, or ``"incomplete"`` (no copy found on the
        checked surfaces, but some were not checked, or none was)."""
        if self.total:
            return "copies remain"
        return "clean" if self.clean else "incomplete"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: target, clean, verdict, total, counts, unchecked,
        not_given, hits per surface, notes, coverage (one record per file) and its
        one-line summary."""
        return {
            "target": self.target,
            "clean": self.clean,
            "verdict": self.verdict,
            "total": self.total,
            "counts": self.counts(),
            "unchecked": {k: list(v) for k, v in self.unchecked.items()},
            "not_given": list(self.not_given),
            "surfaces": {s: [asdict(h) for h in self.surfaces.get(s, [])] for s in self.names},
            "notes": list(self.notes),
            "coverage_summary": coverage_summary(self.coverage),
            "coverage": [r.to_dict() for r in self.coverage],
            **({"per_secret": self.per_secret()} if self.secret_labels else {}),
        }

    def status(self, surface: str) -> str:
        """``checked``, ``partly_read``, ``not_checked`` or ``n/a``."""
        if surface in self.na:
            return "n/a"
        if surface not in self.unchecked:
            return "checked"
        return "partly_read" if surface in self.partly_read or self.surfaces.get(surface) else "not_checked"

    def __getitem__(self, surface: str) -> SurfaceResult:
        """One surface as a :class:`SurfaceResult`: its status, each secret's copies
        (by :attr:`secrets`), stale copies tied to no secret, the reasons.

        Raises:
            KeyError: a surface this report does not name.
        """
        if surface not in self.names:
            raise KeyError(surface)
        st = self.status(surface)
        reasons = "; ".join(self.unchecked.get(surface, [])) or None
        if st == "n/a":
            return SurfaceResult(surface, "n/a", reason=self.na[surface])
        if st == "not_checked":
            return SurfaceResult(surface, "not_checked", reason=reasons)
        out = SurfaceResult(surface, partial=reasons if st == "partly_read" else None)
        for h in self.surfaces.get(surface, []):
            if h.kind == "stale" and h.secret_index is None and len(self.secrets) != 1:
                out.unattributed.append(h.location)
            elif h.secret_index is not None and h.secret_index < len(self.secrets):
                out.hits.setdefault(self.secrets[h.secret_index], []).append(h.location)
            elif len(self.secrets) == 1:
                out.hits.setdefault(self.secrets[0], []).append(h.location)
        return out

    def results(self) -> dict[str, SurfaceResult]:
        """Every surface this report names, as :meth:`__getitem__` gives it."""
        return {s: self[s] for s in self.names}

    @classmethod
    def from_results(cls, target: str, secrets: Sequence[str], results: dict[str, SurfaceResult]) -> ResidueReport:
        """The report of a target's surfaces (each scanner's :class:`SurfaceResult`),
        so every surface of every target is read back the one way."""
        secrets = list(secrets)
        index = {s: i for i, s in enumerate(secrets)}
        report = cls(target=target, names=tuple(results), secrets=secrets)
        for name, res in results.items():
            report.notes += [f"{name}: {n}" for n in res.notes]
            if res.status == "n/a":
                report.na[name] = res.reason or "not kept"
                continue
            if res.status == "not_checked":
                report.unchecked[name] = [res.reason or "not checked"]
                continue
            if res.partial:
                report.unchecked[name] = [res.partial]
                report.partly_read.add(name)
            for s, locs in res.hits.items():
                report.surfaces[name] += [Hit(name, loc, "copy", "", index.get(s)) for loc in locs]
            report.surfaces[name] += [Hit(name, loc, "stale", "") for loc in res.unattributed]
        return report

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent)

    def add(self, hit: Hit) -> None:
        """Record a hit (its surface must be in :attr:`names`)."""
        if hit.surface not in self.names:
            raise ValueError(f"unknown surface {hit.surface!r}")
        self.surfaces.setdefault(hit.surface, []).append(hit)


# --------------------------------------------------------------------------- masking


class SpanIndex:
    """Copies sorted by start, so that the snippet of each of n copies reads only the
    copies near it (:meth:`near`): O(n log n) for all of them, not O(n^2)."""

    __slots__ = ("longest", "spans", "starts")

    def __init__(self, spans: Sequence[tuple[Any, ...]]) -> None:
        self.spans = sorted(spans, key=lambda x: x[0])
        self.starts = [x[0] for x in self.spans]
        self.longest = max((x[1] - x[0] for x in self.spans), default=0)

    def near(self, lo: int, hi: int) -> list[tuple[Any, ...]]:
        """The copies that may overlap ``[lo, hi)``: those starting in
        ``[lo - longest, hi)`` (a copy that overlaps starts there), in order."""
        return self.spans[bisect.bisect_left(self.starts, lo - self.longest):bisect.bisect_left(self.starts, hi)]


def render_masked(chars: str, start: int, spans: Sequence[tuple[int, int, str]], lo: int, hi: int) -> str:
    """Text of ``chars[lo:hi]`` (``start`` = offset of ``chars``) with spans masked."""
    out: list[str] = []
    i = lo
    for s, e, *_ in sorted(spans):
        s, e = max(s, lo), min(e, hi)
        if e <= i or s >= hi:
            continue
        if s > i:
            out.append(chars[i - start : s - start])
        out.append(_MASK)
        i = e
    if i < hi:
        out.append(chars[i - start : hi - start])
    return "".join(out).replace("\n", " ")


def mask_text(text: str, m: SecretMatcher) -> str:
    return m.text.sub(_MASK, text)
