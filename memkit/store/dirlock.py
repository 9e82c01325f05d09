"""Inter-process coordination of memkit handles on one Chroma persist directory.

Compaction (:mod:`memkit.store.compaction`) replaces a store's directory with a rebuilt
one. A chroma client that had the old directory open keeps reading the old
(shredded) files: its next read or write fails with SQLite's ``file is not a
database``, and a write it was making is lost. This module lets every memkit handle
on a directory agree with a compaction:

* **A reader/writer lock** in a sibling directory ``.<name>.memkit/`` (never inside
  the Chroma directory, which compaction swaps, and which another memory layer may
  own). Every operation of a :class:`memkit.store.tiered.TieredMemoryStore` on a persistent
  directory holds the lock *shared* for its duration (milliseconds); a compaction
  holds it *exclusive*. ``flock(2)`` locks on two files, ``gate`` and ``lock``: an
  operation passes the gate shared before taking ``lock`` shared, a compaction takes
  the gate exclusive first, so a stream of short operations cannot starve it (the
  classic writer-preference construction). The kernel drops a lock when its holder
  dies, so a ``kill -9`` never leaves the directory locked.
* **A generation number** (``generation``, 8 bytes, incremented by each compaction
  before it swaps the directory). A handle remembers the generation (and the
  directory's inode) its chroma client was opened on and, under the shared lock,
  reopens its client before an operation when either changed: no handle ever reads
  or writes a replaced directory.
* **Bounded waits.** Both sides wait at most ``timeout`` seconds (default 60,
  ``$MEMKIT_LOCK_TIMEOUT``) and then raise :class:`memkit.errors.StoreBusyError`
  naming the holders (pid, program, since when), with nothing changed, so the caller
  can retry: a write during a compaction lands after it or fails retryably, never
  silently.
* **Holders that are not memkit** (a plain chromadb client, another memory layer)
  take no lock. :func:`foreign_holders` finds processes with open descriptors on the
  directory's files that do not hold this lock's files open (``/proc/<pid>/fd``;
  Linux, and only the processes the caller may inspect: the caller's own, or all as
  root). Compaction refuses while there are any, unless forced.

POSIX only (``fcntl``); elsewhere the lock is a no-op (:data:`AVAILABLE` is False)
and compaction assumes no other process holds the directory.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from memkit.errors import StoreBusyError, StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["AVAILABLE", "DirectoryLock", "default_timeout", "foreign_holders", "lock_dir"]

AVAILABLE = fcntl is not None
"""Whether inter-process locking works on this OS."""


def default_timeout() -> float:
    """Seconds a lock waits before :class:`StoreBusyError`: ``$MEMKIT_LOCK_TIMEOUT``
    (default 60)."""
    raw = os.environ.get("MEMKIT_LOCK_TIMEOUT", "60")
    try:
        value = float(raw)
    except ValueError as exc:
        raise StoreError(f"MEMKIT_LOCK_TIMEOUT must be a number of seconds, got {raw!r}") from exc
    if value < 0:
        raise StoreError(f"MEMKIT_LOCK_TIMEOUT must be >= 0, got {raw!r}")
    return value


def lock_dir(path: Path) -> Path:
    """The coordination directory of Chroma directory ``path``: ``<parent>/.<name>.memkit``."""
    return path.parent / f".{path.name}.memkit"


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _process(pid: int) -> str:
    """``"pid N (program, running since T)"`` from ``/proc``, or ``"pid N"``."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: start time, clock ticks since boot
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))
        return f"pid {pid} ({comm}, running since {_utc(btime + ticks / os.sysconf('SC_CLK_TCK'))})"
    except (OSError, ValueError, IndexError, StopIteration):
        return f"pid {pid}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DirectoryLock:
    """The shared/exclusive lock and generation number of one Chroma directory
    (module doc), for one memkit handle.

    Shared holds are counted per handle and re-entrant per thread; an exclusive hold
    is re-entrant in its thread, and shared requests from that thread pass through
    it. Different handles (even in one process) hold independent ``flock`` locks.

    Args:
        path: the Chroma directory (resolved).
        timeout: seconds to wait for the lock (default :func:`default_timeout`).

    Raises:
        OSError: the coordination directory cannot be created (parent not writable).
    """

    def __init__(self, path: Path, timeout: float | None = None) -> None:
        self.path = path
        self.dir = lock_dir(path)
        self.timeout = default_timeout() if timeout is None else float(timeout)
        self.dir.mkdir(exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        self._gate = os.open(self.dir / "gate", flags, 0o666)
        self._lock = os.open(self.dir / "lock", flags, 0o666)
        self._gen = os.open(self.dir / "generation", flags, 0o666)
        self._cond = threading.Condition()
        self._shared = 0
        self._owner: int | None = None
        self._depth = 0
        self._local = threading.local()
        self._closed = False

    # ------------------------------------------------------------------ generation

    def generation(self) -> int:
        """The directory's generation (number of memkit compactions that swapped it)."""
        raw = os.pread(self._gen, 8, 0)
        return int.from_bytes(raw, "little") if len(raw) == 8 else 0

    def bump_generation(self) -> int:
        """Increment the generation (hold the lock exclusive); returns the new value."""
        n = self.generation() + 1
        os.pwrite(self._gen, n.to_bytes(8, "little"), 0)
        os.fsync(self._gen)
        return n

    # ------------------------------------------------------------------ locking

    def _flock(self, fd: int, op: int, deadline: float) -> bool:
        delay = 0.0005
        while True:
            try:
                fcntl.flock(fd, op | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                pass
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.05)

    def holders(self) -> list[str]:
        """Who holds the lock now: the exclusive holder (pid, since when, for what) from
        ``owner.json``, and every other process with an ``flock`` on it (``/proc/locks``)."""
        out: list[str] = []
        owner_pid = None
        try:
            rec = json.loads((self.dir / "owner.json").read_text())
            owner_pid = int(rec["pid"])
            if owner_pid != os.getpid() and _alive(owner_pid):
                out.append(f"{_process(owner_pid)} holds it exclusively for {rec.get('what', '?')} "
                           f"since {rec.get('since', '?')}")
        except (OSError, ValueError, KeyError, TypeError):
            pass
        inodes = set()
        for fd in (self._gate, self._lock):
            inodes.add(os.fstat(fd).st_ino)
        pids: set[int] = set()
        try:
            for line in Path("/proc/locks").read_text().splitlines():
                parts = line.split()
                if len(parts) < 6 or "->" in parts or parts[1] != "FLOCK":
                    continue
                ino = int(parts[5].rsplit(":", 1)[-1])
                if ino in inodes:
                    pids.add(int(parts[4]))
        except (OSError, ValueError):
            pass
        for pid in sorted(pids - {os.getpid(), owner_pid or -1}):
            out.append(f"{_process(pid)} holds it (an operation of a memkit store)")
        return out

    def _busy(self, want: str, extra: str = "") -> StoreBusyError:
        who = self.holders()
        named = "; ".join(who) if who else "no holder could be named on this OS"
        return StoreBusyError(
            f"{self.path}: could not take the {want} lock within {self.timeout:g} s ({named}). "
            f"Nothing was changed; retry later{extra}.", who,
        )

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the lock shared (an operation of a memkit handle).

        Raises:
            StoreBusyError: not granted within ``timeout`` (a compaction holds it).
        """
        me = threading.get_ident()
        depth = getattr(self._local, "depth", 0)
        if depth or self._owner == me or fcntl is None:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            return
        deadline = time.monotonic() + self.timeout
        with self._cond:
            while self._owner is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._busy("shared")
                self._cond.wait(left)
            if self._shared == 0:
                if not self._flock(self._gate, fcntl.LOCK_SH, deadline):
                    raise self._busy("shared")
                try:
                    if not self._flock(self._lock, fcntl.LOCK_SH, deadline):
                        raise self._busy("shared")
                finally:
                    fcntl.flock(self._gate, fcntl.LOCK_UN)
            self._shared += 1
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            with self._cond:
                self._shared -= 1
                if self._shared == 0 and not self._closed:
                    fcntl.flock(self._lock, fcntl.LOCK_UN)
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self, what: str = "compaction") -> Iterator[None]:
        """Hold the lock exclusive: every other memkit handle's operations wait.

        Args:
            what: recorded in ``owner.json`` for :meth:`holders` (e.g. ``"compaction"``).

        Raises:
            StoreBusyError: not granted within ``timeout`` (other processes' operations
                hold it shared); nothing was changed.
            StoreError: asked from inside an operation of the same thread.
        """
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
            else:
                if getattr(self._local, "depth", 0):
                    raise StoreError("exclusive lock requested inside an operation of the same store")
                deadline = time.monotonic() + self.timeout
                while self._owner is not None or self._shared:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise self._busy("exclusive", " (another thread of this process uses the store)")
                    self._cond.wait(left)
                if fcntl is not None:
                    if not self._flock(self._gate, fcntl.LOCK_EX, deadline):
                        raise self._busy("exclusive")
                    if not self._flock(self._lock, fcntl.LOCK_EX, deadline):
                        fcntl.flock(self._gate, fcntl.LOCK_UN)
                        raise self._busy("exclusive")
                self._owner, self._depth = me, 1
                try:
                    (self.dir / "owner.json").write_text(json.dumps(
                        {"pid": os.getpid(), "since": _utc(time.time()), "what": what}))
                except OSError:
                    pass
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    try:
                        (self.dir / "owner.json").unlink()
                    except OSError:
                        pass
                    if fcntl is not None and not self._closed:
                        fcntl.flock(self._lock, fcntl.LOCK_UN)
                        fcntl.flock(self._gate, fcntl.LOCK_UN)
                    self._owner = None
                    self._cond.notify_all()

    def close(self) -> None:
        """Close the lock's descriptors (dropping any lock held through them)."""
        if self._closed:
            return
        self._closed = True
        for fd in (self._gate, self._lock, self._gen):
            try:
                os.close(fd)
            except OSError:
                pass


def foreign_holders(path: Path) -> list[str]:
    """Processes other than this one with open descriptors on files of Chroma directory
    ``path`` that are not memkit handles (a memkit handle keeps its lock files,
    :func:`lock_dir`, open), one line each: pid, program, since when, files.

    Reads ``/proc/<pid>/fd`` (Linux); processes the caller may not inspect (another
    user's, unless root) are not seen. Returns ``[]`` where ``/proc`` is missing.
    Descriptors on already deleted files (a replaced directory's) are ignored.
    """
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return []
    root, ours = str(path), str(lock_dir(path))
    me = os.getpid()
    out: list[str] = []
    for entry in os.scandir(proc):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        fd_dir = f"/proc/{entry.name}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        files: set[str] = set()
        memkit_handle = False
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target.startswith(ours + "/"):
                memkit_handle = True
                break
            if (target == root or target.startswith(root + "/")) and not target.endswith(" (deleted)"):
                files.add(target[len(root) + 1:] or ".")
        if files and not memkit_handle:
            shown = sorted(files, key=lambda f: (f != "chroma.sqlite3", f))
            more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
            out.append(f"{_process(int(entry.name))} has {', '.join(shown[:3])}{more} open")
    return out
