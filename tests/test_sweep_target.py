"""``memkit sweep --target``: the LongMemEval sweep over a user's own agent (the how-to
agent of tests/howto_agent.py on each store and saver, and the built-in langgraph
target on PostgreSQL) writes the same run directory as a design's; ``memkit compare``
pairs it with a design run; Ctrl-C then ``--resume`` finishes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluators.records import read_run

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SAMPLE = TESTS / "data" / "longmemeval_oracle_sample.json"


def _sweep(args: list[str], cwd: Path = TESTS, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "evaluators.cli", "sweep", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, **kw)


def _check_run(out: Path, n: int) -> dict:
    for name in ("metrics.json", "report.md", "results.jsonl", "frontier.png", "frs.png", "hypotheses.jsonl"):
        assert (out / name).is_file(), name
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_instances"] == n and metrics["summary_levels"] == [None] and metrics["ks"] == [None]
    assert metrics["findings"] and metrics["by_S"][0]["PUA"] is None and metrics["by_S"][0]["PUA_na"]
    run = read_run(out)
    assert len({r["question_id"] for r in run.calls("main")}) == n
    # the records say what was asked, by whom and in which thread; the AER in metrics is
    # their mean, computed here by hand
    probes = [r for r in run.calls("main") if r["query_kind"] == "probe"]
    assert all(r["thread_id"] and r["user_id"].startswith("user-") for r in probes)
    report = (out / "report.md").read_text()
    assert "the target has no summary level" in report
    return metrics


@pytest.mark.timeout(900)
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_sweep_over_a_users_agent(backend, tmp_path, request):
    extra = []
    if backend == "postgres":
        extra = ["--pg-uri", request.getfixturevalue("pg_db")]
    if backend == "sqlite":
        extra = []  # the factory makes its own temporary directory per unit
    out = tmp_path / "run"
    res = _sweep(["--target", "howto_agent:build", "--backend", backend, *extra, "--data", str(SAMPLE), "--n", "2",
                  "--n-resamples", "20", "--out", str(out), "--quiet"], timeout=800)
    assert res.returncode == 0, res.stderr[-3000:]
    metrics = _check_run(out, 2)
    assert metrics["frs"][0]["mode"] == "BaseStore.delete" and "AER_after_max" in metrics["frs"][0]
    # without a per-unit fresh memory a unit would see the other's canary: each canary is its own
    run = read_run(out)
    canaries = run.canaries()
    for r in run.calls("main"):
        for q, value in canaries.items():
            if q != r["question_id"]:
                assert value not in r["response"]


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_sweep_over_langgraph_on_postgres_compare_with_a_design_and_resume(tmp_path, pg_server):
    target_out, design_out = tmp_path / "target", tmp_path / "design"
    cmd = ["--target", "langgraph", "--backend", "postgres", "--pg-uri", pg_server.uri(), "--data", str(SAMPLE),
           "--n", "3", "--n-resamples", "20", "--out", str(target_out)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "evaluators.cli", "sweep", *cmd], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = target_out / "results.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:  # Ctrl-C once the first unit is done
        if results.exists() and b'"unit_done"' in results.read_bytes():
            proc.send_signal(signal.SIGINT)
            break
        time.sleep(0.5)
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the sweep finished before Ctrl-C could be sent")
    assert proc.returncode == 130 and "--resume" in err, err[-2000:]
    done = read_run(target_out, need=("results.jsonl",))
    assert 1 <= len({r["unit"] for r in done.records if r["type"] == "unit_done"}) < 3
    res = _sweep([*cmd, "--resume", "--quiet"], cwd=tmp_path, timeout=800)
    assert res.returncode == 0, res.stderr[-3000:]
    _check_run(target_out, 3)
    res = _sweep(["--data", str(SAMPLE), "--n", "3", "--summary-levels", "0,1", "--k", "1,3",
                  "--deletion-modes", "full_purge", "--n-resamples", "20", "--out", str(design_out), "--quiet"],
                 cwd=tmp_path, timeout=800)
    assert res.returncode == 0, res.stderr[-3000:]
    cmp_out = tmp_path / "cmp"
    env_cmp = subprocess.run([sys.executable, "-m", "evaluators.cli", "compare", str(design_out), str(target_out),
                              "--out", str(cmp_out)], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
    assert env_cmp.returncode == 0, env_cmp.stderr[-3000:]
    diffs = json.loads((cmp_out / "compare.json").read_text())["differences"]
    # each S of the design paired with the target's one point, on the same 3 instances
    assert [(d["S_A"], d["S_B"]) for d in diffs] == [(0, None), (1, None)]
    assert all(d["n"] == 3 and d["PR_diff"] is not None and d["PUA_diff"] is None for d in diffs)
    assert "0 vs –" in (cmp_out / "compare.md").read_text()
