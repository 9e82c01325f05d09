"""Every core for the files of one scan: :func:`start_path` plans what
:class:`memkit.residue.files.Scanner` reads under a path and reads it in worker processes.

A plan (:func:`memkit.residue.plan.plan`) is the walk :class:`~memkit.residue.files.Scanner`
makes, with every regular file a *job* instead of a read: a worker runs :meth:`Scanner.file` on it into a report of its own
(containers, SQLite rows, JSON and the wide readings included), and the parent adds
each job's hits, notes and coverage to the scan's report in the order of the plan, so
the report is the one a single process writes. Small files go to a worker in batches;
a file larger than :data:`PIECE_BYTES` has its bytes read in pieces by all workers
(:func:`_read_piece`: the scan engine's chains over the piece, and the wide readings
of the copies that start in it), joined in order (:func:`memkit.residue.pieces.join`,
exact), while one worker reads the rest of it (SQL) with those hits given.

A container (gzip, zip, tar ...) is one job from the start, not read in pieces: the
worker that opens it writes each member of at least :data:`MEMBER_BYTES` that is no
container itself to a temporary file and leaves it to any worker
(:func:`_read_member`, started as the worker announces it), and returns its report
cut at each such member; the parent adds the parts and the members' reports in the
container's order and removes the files.

Bounds: a container job gets the decompression budget left under the given path; when
the jobs before it in the plan turn out to have used more than was left for it, it is
read again in the parent with what was left (``Limits.max_total_bytes`` stays one
budget per path). Workers are forked from the scanning process, so they hold its
matcher without pickling it; :func:`prefork` starts them before a caller loads
libraries that keep threads (chromadb). With one CPU, or little to read, the plan runs
in this process.

A plan's jobs are submitted when it is made (:func:`start_path`; the costliest first)
and added to the report when the caller finishes the :class:`Reading`, so the caller
can do its own work (open the store through chromadb) while the workers read; they run
at a lower priority (:data:`WORKER_NICE`) so that this work keeps a core.
"""

from __future__ import annotations

import atexit
import mmap
import multiprocessing
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memkit.residue.containers import Budget, Limits
from memkit.residue.coverage import Snapshot
from memkit.residue.pieces import Piece, blocks, engine_of, join
from memkit.residue.plan import Job, family_name, plan

__all__ = ["MEMBER_BYTES", "PIECE_BYTES", "WORKER_NICE", "Reading", "WorkerDied", "prefork", "release", "start_path", "workers"]

PIECE_BYTES = 16 << 20
"""A file larger than twice this is read in pieces of at least this size (a piece per
worker at least four times over, so the workers finish together)."""

_BATCH_BYTES = 4 << 20
_BATCH_FILES = 64
_INLINE_BYTES = 8 << 20
"""Plans holding less than this run in the scanning process (forking costs more)."""


def workers() -> int:
    """Processes a scan uses: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# --------------------------------------------------------------------------- the pool

_POOL: dict[str, Any] = {}
"""The worker pool of the current matcher: ``{"m": matcher, "pool": Pool, "pid": pid}``."""

_M: Any = None
"""The matcher a forked worker inherits."""


def _enough(paths: list[Any]) -> bool:
    """Whether the files under ``paths`` hold at least :data:`_INLINE_BYTES` (stops
    counting there)."""
    total = 0
    for top in paths:
        if top is None:
            continue
        for root, _dirs, files in os.walk(top) if os.path.isdir(top) else [("", [], [str(top)])]:
            for name in files:
                try:
                    total += os.stat(os.path.join(root, name)).st_size
                except OSError:
                    continue
                if total >= _INLINE_BYTES:
                    return True
    return False


def prefork(m: Any, paths: list[Any] | None = None) -> None:
    """Start the worker processes for matcher ``m`` now (before the caller imports
    libraries that start threads), where there is more than one CPU and, when
    ``paths`` are given, enough under them to read (:data:`_INLINE_BYTES`)."""
    global _M
    if workers() <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return
    if _POOL.get("m") is m and _POOL.get("pid") == os.getpid():
        return
    if paths is not None and not _enough(paths):
        return
    release()
    _warm(m)
    global _ANNOUNCE, _TMP
    ctx = multiprocessing.get_context("fork")
    reader, writer = ctx.Pipe(duplex=False)
    _TMP = tempfile.mkdtemp(prefix="memkit-members-")
    _M, _ANNOUNCE = m, (writer, ctx.Lock())  # all three inherited by the workers
    pool = ctx.Pool(workers(), initializer=_ready)
    stop = threading.Event()
    _POOL.update(m=m, pid=os.getpid(), pool=pool, stop=stop, tmp=_TMP, pids=_pids(pool))
    threading.Thread(target=_start_announced, args=(reader, pool, stop), daemon=True).start()


_ANNOUNCE: Any = None
"""The pipe (and its writers' lock) on which a worker announces what it leaves to
others (inherited)."""
_TMP: str | None = None
"""The pool's directory for members left to other workers (inherited)."""
_STARTED: dict[Any, Any] = {}
"""The announced readings not yet taken, by key."""
_TAKEN: set[Any] = set()
"""Readings the parent started before their announcement arrived."""
_LOCK = threading.Lock()


def _start_announced(reader: Any, pool: Any, stop: threading.Event) -> None:
    """In a thread of the scanning process: start each reading a worker announces
    (``(key, function name, arguments)``: a member it left to others, a piece of a
    container's bytes), so they run while that worker reads on, until ``stop`` (never
    a message: a worker stopped while writing one could hold the writers' lock)."""
    while not stop.is_set():
        try:
            if not reader.poll(0.2):
                continue
            key, name, args = reader.recv()
        except (EOFError, OSError):
            return
        with _LOCK:
            if key in _TAKEN:
                _TAKEN.discard(key)
                continue
            try:
                _STARTED[key] = pool.apply_async(globals()[name], args)
            except ValueError:  # the pool was stopped
                return


def _started(pool: Any, key: Any, name: str, args: tuple[Any, ...]) -> Any:
    """The reading announced as ``key``: the one its announcement started, else one
    started now (and its announcement, when it comes, ignored)."""
    with _LOCK:
        res = _STARTED.pop(key, None)
        if res is None:
            _TAKEN.add(key)
            res = pool.apply_async(globals()[name], args)
    return res


def _announce(key: Any, name: str, args: tuple[Any, ...]) -> None:
    """In a worker: have the scanning process start ``name(*args)`` in the pool now."""
    if _ANNOUNCE is not None:
        writer, lock = _ANNOUNCE
        with lock:
            writer.send((key, name, args))


_READY_UNITS = 128
"""At most this many (character, own characters) units are compiled by each worker as
it starts (a few ms each)."""


WORKER_NICE = 5
"""Niceness the workers add to their own: the scanning process opens the store through
chromadb while they read (one core's work), which three processes at one priority on
2 cores slow by a third; alone, the workers still get every core."""


def _ready() -> None:
    """Each worker, as it starts (while the caller goes on, loading chromadb): lower its
    priority (:data:`WORKER_NICE`), then compile the per-character patterns the engine
    confirms copies with (:meth:`~memkit.scan.matching.SecretMatcher.match_at`) for the
    characters of the secrets, at most :data:`_READY_UNITS` of them, instead of when the
    first window names a secret mid-scan."""
    from memkit.scan.matching import prepare_units, unit_keys

    try:
        os.nice(WORKER_NICE)
    except (AttributeError, OSError):  # pragma: no cover - a platform without nice
        pass
    _keep_freed_memory()
    try:  # a warm-up: whatever goes wrong here is met again, and reported, by the scan itself
        secrets = getattr(_M, "secrets", None) or [getattr(_M, "secret", "")]
        keys: dict[tuple[str, frozenset[str]], None] = {}
        for s in secrets:
            try:
                keys.update(dict.fromkeys(unit_keys(s)))
            except (TypeError, ValueError):
                continue
            if len(keys) >= _READY_UNITS:
                break
        prepare_units(list(keys)[:_READY_UNITS])
    except Exception:  # noqa: BLE001 - an initializer that raises makes the pool respawn workers forever
        pass


_MALLOC_KEEP = 256 << 20
"""Bytes of freed memory a worker keeps for reuse (glibc's trim and mmap thresholds)."""


def _keep_freed_memory() -> None:
    """Have glibc's malloc keep freed memory (up to :data:`_MALLOC_KEEP`): a worker
    frees buffers of several MiB per block it reads, and each one returned to the kernel
    is faulted in again by the next (half the page faults of reading a directory)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # pragma: no cover - not glibc
        return
    mallopt(-1, _MALLOC_KEEP)  # M_TRIM_THRESHOLD
    mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD: allocations below it come from the kept heap


def _warm(m: Any) -> None:
    """Build what every worker would otherwise build: a one-secret matcher's engine, the
    wide pass's tables, the secret-free databases texts are read with (folding, JSON
    escapes); not byte patterns (the engine confirms unit by unit: ``match_at``)."""
    from memkit.scan import json_escapes, multi
    from memkit.scan.encodings import prepare

    engine_of(m)
    prepare(m)
    for build in (multi._folding, json_escapes._tables):
        build()


def release(m: Any = None) -> None:
    """Stop the worker processes (those of matcher ``m`` only, when given)."""
    if not _POOL or (m is not None and _POOL.get("m") is not m):
        return
    global _M, _ANNOUNCE, _TMP
    pool, pid, stop, tmp = _POOL.pop("pool"), _POOL.pop("pid"), _POOL.pop("stop"), _POOL.pop("tmp")
    _POOL.clear()
    _M = _ANNOUNCE = _TMP = None
    stop.set()
    if pid == os.getpid():
        pool.terminate()
        pool.join()
        shutil.rmtree(tmp, ignore_errors=True)  # members of readings never finished
    with _LOCK:
        _STARTED.clear()
        _TAKEN.clear()


atexit.register(release)  # a pool a caller never released: its directory goes too


class WorkerDied(RuntimeError):
    """A worker process ended while the scan waited for its readings (killed, out of
    memory, or a file that shrank while mapped: SIGBUS); what it held would never come."""


def _pids(pool: Any) -> set[int]:
    return {p.pid for p in list(getattr(pool, "_pool", []))}


def _result(res: Any) -> Any:
    """``res.get()``, or :class:`WorkerDied` where a worker of the pool ended meanwhile:
    :class:`multiprocessing.pool.Pool` starts another in its place (a process id it did
    not start with) and the task it held is lost, so a plain ``get`` would wait forever.
    Re-raises what the reading raised."""
    while not res.ready():
        res.wait(0.5)
        pool = _POOL.get("pool")
        if pool is not None and not res.ready() and not _pids(pool) <= _POOL["pids"]:
            raise WorkerDied("a worker process reading the files ended before it was done (a file that "
                             "shrank while it was read, SIGBUS; memory; a kill): scan again when the files are idle")
    return res.get()


def _pool(m: Any) -> Any:
    prefork(m)
    return _POOL.get("pool") if _POOL.get("m") is m else None


# --------------------------------------------------------------------------- worker side


def _read_file(job: Job, limits: Limits, skip_sql: set[str], kind: type,
               raw: tuple[list[Any], list[Any]] | None = None, serde: Any = None,
               defer: bool = False) -> dict[str, Any]:
    """Read one file as :meth:`Scanner.file` does, into a report of its own; with
    ``raw``, the file's own bytes are not matched again (its UTF-8 and wide copies were
    read in pieces and are added first). With ``defer``, a member of the file (a
    container, at any depth) of at least :data:`MEMBER_BYTES` that is no container itself is written
    to a temporary file, announced (:data:`_ANNOUNCE`) and left to another worker
    (:func:`_read_member`): the report is returned cut there, the rest in ``"then"``
    (parts, and each member's arguments for :func:`_read_member`, in order), the
    temporary directory in ``"tmp"``."""
    m = _LOCAL_M if _LOCAL_M is not None else _M
    report = kind(target="")
    later: list[Any] = []
    tmp: list[str] = []

    def written(data: Any) -> str | None:
        """``data`` in a temporary file, or ``None`` where it cannot be written (no room:
        the caller reads it here instead)."""
        try:
            if not tmp:
                tmp.append(_temp_dir())
            path = os.path.join(tmp[0], str(len(later)))
            with open(path, "wb") as fh:
                fh.write(data)
        except OSError:
            return None
        return path

    class JobScanner(job.scanner):  # type: ignore[name-defined,misc]
        def cut(self, item: tuple[Any, ...]) -> None:
            later.extend([self.report.part(), item])
            self.report = kind(target="")

        def raw(self, data: Any, surface: str, label: str, kind: str = "file") -> int:
            if raw is not None and label == job.label:
                return self.raw_hits(data, surface, label, raw[0], raw[1])
            if (defer and len(data) > 2 * PIECE_BYTES and engine_of(self.m) is not None and kind != "json"
                    and self.box(data, label, kind) is not None):
                # a large container's bytes: read in pieces by every worker while this one
                # opens it (what a container's raw reading finds is not used here)
                path = job.path if label == job.label else written(data)
                if path is None:
                    return super().raw(data, surface, label, kind)
                pieces, token = _pieces(len(data), workers()), os.urandom(8).hex()
                for lo, hi in pieces:
                    _announce((token, lo), "_read_piece", (path, lo, hi))
                self.cut(("raw", path, label, surface, pieces, job.scanner, token))
                return 0
            return super().raw(data, surface, label, kind)

        def member(self, member: Any, label: str, family: Any, depth: int, budget: Budget) -> None:
            if (not defer or len(member.data) < MEMBER_BYTES
                    or self.box(member.data, label, self.content_kind(member.data[:16], member.name)) is not None):
                return super().member(member, label, family, depth, budget)
            path = written(member.data)
            if path is None:
                return super().member(member, label, family, depth, budget)
            args = (_Member(path, member.name, label, job.family, member.size, list(member.left), depth, job.scanner),
                    limits, skip_sql, kind, serde)
            self.cut(("member", path, args))
            _announce(path, "_read_member", args)

    scanner = JobScanner(report, m, limits, seen=dict(job.seen), skip_sql=set(skip_sql), checkpoint_serde=serde)
    budget = Budget(job.budget)
    try:
        scanner.file(Path(job.path), job.label, job.scanner.FAMILIES[job.family], budget, surface=job.surface)
    except BaseException:
        if tmp:
            shutil.rmtree(tmp[0], ignore_errors=True)
        raise
    parts = [*later, scanner.report.part()]
    out = parts[0]
    if later:
        out["then"] = parts[1:]
    if tmp:
        out["tmp"] = tmp[0]
    out["used"] = job.budget - budget.left
    return out


def _read_batch(jobs: list[Job], limits: Limits, skip_sql: set[str], kind: type,
                serde: Any = None, defer: bool = False) -> list[dict[str, Any]]:
    return [_read_file(j, limits, skip_sql, kind, None, serde, defer) for j in jobs]


def _temp_dir() -> str:
    """A new directory for the members a worker leaves to others: in the pool's own
    (:data:`_TMP`), which :func:`release` removes with whatever a reading that was never
    finished left in it."""
    return tempfile.mkdtemp(dir=_TMP, prefix="memkit-members-")


MEMBER_BYTES = 1 << 20
"""A container's member at least this large is read by any worker, not by the one
that opens the container (:func:`_read_file`)."""


@dataclass
class _Member:
    """A container's member left to another worker: its bytes in ``path``."""

    path: str
    name: str
    label: str
    family: str
    size: int
    left: list[str]
    depth: int
    scanner: Any


def _read_member(mem: _Member, limits: Limits, skip_sql: set[str], kind: type, serde: Any = None) -> dict[str, Any]:
    """Read a member written by :func:`_read_file` as :meth:`Scanner.member` reads it in
    the container's own reading, into a report of its own."""
    from memkit.residue.containers import Member

    m = _LOCAL_M if _LOCAL_M is not None else _M
    report = kind(target="")
    scanner = mem.scanner(report, m, limits, skip_sql=set(skip_sql), checkpoint_serde=serde)
    with open(mem.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        scanner.member(Member(mem.name, data, mem.size, list(mem.left)), mem.label,
                       mem.scanner.FAMILIES[mem.family], mem.depth, Budget(0))
    return report.part()


_LOCAL_M: Any = None
"""The matcher of a plan run in this process."""


def _read_piece(path: str, lo: int, hi: int) -> list[Piece]:
    """:func:`_blocks` of ``[lo, hi)`` of a file."""
    m = _LOCAL_M if _LOCAL_M is not None else _M
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return blocks(mm, m, lo, hi)


def _pieces(size: int, n_workers: int) -> list[tuple[int, int]]:
    step = max(PIECE_BYTES, -(-size // (4 * n_workers)))
    return [(a, min(size, a + step)) for a in range(0, size, step)]


# --------------------------------------------------------------------------- running a plan


def _cost(job: Job) -> int:
    """A job's expected reading time, in bytes of plain file: an SQLite file or a
    container counts four times its size."""
    return job.size * (4 if job.sql or job.box else 1)


class Reading:
    """The read of one given path, begun: its jobs are running in the worker pool (when
    there is one) while the caller goes on; :meth:`finish` adds what they found to the
    scanner's report, in the order of the plan (module doc)."""

    def __init__(self, scanner: Any, events: list[Any], budget: Budget, pool: Any) -> None:
        self.scanner, self.events, self.budget, self.pool = scanner, events, budget, pool
        self.pending: dict[Any, Any] = {}
        self.done = False
        n = workers() if pool is not None else 1
        jobs = [e[1] for e in events if e[0] == "job"]
        for job in jobs:
            job.budget = budget.left
            if pool is not None and job.size > 2 * PIECE_BYTES and not job.box and engine_of(scanner.m) is not None:
                job.split = True
                job.pieces = _pieces(job.size, n)
        if pool is None:
            return
        limits, skip = scanner.limits, scanner.skip_sql
        serde, kind = getattr(scanner, "checkpoint_serde", None), type(scanner.report)
        for job in jobs:  # pieces of large files first (they are the long part), then batches of small files
            for lo, hi in job.pieces:
                self.pending[id(job), lo] = pool.apply_async(_read_piece, (job.path, lo, hi))
        batches: list[list[Job]] = [[]]
        for job in jobs:
            if job.split:
                continue
            batches[-1].append(job)
            if sum(j.size for j in batches[-1]) >= _BATCH_BYTES or len(batches[-1]) >= _BATCH_FILES:
                batches.append([])
        # the costliest first, so that no long one is left to run alone at the end
        for batch in sorted((b for b in batches if b), key=lambda b: -sum(_cost(j) for j in b)):
            res = pool.apply_async(_read_batch, (batch, limits, skip, kind, serde, True))
            for k, j in enumerate(batch):
                self.pending[id(j)] = (res, k)

    def finish(self) -> None:
        """Wait for the jobs (or, without a pool, read them here) and add their findings
        to the report, in plan order. Once; a second call does nothing."""
        global _LOCAL_M
        if self.done:
            return
        self.done = True
        scanner = self.scanner
        limits, skip = scanner.limits, scanner.skip_sql
        serde, kind = getattr(scanner, "checkpoint_serde", None), type(scanner.report)
        _LOCAL_M = scanner.m
        try:
            for ev, item in self.events:
                if ev == "cover":
                    scanner._cover(item)
                elif ev == "note":
                    scanner.report.notes.append(item)
                else:
                    _finish_job(self, item, limits, skip, kind, serde)
        finally:
            _LOCAL_M = None


def _finish_job(reading: Reading, job: Job, limits: Limits, skip: set[str], kind: type, serde: Any = None) -> None:
    """Add one job's findings to the report, then those of the members it left to
    other workers, in order; a job that used more of the budget than was left for it
    (the jobs before it used some) is read again here with what was left."""
    scanner, budget, pool, pending = reading.scanner, reading.budget, reading.pool, reading.pending
    report = scanner.report
    changed: Any = False
    if job.split:
        before = Snapshot.of(job.path)
        raw = _joined_raw(scanner, job, pending)
        job.budget = budget.left
        frag = (_result(pool.apply_async(_read_file, (job, limits, skip, kind, raw, serde, True))) if pool is not None
                else _read_file(job, limits, skip, kind, raw, serde))
        changed = Snapshot.of(job.path) != before
    elif id(job) in pending:
        res, k = pending.pop(id(job))
        frag = _result(res)[k]
    else:
        job.budget = budget.left
        frag = _read_file(job, limits, skip, kind, None, serde)
    try:
        parts = [frag, *(x if isinstance(x, dict) else _later(reading, x) for x in frag.get("then", []))]
    finally:
        if "tmp" in frag:
            shutil.rmtree(frag["tmp"], ignore_errors=True)
    if frag["used"] > budget.left:
        job.budget = budget.left
        parts = [_read_file(job, limits, skip, kind, None, serde)]
    budget.left -= parts[0]["used"]
    for part in parts:
        report.add_part(part)
    if changed:
        changed = next((c for part in parts for c in part["coverage"] if c.path == job.label), None)
    if changed and not any(x.startswith("changed during") for x in changed.left):
        changed.left.append("changed during the scan (size, modification time or inode differ before "
                            "and after): scan again when it is idle")
        report.skip(changed.surface, f"{changed.path}: " + "; ".join(changed.left))


def _later(reading: Reading, item: tuple[Any, ...]) -> dict[str, Any]:
    """The report part of what a job left to other workers (:func:`_read_file`): a
    member's (``("member", path, arguments)``), or the hits of a container's bytes
    read in pieces (``("raw", path, label, surface, pieces, scanner class, key)``)."""
    if item[0] == "member":
        return _result(_started(reading.pool, item[1], "_read_member", item[2]))
    _, path, label, surface, pieces, scanner_class, token = item
    read = [b for lo, hi in pieces for b in _result(_started(reading.pool, (token, lo), "_read_piece", (path, lo, hi)))]
    m = reading.scanner.m
    report = type(reading.scanner.report)(target="")
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        scanner_class(report, m, reading.scanner.limits).raw_hits(mm, surface, label, *_copies(m, mm, read))
    return report.part()


def _copies(m: Any, data: Any, read: list[Piece]) -> tuple[list[Any], list[Any]]:
    """UTF-8 and wide copies of ``data`` from the blocks its pieces were read in, in order."""
    from memkit.scan.encodings import pick

    spans = join(engine_of(m), data, read)
    if not hasattr(m, "engine"):
        spans = [(s, e, k, None) for s, e, k, _ in spans]
    return spans, pick([c for p in read for c in p.wide], [(s, e, i) for s, e, _, i in spans])


def _joined_raw(scanner: Any, job: Job, pending: dict[Any, Any]) -> tuple[list[Any], list[Any]]:
    """UTF-8 and wide copies of a file read in pieces."""
    read = [block for lo, _ in job.pieces for block in _result(pending.pop((id(job), lo)))]
    with open(job.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return _copies(scanner.m, mm, read)


def _size(events: list[Any]) -> Iterator[int]:
    for ev, item in events:
        if ev == "job":
            yield item.size


def start_path(scanner: Any, top: Path, family: Any, label: str, budget: Budget) -> Reading | None:
    """Plan ``top`` for ``scanner`` as :meth:`Scanner.path` walks it and start reading
    its files in worker processes when there is more than one CPU and enough to read
    (module doc); ``None`` (nothing done) for a family this module does not know.
    Nothing reaches the report before :meth:`Reading.finish`."""
    try:
        family_name(scanner, family)
    except ValueError:
        return None
    events = plan(scanner, top, family, label, budget)
    total = sum(_size(events))
    return Reading(scanner, events, budget, _pool(scanner.m) if total >= _INLINE_BYTES else None)
