"""The examples run end to end, as a user runs them: each a subprocess with a small size.

Assertions re-derive the claims from what each example wrote (per-call records, the
sweep's own files), not from the example's summary numbers alone.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def run_example(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )


def test_example1_audit_extracts_before_and_not_after_full_purge(tmp_path):
    out = tmp_path / "ex1.json"
    proc = run_example("01_audit_react_agent.py", "--n", "2", "--mode", "full_purge",
                       "--n-resamples", "200", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "# memkit privacy audit" in proc.stdout and "| AER max |" in proc.stdout
    res = json.loads(out.read_text())
    secrets = {c["user_id"]: c["value"] for c in res["canaries"]}
    assert len(secrets) == 2 and res["forget_mode"] == "full_purge"
    probes = [r for r in res["records"] if r["query_kind"] == "probe"]
    before = [r for r in probes if r["phase"] == "main"]
    after = [r for r in probes if r["phase"] == "forget"]
    assert len(before) == 2 * 9 and len(after) == 2 * 9 * 3  # design tiers + raw + summary
    # before forget: every user's canary comes back verbatim from some probe
    for user, secret in secrets.items():
        assert any(secret in r["response"] for r in before if r["user_id"] == user)
    # after full_purge: from no probe, whatever the tier restriction
    assert not any(secrets[r["user_id"]] in r["response"] for r in after)
    assert res["AER"]["max"] > 0 and res["AER_after"]["max"] == 0.0
    assert res["FRS"] == {"raw": 0.0, "summary": 0.0, "worst": 0.0}
    # the store holds nothing; the agent's InMemorySaver still holds both users'
    # conversations, probes and answers included (the checkpoint surface)
    assert res["residue"] is not None and res["residue"]["checkpoint"] == 2
    assert sum(v for k, v in res["residue"].items() if k != "checkpoint") == 0
    # AER_direct by hand: mean over users of the share of direct templates that leaked
    direct = [np.mean([secrets[u] in r["response"] for r in before if r["user_id"] == u and r["level"] == "direct"])
              for u in secrets]
    assert res["AER"]["direct"] == pytest.approx(float(np.mean(direct)), abs=1e-6)
    assert 0.0 <= res["PR"] <= 1.0


def test_example1_delete_threads_leaves_no_residue_anywhere(tmp_path):
    out = tmp_path / "ex1.json"
    proc = run_example("01_audit_react_agent.py", "--n", "2", "--mode", "full_purge", "--delete-threads",
                       "--n-resamples", "50", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["checkpoint_residue_kept_threads"] == 2
    assert sum(res["residue"].values()) == 0 and res["residue_unchecked"] == {}
    assert "after deleting their threads" in proc.stdout


def _pua_by_grid(rows: list[dict]) -> float:
    """PUA = ∫₀¹ max{PR(k) : AER_max(k) <= a} da, by a fine Riemann sum."""
    grid = np.linspace(0, 1, 20001)[:-1]
    vals = [max([r["PR"] for r in rows if r["AER_max"] <= a], default=0.0) for a in grid]
    return float(np.mean(vals))


def test_example2_custom_summarizer_changes_the_frontier(tmp_path):
    out = tmp_path / "ex2.json"
    proc = run_example("02_swap_summarizer.py", "--n", "2", "--ks", "1,3", "--json", str(out),
                       "--out", str(tmp_path / "sweep"), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    default, dropping = res["designs"]["study"], res["designs"]["dropping"]
    assert [r["k"] for r in default["rows"]] == [1, 3]
    # the dropping summarizer keeps no credential-shaped fact, so nothing can leak
    assert all(r["AER_max"] == 0.0 for r in dropping["rows"])
    assert any(r["AER_max"] > 0 for r in default["rows"])  # the default keeps the canary fact
    for design in (default, dropping):
        assert design["PUA"] == pytest.approx(_pua_by_grid(design["rows"]), abs=1e-3)
    assert dropping["PUA"] >= default["PUA"]
    # both designs ran through the sweep; the records say which design answered
    for name in ("study", "dropping"):
        recs = [json.loads(line) for line in (tmp_path / "sweep" / name / "results.jsonl").read_text().splitlines()]
        assert {r["design"] for r in recs if r["type"] == "call"} == {name}
    (d,) = res["differences"]
    mean_aer = lambda rows: sum(r["AER_max"] for r in rows) / len(rows)  # noqa: E731
    assert d["AER_max_diff"] == pytest.approx(mean_aer(default["rows"]) - mean_aer(dropping["rows"]), abs=1e-6)
    assert "PUA study" in proc.stdout and "compare" in proc.stdout


def test_example6_compares_three_designs(tmp_path):
    out = tmp_path / "designs"
    proc = run_example("06_compare_designs.py", "--n", "2", "--summary-levels", "0,1", "--ks", "1,3",
                       "--deletion-modes", "", "--n-resamples", "50", "--out", str(out), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cmp = json.loads((out / "compare.json").read_text())
    assert {r["design"] for r in cmp["table2"]} == {"study", "redacting", "mmr"}
    assert cmp["paired"] and len(cmp["differences"]) == 3 * 2  # 3 pairs x 2 levels
    # S=0 reads raw turns, which redacting leaves as written: no difference there
    (s0,) = [d for d in cmp["differences"] if d["S"] == 0 and "redacting" in d["B"] and "study" in d["A"]]
    assert s0["AER_max_diff"] == 0 and s0["PR_diff"] == 0
    assert "Δ" in proc.stdout


def test_example3_sweep_writes_metrics(tmp_path):
    run_dir = tmp_path / "sweep"
    proc = run_example("03_sweep_from_python.py", "--n", "2", "--out", str(run_dir),
                       "--n-resamples", "100", "--json", str(tmp_path / "m.json"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert json.loads((tmp_path / "m.json").read_text()) == metrics
    assert [r["S"] for r in metrics["by_S"]] == [0, 1] and metrics["ks"] == [1, 3]
    frs = {(r["S"], r["mode"]): r for r in metrics["frs"]}
    assert set(frs) == {(0, "none"), (0, "full_purge"), (1, "none"), (1, "full_purge")}
    for S in (0, 1):
        assert frs[(S, "full_purge")]["FRS_worst"] == 0.0 and frs[(S, "full_purge")]["forensic_total"] == 0
        assert frs[(S, "none")]["forensic_total"] > 0  # the control keeps the canary
    # FRS_worst of mode none by hand from results.jsonl: AER_max over levels, tier raw, S=0
    recs = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sum(r["type"] == "unit_done" for r in recs) == 4
    raw_none = [r for r in recs if r["type"] == "call" and r["phase"] == "forget" and r["mode"] == "none"
                and r["tier"] == "raw" and r["S"] == 0]
    by_level = {lv: np.mean([r["extraction"]["exact"] for r in raw_none if r["level"] == lv])
                for lv in ("direct", "indirect", "jailbreak")}
    assert frs[(0, "none")]["FRS_raw"] == pytest.approx(max(by_level.values()), abs=1e-6)
    assert "frontier per summary level" in proc.stdout


def test_example4_without_a_service_exits_with_a_clear_message():
    proc = run_example("04_remote_backends.py", "--provider", "ollama", "--model", "gemma3:12b",
                       "--base-url", "http://127.0.0.1:9", timeout=180)
    assert proc.returncode == 2
    assert "not available" in proc.stderr and "ollama serve" in proc.stderr
    env_proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "04_remote_backends.py"), "--provider", "openai", "--model", "gpt-4o-mini"],
        cwd=REPO, capture_output=True, text=True, timeout=180,
        env={k: v for k, v in {**os.environ, "PYTHONPATH": str(REPO)}.items()
             if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")},
    )
    assert env_proc.returncode == 2 and "OPENAI_API_KEY" in env_proc.stderr


@pytest.mark.llm
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="needs the llamacpp extra")
def test_example4_against_a_local_openai_compatible_server(tmp_path, llama_server):
    out = tmp_path / "ex4.json"
    proc = run_example("04_remote_backends.py", "--provider", "openai", "--model", "gemma",
                       "--base-url", llama_server, "--n", "1", "--no-forget", "--max-tokens", "32",
                       "--json", str(out), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["model"] == "openai:gemma" and len(res["records"]) == 1 + 9
    assert all(isinstance(r["response"], str) and r["response"].strip() for r in res["records"])
    secret = res["canaries"][0]["value"]
    direct = [secret in r["response"] for r in res["records"] if r.get("level") == "direct"]
    assert res["AER"]["direct"] == pytest.approx(float(np.mean(direct)), abs=1e-6)


def test_the_snippets_of_docs_audit_md_run(embedder):
    """The README section's code blocks run as written (with smaller n)."""
    import re

    spec = importlib.util.spec_from_file_location("memkit_example_01_doc", EXAMPLES / "01_audit_react_agent.py")
    ex1 = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ex1
    spec.loader.exec_module(ex1)
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "audit.md").read_text(), re.S)
    assert len(blocks) == 3 and len(blocks[1].strip().splitlines()) == 5

    import howto_agent

    from memkit.models.chat import embeddings
    from memkit.models.extractive import answer

    printed: list[str] = []
    env = {"build_agent": ex1.build_agent, "build_memory_writer": ex1.build_memory_writer,
           "build_graph": howto_agent.build_graph, "model": howto_agent.echo_model(), "embed": embeddings(),
           "my_agent": lambda question, memories: answer(question, memories),
           "print": lambda *a: printed.append(" ".join(map(str, a)))}
    for block in blocks:
        exec(block.replace("n=4", "n=1"), env)
    assert len(printed) == 3
    assert "| AER max | 1.00 [1.00, 1.00] | 0.00 |" in printed[0]  # your graph: leaked, then deleted
    assert "| AER max | 1.00 [1.00, 1.00] | 0.00 |" in printed[1]  # leaked, then purged
    assert "| AER max | 1.00 [1.00, 1.00] | - |" in printed[2]  # echoes memories, no forget


def test_example5_audit_of_mem0_finds_its_history_and_chroma_copies(tmp_path):
    """mem0's delete_all removes the memories from search (AER after = 0) but its history
    database keeps every deleted text, and Chroma's files keep bytes of them: memkit's
    residue counts are checked against SQL over the history database and a plain byte
    search of the Chroma directory (files mem0 and chromadb wrote, not memkit)."""
    import sqlite3

    out, work = tmp_path / "ex5.json", tmp_path / "mem0"
    proc = run_example("05_audit_mem0.py", "--n", "2", "--n-resamples", "50", "--workdir", str(work),
                       "--json", str(out), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    secrets = {c["user_id"]: c["value"] for c in res["canaries"]}
    assert len(secrets) == 2 and res["forget_mode"] == "mem0 delete_all"
    probes = [r for r in res["records"] if r["query_kind"] == "probe"]
    before = [r for r in probes if r["phase"] == "main"]
    after = [r for r in probes if r["phase"] == "forget"]
    # mem0 hands every user's canary back before the forget, and none after delete_all
    for user, secret in secrets.items():
        assert any(secret in r["response"] for r in before if r["user_id"] == user)
    assert after and not any(secrets[r["user_id"]] in r["response"] for r in after)
    assert res["AER"]["max"] > 0 and res["AER_after"]["max"] == 0.0
    # history.db: live rows still hold each canary (SQL, independent of memkit)
    with sqlite3.connect(work / "history.db") as db:
        rows = db.execute("SELECT coalesce(old_memory,'') || ' ' || coalesce(new_memory,'') FROM history").fetchall()
    in_history = sum(any(s in r[0] for r in rows) for s in secrets.values())
    assert in_history == 2
    assert res["residue"]["side_sqlite"] == in_history
    # Chroma's directory: a user counts on some disk surface iff its bytes hold the canary
    blobs = [p.read_bytes() for p in (work / "chroma").rglob("*") if p.is_file()]
    on_disk = sum(any(s.encode() in b for b in blobs) for s in secrets.values())
    disk = max(v for k, v in res["residue"].items() if k.startswith("disk_"))
    assert disk == on_disk
    assert res["residue_unchecked"] == {}
    assert "users with copies left" in proc.stdout
    assert "now removed" not in proc.stdout  # --workdir keeps mem0's files
