"""`memkit judge` end to end: a real sweep on the LongMemEval sample, re-scored by a
real LLM judge (gemma3-270m behind llama.cpp's OpenAI-compatible server)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from evaluators.judge_run import register_cli
from evaluators.sweep import SweepConfig, run_sweep


def _app() -> typer.Typer:
    app = typer.Typer()
    register_cli(app)

    @app.command("noop")  # a second command keeps typer from collapsing to a single one
    def noop() -> None:
        """Nothing."""

    return app


def test_judge_cli_names_a_missing_run(tmp_path):
    res = CliRunner().invoke(_app(), ["judge", str(tmp_path / "nope"), "--model", "extractive"])
    assert res.exit_code == 2
    assert "metrics.json not found" in res.output and "has not finished" in res.output


@pytest.mark.llm
@pytest.mark.slow
def test_judge_a_real_run_through_an_openai_compatible_server(sample_path, tmp_path, llama_server, monkeypatch):
    out = tmp_path / "run"
    run_sweep(SweepConfig(data=str(sample_path), n=8, summary_levels=[0], ks=[1], deletion_modes=[],
                          n_resamples=50), out, progress=False)
    hyps_before = (out / "hypotheses.jsonl").read_bytes()
    monkeypatch.setenv("MEMKIT_TEST_JUDGE_KEY", "not-needed")
    res = CliRunner().invoke(_app(), [
        "judge", str(out), "--model", "openai:gemma", "--base-url", llama_server,
        "--api-key-env", "MEMKIT_TEST_JUDGE_KEY", "--max-tokens", "8",
    ])
    assert res.exit_code == 0, res.output
    assert "lme: accuracy" in res.output and "study: accuracy" in res.output
    rows = [json.loads(line) for line in (out / "judge.jsonl").read_text().splitlines()]
    assert len(rows) == 8  # one distinct answer per question (one S, one k)
    block = json.loads((out / "metrics.json").read_text())["judge"]
    assert block["model"] == "openai:gemma" and block["n_answers"] == 8
    assert block["PR_judge"] == pytest.approx(sum(r["judge"] for r in rows) / 8)
    for rule in ("lme", "study"):
        a = block["agreement"][rule]
        # accuracy and the disagreement counts re-derived from judge.jsonl
        assert a["accuracy"] == pytest.approx(sum(r[rule] == r["judge"] for r in rows) / 8)
        assert a["rule_yes_judge_no"] == sum(r[rule] and not r["judge"] for r in rows)
        assert a["rule_no_judge_yes"] == sum(r["judge"] and not r[rule] for r in rows)
    assert len(block["disagreements"]) == sum(r["lme"] != r["judge"] or r["study"] != r["judge"] for r in rows)
    report = (out / "report.md").read_text()
    assert "PR rules vs the LLM judge (openai:gemma" in report
    assert (out / "hypotheses.jsonl").read_bytes() == hyps_before
