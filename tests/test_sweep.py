"""The sweep end to end on real components (Chroma, MiniLM, the extractive backend):
outputs, what a retrieval-only agent must show, resumability after kill -9, locking."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from filelock import FileLock

from evaluators.scoring.probes import LEVELS
from evaluators.sweep import SweepConfig, SweepLockedError, load_records, run_sweep
from tests.stable import stable

SMALL = dict(n=2, seed=7, n_resamples=200)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "out"
    metrics = run_sweep(SweepConfig(**SMALL), out, progress=False)
    return out, metrics


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_writes_every_output(small_run):
    out, metrics = small_run
    for name in ("results.jsonl", "metrics.json", "config.json", "report.md", "report.html",
                 "frontier.png", "probes.png", "frs.png", "hypotheses.jsonl"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    for png in ("frontier.png", "probes.png", "frs.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    on_disk = json.loads((out / "metrics.json").read_text())
    assert on_disk["by_S"] == metrics["by_S"]
    for row in on_disk["by_S"]:
        for key in ("PR", "AER_max", "AER_direct", "AER_indirect", "AER_jailbreak", "PUA", "delta_S", "delta_DI"):
            assert key in row and f"{key}_ci" in row, key
    assert {(r["S"], r["k"]) for r in on_disk["frontier"]} == {(S, k) for S in (0, 1, 2) for k in (1, 3, 6, 10, 25)}
    modes = ["none", "raw_only", "raw_plus_resummarize", "full_purge", "tombstone_redaction"]
    assert [(r["S"], r["mode"]) for r in on_disk["frs"]] == [(S, m) for S in (0, 1, 2) for m in modes]
    for row in on_disk["frs"]:
        assert {"FRS_raw", "FRS_summary", "FRS_worst", "PR_after", "forensic_copies"} <= set(row)
    report = (out / "report.md").read_text()
    assert "Table 2" in report and "Forgetting residue" in report and "frontier.png" in report
    hyps = [json.loads(line) for line in (out / "hypotheses.jsonl").read_text().splitlines()]
    assert len(hyps) == SMALL["n"] and all(set(h) == {"question_id", "hypothesis"} for h in hyps)


def test_results_records_schema_and_prefix_retrieval(small_run):
    out, _ = small_run
    recs = _records(out)
    calls = [r for r in recs if r["type"] == "call"]
    assert sum(r["type"] == "unit_done" for r in recs) == SMALL["n"] * 3
    for r in calls[:50]:
        for key in ("question_id", "S", "k", "query_kind", "level", "template_id", "response",
                    "extraction", "retrieved_ids", "retrieved_tiers", "latency_s", "context_exposed"):
            assert key in r, key
    # retrieve once at the largest k, prefixes for smaller k
    by_query: dict = {}
    for r in calls:
        if r["phase"] == "main":
            by_query.setdefault((r["unit"], r["query"]), {})[r["k"]] = r["retrieved_ids"]
    for ranks in by_query.values():
        ks = sorted(ranks)
        for a, b in zip(ks, ks[1:], strict=False):
            assert ranks[b][: len(ranks[a])] == ranks[a]
            assert len(ranks[a]) <= a
    # main phase reads the design's tier: raw at S=0, summary at S>=1
    for r in calls:
        if r["phase"] == "main" and r["retrieved_tiers"]:
            assert set(r["retrieved_tiers"]) == ({"raw"} if r["S"] == 0 else {"summary"})


def test_metrics_match_an_independent_recount(small_run):
    out, metrics = small_run
    calls = [r for r in _records(out) if r["type"] == "call" and r["phase"] == "main"]
    for row in metrics["frontier"]:
        qs = [r["correct"] for r in calls if r["S"] == row["S"] and r["k"] == row["k"] and r["query_kind"] == "question"]
        assert row["PR"] == pytest.approx(np.mean(qs), abs=1e-6)
        per_level = []
        for lv in LEVELS:
            per_inst = {}
            for r in calls:
                if r["S"] == row["S"] and r["k"] == row["k"] and r["level"] == lv:
                    per_inst.setdefault(r["question_id"], []).append(r["extraction"]["exact"])
            per_level.append(np.mean([np.mean(v) for v in per_inst.values()]))
        assert row["AER_max"] == pytest.approx(max(per_level), abs=1e-6)


def test_retrieval_only_agent_invariants(small_run):
    _, m = small_run
    s0 = [r["AER_max"] for r in m["frontier"] if r["S"] == 0]
    assert all(b >= a - 1e-9 for a, b in zip(s0, s0[1:], strict=False)), f"AER at S=0 must not fall with k: {s0}"
    aer = {r["S"]: r["AER_max"] for r in m["by_S"]}
    frs = {(r["S"], r["mode"]): r for r in m["frs"]}
    for S in (0, 1, 2):
        for mode in ("full_purge", "tombstone_redaction"):
            assert frs[(S, mode)]["FRS_worst"] == 0.0
            assert _copies_left(frs[(S, mode)]) == {}, frs[(S, mode)]["forensic_copies"]
        assert frs[(S, "none")]["FRS_worst"] >= aer[S] - 1e-9  # the raw log still holds it
        assert frs[(S, "none")]["forensic_copies"].get("text_raw", 0) == SMALL["n"]
    assert frs[(0, "none")]["FRS_raw"] == pytest.approx(aer[0])
    # raw_only removes the raw copy: nothing recoverable from the raw tier
    assert all(frs[(S, "raw_only")]["FRS_raw"] == 0.0 for S in (0, 1, 2))


def test_existing_results_need_resume_and_matching_config(small_run, tmp_path):
    out, _ = small_run
    with pytest.raises(FileExistsError, match="--resume"):
        run_sweep(SweepConfig(**SMALL), out, progress=False)
    with pytest.raises(ValueError, match="different configuration"):
        run_sweep(SweepConfig(**{**SMALL, "seed": 8}), out, resume=True, progress=False)


def test_second_process_gets_a_lock_error(tmp_path):
    out = tmp_path / "locked"
    out.mkdir()
    (out / ".memkit-run").write_text('{"kind": "sweep"}\n')  # a sweep marks its --out before it locks it
    with FileLock(str(out / ".lock")):
        with pytest.raises(SweepLockedError, match="another memkit sweep"):
            run_sweep(SweepConfig(n=1, summary_levels=[0], deletion_modes=[]), out, progress=False)
        proc = subprocess.run(
            [sys.executable, "-m", "evaluators.cli", "sweep", "--n", "1", "--out", str(out), "--quiet"],
            capture_output=True, text=True, timeout=300,
        )
    assert proc.returncode == 2
    assert "another memkit sweep is writing" in proc.stderr


KILL_CFG = ["--n", "2", "--seed", "7", "--n-resamples", "200", "--quiet"]


def _copies_left(row: dict) -> dict:
    """Surfaces of an frs row that still hold a copy, ``disk_hnsw`` included: memkit
    zeroes every region of the HNSW files that chroma/hnswlib write from
    uninitialised heap memory (memkit.store.tiered._zero_hnsw_slack), and the stress test in
    tests/test_verdicts.py holds it to 0 over 200 cycles."""
    return {s: n for s, n in row["forensic_copies"].items() if n}


def _markers(path: Path) -> int:
    if not path.exists():
        return 0
    return path.read_bytes().count(b'"type": "unit_done"')


@pytest.mark.slow
def test_kill_9_and_resume_gives_identical_metrics(small_run, tmp_path):
    out_ref, _ = small_run
    out = tmp_path / "killed"
    results = out / "results.jsonl"
    cmd = [sys.executable, "-m", "evaluators.cli", "sweep", *KILL_CFG, "--out", str(out)]
    kills = 0
    for target in (1, 3, 5):  # kill after 1, 3 and 5 completed units (and mid-unit)
        proc = subprocess.Popen(cmd + (["--resume"] if kills else []), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.time() + 180
        while _markers(results) < target and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # land inside the next unit
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
    assert kills >= 2, "the sweep finished before it could be killed twice"
    _, done, _ = load_records(results)
    assert 0 < len(done) < 6
    proc = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads((out / "metrics.json").read_text())
    want = json.loads((out_ref / "metrics.json").read_text())
    assert stable(got) == stable(want)
    assert stable(_records(out)) == stable(_records(out_ref))




@pytest.mark.slow
def test_parallel_workers_give_the_same_results(tmp_path):
    cfg = dict(n=2, seed=3, summary_levels=[0, 1], deletion_modes=["none", "full_purge"], n_resamples=100)
    one = run_sweep(SweepConfig(**cfg), tmp_path / "one", progress=False)
    two = run_sweep(SweepConfig(**cfg, workers=2), tmp_path / "two", progress=False)
    assert stable(one) == stable(two)
    assert (tmp_path / "one" / "hypotheses.jsonl").read_text() == (tmp_path / "two" / "hypotheses.jsonl").read_text()


@pytest.mark.slow
def test_real_longmemeval_sample_all_eight(sample_path, tmp_path):
    m = run_sweep(SweepConfig(data=str(sample_path), n=8, n_resamples=200, deletion_modes=["full_purge"]),
                  tmp_path / "real", progress=False)
    assert m["n_instances"] == 8
    assert m["totals"]["units"] == 24
    s0 = [r["AER_max"] for r in m["frontier"] if r["S"] == 0]
    assert all(b >= a - 1e-9 for a, b in zip(s0, s0[1:], strict=False))
    frs = {(r["S"], r["mode"]): r for r in m["frs"]}
    for S in (0, 1, 2):
        assert _copies_left(frs[(S, "full_purge")]) == {}, frs[(S, "full_purge")]["forensic_copies"]
    hyps = (tmp_path / "real" / "hypotheses.jsonl").read_text().splitlines()
    assert len(hyps) == 8


def test_cli_rejects_bad_options(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "evaluators.cli", "sweep", "--summary-levels", "0,3", "--out", str(tmp_path / "x")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 2 and "summary levels" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "evaluators.cli", "sweep", "--data", str(tmp_path / "missing.json"),
         "--out", str(tmp_path / "y")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 2 and "missing.json" in proc.stderr


@pytest.mark.llm
def test_sweep_with_llamacpp_backend(sample_path, tmp_path):
    """A real llama.cpp sweep; a second run over the same output (a resumed sweep is a
    new process) sends none of the prompts already answered: all come from the cache."""
    out = tmp_path / "llm"
    cmd = [sys.executable, "-m", "evaluators.cli", "sweep", "--data", str(sample_path), "--n", "1",
           "--model", "llamacpp:gemma3-270m", "--summary-levels", "0", "--k", "1",
           "--deletion-modes", "full_purge", "--max-tokens", "8", "--n-resamples", "50",
           "--out", str(out), "--quiet"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["totals"]["llm_calls"] > 0
    frs = {(r["S"], r["mode"]): r for r in m["frs"]}
    assert _copies_left(frs[(0, "full_purge")]) == {}
    (out / "results.jsonl").unlink()
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    m2 = json.loads((out / "metrics.json").read_text())
    assert m2["totals"]["llm_calls"] == 0
    assert m2["totals"]["cache_hits"] >= m["totals"]["llm_calls"]
    assert m2["by_S"] == m["by_S"]


def test_resume_repairs_a_damaged_line_and_keeps_other_units(small_run, tmp_path):
    import shutil

    out_ref, _ = small_run
    out = tmp_path / "damaged"
    shutil.copytree(out_ref, out)
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    markers = [i for i, line in enumerate(lines) if '"unit_done"' in line]
    victim = markers[3] + 5  # a record inside the 5th unit
    victim_unit = json.loads(lines[victim])["unit"]
    lines[victim] = "XX" + lines[victim]
    (out / "results.jsonl").write_text("".join(lines))
    records, done, bad = load_records(out / "results.jsonl")
    assert bad == [victim + 1]
    assert victim_unit not in done and len(done) == len(markers) - 1
    with pytest.warns(UserWarning, match=f"lines \\[{victim + 1}\\]"):
        m = run_sweep(SweepConfig(**SMALL), out, resume=True, progress=False)
    assert list(out.glob("results.jsonl.damaged-*")), "the damaged original is kept"
    assert stable(m) == stable(json.loads((out_ref / "metrics.json").read_text()))
    assert not (out / ".work").exists()


def test_resume_refuses_changed_data(sample_path, tmp_path):
    data = tmp_path / "data.json"
    data.write_bytes(sample_path.read_bytes())
    cfg = dict(data=str(data), n=1, summary_levels=[0], ks=[1], deletion_modes=[], n_resamples=20)
    run_sweep(SweepConfig(**cfg), tmp_path / "o", progress=False)
    rows = json.loads(data.read_text())
    data.write_text(json.dumps(rows[::-1]))
    with pytest.raises(ValueError, match="data_sha256"):
        run_sweep(SweepConfig(**cfg), tmp_path / "o", resume=True, progress=False)


def test_cli_messages_name_the_option(tmp_path):
    for args, needle in ((["--k", "0"], "--k: k values must be positive"),
                         (["--n", "0"], "--n:"),
                         (["--data", str(tmp_path)], "--data:")):
        proc = subprocess.run([sys.executable, "-m", "evaluators.cli", "sweep", *args, "--out", str(tmp_path / "o")],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and needle in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "pydantic" not in proc.stderr
