"""Coverage records: what the residue scanner read of each file.

The rule (README, "What counts as a copy"): a verdict of *clean* requires that every
byte under every given path was read in every encoding it could hold. Each file the
scanner meets, and each member of a container, gets a :class:`FileCoverage`: its size,
the bytes read, the decoders applied, and what was left (a format memkit cannot open,
an unreadable file, a file that changed during the scan, a limit reached). A record
with anything left makes the scan's verdict *incomplete* unless a copy was found.
"""

from __future__ import annotations

import os
import stat
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["FileCoverage", "Snapshot", "coverage_summary"]


@dataclass
class FileCoverage:
    """What was read of one file or container member.

    Attributes:
        path: the file's path; a container member is ``container!member`` (its path
            inside the container), nested as deep as the containers are.
        surface: the residue surface its raw bytes were counted under.
        size: bytes the file (or member, as its container declares) holds.
        bytes_read: bytes read and matched.
        decoders: how they were read, in order: ``utf-8``, ``utf-16-le`` ...
            (:data:`memkit.scan.encodings.WIDE_ENCODINGS`), ``sqlite`` (rows through SQL),
            ``fulltext`` (FTS indexes queried), ``json``, ``gzip``/``zip``/... (a
            container opened).
        left: why it is not fully covered; empty when it is.
        same_as: for a second path to a file already read (a symlink, a hard link),
            the path it was read under; nothing else is recorded for it.
    """

    path: str
    surface: str
    size: int
    bytes_read: int = 0
    decoders: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    same_as: str | None = None

    @property
    def complete(self) -> bool:
        """Every byte read, nothing left."""
        return self.same_as is not None or (not self.left and self.bytes_read >= self.size)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the attributes plus ``complete``."""
        return {**asdict(self), "complete": self.complete}


@dataclass(frozen=True)
class Snapshot:
    """Size and modification time of a file, to tell whether it changed during a scan."""

    size: int
    mtime_ns: int
    ino: int

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> Snapshot | None:
        """The file's snapshot, or ``None`` when it cannot be stat'ed."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)


def is_regular(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (symlinks followed) is a regular file (not a FIFO, socket or
    device, which a scan must never open)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def coverage_summary(records: list[FileCoverage]) -> str:
    """One line: files read, members, bytes read of bytes held, encodings, and how many
    were not fully covered."""
    if not records:
        return "coverage: no files read"
    files = [r for r in records if r.same_as is None]
    members = sum(1 for r in files if "!" in r.path)
    size = sum(r.size for r in files)
    read = sum(min(r.bytes_read, r.size) for r in files)
    encodings = sorted({d.removesuffix("-le").removesuffix("-be") for r in files for d in r.decoders
                        if d.startswith("utf")})
    missing = [r for r in records if not r.complete]
    line = (f"coverage: {len(files) - members} files"
            + (f" + {members} container members" if members else "")
            + f", {_human(read)} of {_human(size)} read"
            + (f" as {'/'.join(encodings)}" if encodings else ""))
    if missing:
        line += f"; {len(missing)} not fully checked (see unchecked)"
    else:
        line += "; every byte covered"
    return line
