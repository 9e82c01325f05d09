"""Where units run: worker processes here, or Ray tasks."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tqdm import tqdm

from evaluators.pool import run_tasks
from evaluators.sweep.config import SweepConfig, unit_id
from evaluators.sweep.results import append_unit
from evaluators.sweep.unit import run_sweep_unit
from memkit.dataset.longmemeval import Instance


def _worker_env() -> None:
    """A worker process's environment: telemetry off, offline, one torch thread (the
    pool's and Ray's workers share the machine's cores)."""
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass


def _worker_init(work: str, parent: int) -> None:
    tempfile.tempdir = work
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    _worker_env()


def _exit_with_parent(parent: int) -> None:
    """End a worker whose sweep process is gone (e.g. killed with -9)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _worker(config_json: str, instance_json: str, S: int | None, cache_path: str | None,
            stores_dir: str | None) -> tuple[list, dict]:
    config = SweepConfig.model_validate_json(config_json)
    instance = Instance.model_validate_json(instance_json)
    return run_sweep_unit(config, instance, S, cache_path=cache_path, stores_dir=stores_dir)


@contextmanager
def tempdir_under(path: Path) -> Iterator[None]:
    """Make ``tempfile`` create everything under ``path`` for the duration."""
    before = tempfile.tempdir
    tempfile.tempdir = str(path)
    try:
        yield
    finally:
        tempfile.tempdir = before


def run_parallel(config: SweepConfig, todo: list[tuple[Instance, int]], cache_path: str | None,
                  stores_dir: str | None, fh: Any, bar: tqdm, work: Path) -> None:
    cfg = config.model_dump_json()
    tasks = (
        (unit_id(inst.question_id, S), (cfg, inst.model_dump_json(), S, cache_path, stores_dir))
        for inst, S in todo
    )
    for unit, (recs, counts) in run_tasks(_worker, tasks, workers=config.workers,
                                           initializer=_worker_init, initargs=(str(work), os.getpid())):
        append_unit(fh, recs, unit, counts)
        advance_bar(bar, counts)


def run_ray(config: SweepConfig, todo: list[tuple[Instance, int]], cache_path: str | None,
             stores_dir: str | None, fh: Any, bar: tqdm, work: Path) -> None:
    """Run units as Ray tasks (one CPU each) and append each finished unit's records
    here, in the driver, as they arrive: only this process writes ``results.jsonl``.

    Ray is joined as follows: a connection this process already opened
    (``ray.is_initialized()``) is used as is; else ``ray.init(address=config.ray_address)``
    (``None``: ``RAY_ADDRESS`` if set, else a local Ray with ``workers`` CPUs started
    for this run and stopped after it). Tasks receive the LLM cache and work paths
    under ``--out``; a node that cannot see them (no shared filesystem) uses a
    node-local cache and temp dir (:func:`_ray_unit`).

    Raises:
        ImportError: Ray is not installed (``pip install 'memkit[ray]'``).
        Exception: a unit's own error, re-raised; ``RuntimeError`` naming the unit
            when Ray lost the task (after its one retry).
    """
    try:
        import ray
    except ImportError as exc:
        raise ImportError("--executor ray needs Ray: `pip install 'memkit[ray]'`") from exc
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray's telemetry stays off
    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if config.ray_address is None and not os.environ.get("RAY_ADDRESS"):
            kw.update(num_cpus=config.workers, _node_ip_address="127.0.0.1")
        ray.init(address=config.ray_address, **kw)
        started = True
    task = ray.remote(num_cpus=1, max_retries=1)(_ray_unit)
    cfg = config.model_dump_json()
    pending = {
        task.remote(cfg, inst.model_dump_json(), S, cache_path, stores_dir, str(work)): unit_id(inst.question_id, S)
        for inst, S in todo
    }
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                unit = pending.pop(ref)
                try:
                    recs, counts = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    raise exc.as_instanceof_cause() from None
                except ray.exceptions.RayError as exc:
                    raise RuntimeError(f"Ray lost the task of unit {unit} ({exc})") from exc
                append_unit(fh, recs, unit, counts)
                advance_bar(bar, counts)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def _ray_unit(config_json: str, instance_json: str, S: int | None, cache_path: str | None,
              stores_dir: str | None, work: str) -> tuple[list, dict]:
    """One unit in a Ray worker: :func:`_worker` with the worker set up as the local
    pool's are (offline, one torch thread, temp files under ``work``). Where this node
    cannot see ``work`` or the cache's directory (no shared filesystem), it uses its
    own temp dir and a node-local LLM cache under :func:`memkit.models.chat.cache_dir`."""
    _worker_env()
    tempfile.tempdir = work if Path(work).is_dir() else None
    if cache_path is not None and not Path(cache_path).parent.is_dir():
        from memkit.models.chat import cache_dir

        cache_path = str(cache_dir() / "ray-llm-cache.sqlite")
    if stores_dir is not None and not Path(stores_dir).parent.is_dir():
        raise RuntimeError(f"--keep-stores with Ray needs --out on a filesystem every node sees ({stores_dir})")
    return _worker(config_json, instance_json, S, cache_path, stores_dir)


def advance_bar(bar: tqdm, counts: dict[str, Any]) -> None:
    """One more unit on the progress bar, with the LLM calls sent (cache misses) per
    second so far (tqdm shows the units' rate and the ETA itself); none for a backend
    that sends none (``extractive``)."""
    bar.calls = getattr(bar, "calls", 0) + int(counts.get("llm_calls", 0))  # type: ignore[attr-defined]
    elapsed = bar.format_dict.get("elapsed") or 0.0
    if bar.calls:
        bar.set_postfix_str(f"{bar.calls} LLM calls, {bar.calls / elapsed if elapsed else 0.0:.1f} calls/s",
                            refresh=False)
    bar.update(1)

