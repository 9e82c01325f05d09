"""A process pool that says which task a dead worker was running, and how it died.

:class:`concurrent.futures.ProcessPoolExecutor` turns a worker killed by a signal
(``SIGILL`` from a native library built for another CPU, ``SIGKILL`` from the OOM
killer) into ``BrokenProcessPool`` with neither the task nor the signal. The sweep
needs both, to tell the user which unit died and that ``--resume`` goes on from the
units already written. This pool keeps one pipe per worker, so the parent always
knows which task each worker holds and reads ``Process.exitcode`` of a dead one.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable, Iterator
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from typing import Any

__all__ = ["WorkerDied", "run_tasks"]


class WorkerDied(RuntimeError):
    """A worker process ended without returning its task's result.

    Attributes:
        task: the key of the task it was running (``None`` if it was idle).
        exitcode: ``Process.exitcode`` (negative: killed by that signal).
        signal_name: e.g. ``"SIGILL"``, or ``None`` for a plain exit.
    """

    def __init__(self, task: Any, exitcode: int | None) -> None:
        self.task = task
        self.exitcode = exitcode
        self.signal_name: str | None = None
        if exitcode is not None and exitcode < 0:
            try:
                self.signal_name = signal.Signals(-exitcode).name
            except ValueError:
                self.signal_name = f"signal {-exitcode}"
        how = f"was killed by {self.signal_name}" if self.signal_name else f"exited with status {exitcode}"
        if self.signal_name == "SIGILL":
            how += " (illegal instruction: a native library built for another CPU)"
        what = f"while running {task}" if task is not None else "while idle"
        super().__init__(f"a worker process {how} {what}")


def _serve(conn: Connection, fn: Callable[..., Any], initializer: Callable[..., None] | None,
           initargs: tuple[Any, ...]) -> None:
    # Ctrl-C reaches the whole process group: the parent alone handles it (it stops the
    # workers and says what was kept), so a worker does not die of it mid-unit first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)
    while True:
        job = conn.recv()
        if job is None:
            return
        key, args = job
        try:
            result = (key, True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the parent, which re-raises
            result = (key, False, exc)
        try:
            conn.send(result)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result or exception
            conn.send((key, False, RuntimeError(f"{key}: {result[2]!r} ({exc})")))


def run_tasks(
    fn: Callable[..., Any],
    tasks: Iterable[tuple[Any, tuple[Any, ...]]],
    *,
    workers: int,
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[tuple[Any, Any]]:
    """Run ``fn(*args)`` for each ``(key, args)`` in ``tasks`` on ``workers`` spawned processes.

    Args:
        fn: a picklable module-level function.
        tasks: ``(key, args)`` pairs; ``key`` names the task in errors.
        workers: number of worker processes (at least 1).
        initializer, initargs: run once in each worker before its first task.

    Yields:
        ``(key, result)`` in completion order.

    Raises:
        WorkerDied: a worker ended without a result (names the task and the signal);
            the other workers are stopped first.
        Exception: whatever ``fn`` raised in a worker, re-raised here.
    """
    ctx = get_context("spawn")
    queue = iter(tasks)
    procs: list[tuple[Any, Connection]] = []
    holding: dict[int, Any] = {}
    try:
        for _ in range(max(1, workers)):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(child, fn, initializer, initargs), daemon=True)
            p.start()
            child.close()
            procs.append((p, parent))
        idle = list(range(len(procs)))
        while True:
            while idle:
                job = next(queue, None)
                if job is None:
                    break
                i = idle.pop()
                holding[i] = job[0]
                procs[i][1].send(job)
            if not holding:
                return
            ready = wait([procs[i][1] for i in holding] + [procs[i][0].sentinel for i in holding])
            for i in list(holding):
                p, conn = procs[i]
                if conn in ready or conn.poll():
                    try:
                        key, ok, value = conn.recv()
                    except (EOFError, OSError):
                        p.join(5)
                        raise WorkerDied(holding[i], p.exitcode) from None
                    del holding[i]
                    idle.append(i)
                    if not ok:
                        raise value
                    yield key, value
                elif p.sentinel in ready:
                    p.join(5)
                    raise WorkerDied(holding[i], p.exitcode)
    finally:
        for p, conn in procs:
            try:
                if p.is_alive():
                    conn.send(None)
            except OSError:
                pass
        for p, conn in procs:
            p.join(2 if not holding else 0.1)
            if p.is_alive():
                p.terminate()
                p.join(5)
            conn.close()
