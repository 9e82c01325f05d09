"""The plan of one scan's reading: the walk :meth:`memkit.residue.files.Scanner.path`
makes (same order, same links followed once, same records for what cannot be read),
with every regular file a :class:`Job` instead of a read, for :mod:`memkit.residue.pool`
to run in worker processes."""

from __future__ import annotations

import os
import stat as stat_mod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memkit.residue.containers import Budget, container_kind
from memkit.residue.coverage import FileCoverage

__all__ = ["Job", "family_name", "plan"]


@dataclass
class Job:
    """One file to read in a worker (:meth:`Scanner.file` on it)."""

    path: str
    label: str
    family: str
    surface: str | None
    size: int
    budget: int
    seen: dict[tuple[int, int], str] = field(default_factory=dict)
    pieces: list[tuple[int, int]] = field(default_factory=list)
    split: bool = False
    sql: bool = False
    """An SQLite file: its rows are read through SQL and decoded too (a few times the cost
    of its bytes alone)."""
    box: bool = False
    """A container: read as one job from the start (not in pieces, whose reading of the
    rest waits for the caller), its large members by every worker."""
    scanner: Any = None
    """The scanner's class (:class:`memkit.residue.files.Scanner` or a subclass)."""


class _Notes(list):  # type: ignore[type-arg]
    """A report's ``notes`` during planning: each note joins the plan in order."""

    def __init__(self, events: list[Any]) -> None:
        super().__init__()
        self._events = events

    def append(self, note: Any) -> None:
        self._events.append(("note", note))


class _PlanReport:
    def __init__(self, events: list[Any]) -> None:
        self.notes = _Notes(events)


def family_name(scanner: Any, family: Any) -> str:
    for name, fam in scanner.FAMILIES.items():
        if fam is family:
            return name
    raise ValueError("plan: a family other than DISK, SIDE, CACHE")


def plan(scanner: Any, top: Path, family: Any, label: str, budget: Budget) -> list[Any]:
    """The walk :meth:`Scanner.path` makes, as events: ``("cover", record)``,
    ``("note", text)``, ``("job", Job)``. Marks what it plans as seen on ``scanner``
    (a SQLite file's journals too, which its job reads)."""
    base = type(scanner)
    content_kind, journals = base.content_kind, base.journal_paths
    events: list[Any] = []
    fam = family_name(scanner, family)

    class Planner(base):  # type: ignore[valid-type,misc]
        def _cover(self, cov: FileCoverage) -> None:
            events.append(("cover", cov))

        def file(self, p: Path, label: str, family: Any, budget: Budget | None = None,
                 surface: str | None = None) -> None:
            st = self.claim(p, label, family, surface)
            if st is None:
                return
            job = Job(str(p), label, fam, surface, st.st_size, 0, scanner=base)
            try:
                with open(p, "rb") as fh:
                    head = fh.read(512)
            except OSError:
                head = b""
            job.box = container_kind(head, p.name) is not None
            if content_kind(head[:16], p.name) == "sqlite":  # its journals: read by its job
                job.sql = True
                for suf, side in journals(p):
                    try:
                        sst = os.stat(side)
                    except OSError:
                        continue
                    if stat_mod.S_ISREG(sst.st_mode):
                        skey = (sst.st_dev, sst.st_ino)
                        if skey in self.seen:
                            job.seen[skey] = self.seen[skey]
                        else:
                            self.seen[skey] = label + suf
            events.append(("job", job))

    planner = Planner(_PlanReport(events), scanner.m, scanner.limits, seen=scanner.seen,
                      skip_sql=scanner.skip_sql)
    if top.is_dir():
        planner._walk(top, label, family, set(), budget)
    else:
        planner._entry(top, label, family, set(), budget)
    return events
