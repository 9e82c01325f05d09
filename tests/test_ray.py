"""``--executor ray``: units as Ray tasks on a real local Ray head bound to
127.0.0.1 (one CPU: the machine is small); the driver alone writes ``results.jsonl``,
so records and metrics equal the local executor's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evaluators.sweep import SweepConfig, load_records, run_sweep
from tests.stable import stable

ray = pytest.importorskip("ray")

CFG = dict(n=2, seed=11, summary_levels=[0, 2], ks=[1, 3], deletion_modes=["none", "full_purge"],
           n_resamples=50)




@pytest.fixture(scope="module")
def ray_head():
    """A real local Ray head on 127.0.0.1 with one CPU, stopped after the module."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ctx = ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
                   _node_ip_address="127.0.0.1", object_store_memory=100 * 1024 * 1024)
    try:
        yield ctx
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_ray_executor_equals_local_executor(ray_head, tmp_path: Path) -> None:
    assert ray_head.address_info["node_ip_address"] == "127.0.0.1"
    local = run_sweep(SweepConfig(**CFG), tmp_path / "local", progress=False)
    remote = run_sweep(SweepConfig(**CFG, executor="ray"), tmp_path / "ray", progress=False)
    assert stable(remote) == stable(local)
    got, done, bad = load_records(tmp_path / "ray" / "results.jsonl")
    want, _, _ = load_records(tmp_path / "local" / "results.jsonl")
    assert not bad and len(done) == 4
    assert stable(got) == stable(want)  # canonical order, whatever order tasks finished in
    # the executor is not part of the run's identity: a ray run resumes a local one's directory
    again = run_sweep(SweepConfig(**CFG, executor="ray"), tmp_path / "local", resume=True, progress=False)
    assert stable(again) == stable(local)
    assert json.loads((tmp_path / "ray" / "config.json").read_text()) == json.loads(
        (tmp_path / "local" / "config.json").read_text())


def test_executor_option_is_checked() -> None:
    with pytest.raises(ValueError, match="executor must be 'local' or 'ray'"):
        SweepConfig(executor="dask")
