"""A new user's first hour: the ``memkit`` command run as a user runs it (a
subprocess, real files), checking what it says and that nothing outside the run changed.

One tiny finished sweep (1 synthetic instance, S=0, k=1,3, one deletion mode, stores
kept, hypotheses redacted) is shared by the module; the other subprocesses are
refusals that stop before any model loads, plus one interrupted-and-resumed sweep.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

MEMKIT = [sys.executable, "-m", "evaluators.cli"]
TINY = ["--n", "1", "--summary-levels", "0", "--deletion-modes", ""]


def memkit(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run([*MEMKIT, *args], capture_output=True, text=True, timeout=timeout, env=env, **kw)


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``root`` with its mode and SHA-256 (plain os.walk + hashlib)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath, f)
            out[str(p.relative_to(root))] = (p.stat().st_mode, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def user_folder(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "report.md").write_text("my own report\n")
    (d / "notes.txt").write_text("do not touch\n")
    return d


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One finished tiny sweep run as a user would: ``(run dir, CompletedProcess)``."""
    out = tmp_path_factory.mktemp("first_hour") / "run"
    proc = memkit("sweep", "--n", "1", "--summary-levels", "0", "--k", "3,1", "--deletion-modes", "raw_only",
                  "--keep-stores", "--redact-hypotheses", "--out", str(out), timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def _canary(run: Path) -> str:
    for line in (run / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["type"] == "canary":
            return rec["value"]
    raise AssertionError("no canary record")


# --------------------------------------------------------------------------- 1. --out


@pytest.mark.timeout(120)
def test_sweep_refuses_a_users_folder_and_changes_nothing(tmp_path):
    docs = user_folder(tmp_path)
    before = snapshot(tmp_path)
    proc = memkit("sweep", *TINY, "--k", "1", "--out", str(docs))
    assert proc.returncode == 2
    assert "is not empty and is not a memkit output directory" in proc.stderr
    assert "report.md" in proc.stderr and f"--out {docs}-1" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.timeout(300)
def test_report_compare_and_audit_refuse_a_users_folder(tiny_run, tmp_path):
    run, _ = tiny_run
    docs = user_folder(tmp_path)
    before, run_before = snapshot(tmp_path), snapshot(run)
    rep = memkit("report", str(docs))
    assert rep.returncode == 2 and "is not a memkit sweep run" in rep.stderr, rep.stderr
    cmp_ = memkit("compare", str(run), str(run), "--out", str(docs))
    assert cmp_.returncode == 2 and "is not empty and is not a memkit output directory" in cmp_.stderr, cmp_.stderr
    aud = memkit("audit", "--matrix", "--out", str(docs))
    assert aud.returncode == 2 and "is not empty" in aud.stderr, aud.stderr
    # a sweep run is not a comparison either: compare refuses to write into it
    into_run = memkit("compare", str(run), str(run), "--out", str(run))
    assert into_run.returncode == 2 and "is a memkit sweep run" in into_run.stderr
    assert snapshot(tmp_path) == before and snapshot(run) == run_before


# --------------------------------------------------------------------------- 2. waits, stops


def test_tiny_run_announces_each_phase_and_notes_what_it_changed(tiny_run):
    run, proc = tiny_run
    err = proc.stderr
    assert "note: --k 3,1 runs as 1,3" in err
    for phase in ("loading data (synthetic)", "checking model extractive", "1 instance x S=0: 1 unit;", "model-free",
                  "in canonical order", "writing metrics.json, hypotheses, report and figures"):
        assert phase in err, phase
    assert err.index("loading data") < err.index("writing metrics.json")
    assert "memkit sweep: 1 units in" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_says_what_was_kept_and_resume_counts_this_run(tmp_path, sample_path):
    out = tmp_path / "r"
    data = tmp_path / "three.json"  # 5 real LongMemEval instances (plain json), so the test stays short
    data.write_text(json.dumps(json.loads(Path(sample_path).read_text())[:5]))
    cmd = [*MEMKIT, "sweep", "--data", str(data), "--n", "5000", "--summary-levels", "0", "--k", "1",
           "--deletion-modes", "", "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    results = out / "results.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if results.exists() and '"unit_done"' in results.read_text():
            break
        time.sleep(0.1)
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    kept = sum(1 for line in results.read_text().splitlines() if '"unit_done"' in line)
    assert kept >= 1 and f"interrupted. {kept} finished units are kept in {out}" in err
    assert "stopping after the model calls in flight (Ctrl-C again stops at once)" in err
    resume = err.strip().splitlines()[-1].strip()
    argv = shlex.split(resume)
    assert argv[0] == "memkit" and argv[-1] == "--resume" and "--n" in argv
    done = subprocess.run([*MEMKIT, *argv[1:]], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    n_file = 5
    assert f"{n_file - kept} units run in" in done.stdout and f"{kept} already done ({n_file} in all)" in done.stdout
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["n"] == 5000 and cfg["n_instances"] == n_file  # asked vs run
    assert "--n 5000 exceeds the 5 instances" in done.stderr


@pytest.mark.timeout(120)
def test_os_error_is_one_line(tiny_run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_run[0], copy)
    (copy / "report.html").unlink()
    (copy / "report.html").mkdir()  # cannot be written as a file
    proc = memkit("report", str(copy))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "report.html" in proc.stderr


# --------------------------------------------------------------------------- 3. silent differences


@pytest.mark.timeout(60)
def test_k_with_an_empty_item_is_refused(tmp_path):
    proc = memkit("sweep", *TINY, "--k", "1,,3", "--out", str(tmp_path / "new"))
    assert proc.returncode == 2 and "--k '1,,3' has an empty item" in proc.stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.timeout(120)
def test_redaction_is_recorded_and_kept_by_a_later_report(tiny_run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_run[0], copy)
    assert json.loads((copy / ".memkit-run").read_text())["redact_hypotheses"] is True
    canary = _canary(copy)
    # a hypotheses file that holds the canary again (as an unredacted rewrite would)
    target = copy / "hypotheses" / "S0_k1.jsonl"
    target.write_text(json.dumps({"question_id": "q", "hypothesis": f"it is {canary}"}) + "\n")
    proc = memkit("report", str(copy))  # no --redact-hypotheses: the run's choice holds
    assert proc.returncode == 0, proc.stderr
    assert canary not in target.read_text() and "[REDACTED]" in target.read_text()


@pytest.mark.timeout(120)
def test_compare_says_how_many_instances_were_paired_and_labels_rows(tiny_run, tmp_path):
    run = tiny_run[0]
    twin = tmp_path / "twin"
    shutil.copytree(run, twin)
    out = tmp_path / "cmp"
    proc = memkit("compare", str(run), str(twin), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "paired on 1 of 1 (A) and 1 (B) instances" in proc.stdout
    md = (out / "compare.md").read_text()
    assert "| run | model |" in md and "(run)" in md and "(twin)" in md
    again = memkit("compare", str(run), str(twin), "--out", str(out))  # its own output: rewritten
    assert again.returncode == 0, again.stderr


def test_report_names_the_largest_k_and_counts_identical_files_once(tiny_run):
    run = tiny_run[0]
    md = (run / "report.md").read_text()
    assert "`hypotheses.jsonl` is a copy of `hypotheses/S0_k3.jsonl` (the first S and the largest k)" in md
    bodies = {p.read_bytes() for p in [run / "hypotheses.jsonl", *(run / "hypotheses").glob("*.jsonl")]}
    n = len(bodies)
    assert f"{n} distinct hypotheses file{'s' if n != 1 else ''}" in md


# --------------------------------------------------------------------------- 4. recipes


def test_cost_is_said_per_unit_for_the_grid():
    from evaluators.runner import probe_queries
    from evaluators.sweep.config import SweepConfig
    from evaluators.sweep.run import cost_line
    from memkit.dataset.synthetic import synthetic

    cfg = SweepConfig(model="openai:gpt-4o-mini", ks=[1, 3], summary_levels=[0], deletion_modes=["raw_only"])
    insts = synthetic(2, 0, sessions_per_instance=3, turns_per_session=6)
    line = cost_line(cfg, insts, 2, 2)
    probes = len(probe_queries())
    per_unit = (1 + probes) * 2 + 1 * (probes * 2 + 1) * 2  # S=0: no summaries
    assert f"up to {per_unit} LLM calls per unit" in line and f"up to {2 * per_unit} in all" in line


def test_every_chat_backend_has_a_default_cap_on_generated_tokens():
    from memkit.models.chat import DEFAULT_MAX_TOKENS, chat_model

    assert chat_model("openai:gpt-4o-mini", api_key="k").max_tokens == DEFAULT_MAX_TOKENS
    assert chat_model("openai:gpt-4o-mini", api_key="k", max_tokens=32).max_tokens == 32
    assert chat_model("ollama:gemma3:12b", check=False).num_predict == DEFAULT_MAX_TOKENS


# --------------------------------------------------------------------------- 6. smaller


@pytest.mark.timeout(120)
def test_residue_scans_a_kept_unit_by_its_id(tiny_run):
    run, proc = tiny_run
    line = next(x.strip() for x in proc.stdout.splitlines() if x.strip().startswith("memkit residue --run"))
    argv = shlex.split(line)
    res = memkit(*argv[1:], "--json", "--no-embeddings")
    assert res.returncode in (0, 1, 3), res.stderr
    report = json.loads(res.stdout)
    assert "raw_only" in json.dumps(report) or report  # a report of the kept store
    bad = memkit("residue", "--run", str(run), "--unit", "nope", "--mode", "raw_only")
    assert bad.returncode == 2 and "no unit 'nope'" in bad.stderr


@pytest.mark.timeout(60)
def test_help_is_plain_and_whole():
    for cmd in ("sweep", "report", "compare", "residue"):
        proc = memkit(cmd, "--help")
        assert proc.returncode == 0
        for artefact in ("<bool>", "<list", "{", "…"):
            assert artefact not in proc.stdout, (cmd, artefact)


# --------------------------------------------------------------------------- 5. findings wording


def test_a_one_instance_run_gets_a_small_sample_warning_not_a_verdict(tiny_run):
    run = tiny_run[0]
    md = (run / "report.md").read_text()
    findings = json.loads((run / "metrics.json").read_text())["findings"]
    tested = [f for f in findings if f["value"] is not None and f["verdict"] != "not testable"]
    assert tested, "the tiny run measures some finding (k effect at S=0)"
    for f in tested:
        if f["id"] != "purge_and_tombstone_clear":  # '== 0' is read per instance, no CI
            assert f["verdict"] == "inconclusive" and f["reason"].startswith("small sample: 1 instance;"), f
    assert "small sample: 1 instance" in md
    # not testable says why: this run has no S=1 and ran no raw_plus_resummarize
    by_id = {f["id"]: f for f in findings}
    assert by_id["summary_cuts_aer"]["reason"] == "this run has no S=1 (--summary-levels)"
    assert by_id["resummarize_leaves_residue"]["reason"] == "this run ran no raw_plus_resummarize (--deletion-modes)"


def _metrics_with(**s1) -> dict:
    s0 = {"S": 0, "PR": 0.4, "AER_max": 0.8, "k_effect_PR": 0.2, "k_effect_PR_ci": [0.1, 0.3],
          "k_effect_AER_max": 0.1, "k_effect_AER_max_ci": [0.05, 0.2]}
    row = {"S": 1, "PR_cost_relative": -0.25, "PR_cost_relative_ci": [-0.68, -0.02],
           "delta_S_relative": 0.7, "delta_S_relative_ci": [0.6, 0.8]}
    row.update(s1)
    frs = [{"S": 1, "mode": "raw_only", "FRS_summary": 1.0, "FRS_summary_ci": [1.0, 1.0]}]
    return {"model": "llamacpp:gemma3-270m", "summarizer_model": "extractive", "by_S": [s0, row], "frs": frs,
            "ks": [1, 25], "n_instances": 20}


def test_findings_say_sign_in_words_test_and_magnitude_apart():
    from evaluators.report.findings import evaluate_findings
    from evaluators.report.markdown import _verdict_cell

    got = {f["id"]: f for f in evaluate_findings(_metrics_with())}
    cost = got["summary_pr_cost"]
    assert cost["verdict"] == "reproduced"  # a cost of −25% is at or below 10%
    assert cost["reading"] == "PR rose 25% from S=0 to S=1: a gain, no cost"
    assert cost["test"] == "the relative PR cost ≤ 0.1, applied to its 95% CI [−0.68, −0.02]"
    residue = got["raw_only_leaves_residue"]
    assert residue["magnitude"] == "5.0× the study's 0.2"
    assert "verbatim" in residue["note"]
    cell = _verdict_cell(residue)
    assert cell.startswith("direction reproduced; magnitude 5.0× the study's 0.2 (CI above 0); test: FRS_summary > 0")
    # not testable names the real reason
    zero = {f["id"]: f for f in evaluate_findings({**_metrics_with(PR_cost_relative=None), "by_S": [
        {"S": 0, "PR": 0.0, "AER_max": 0.5}, {"S": 1, "PR_cost_relative": None}]})}
    assert zero["summary_pr_cost"]["reason"] == "PR at S=0 is 0, so a cost relative to it is undefined"
