"""`memkit judge` end to end: a real sweep on the LongMemEval sample, re-scored by a
real LLM judge (gemma3-270m behind llama.cpp's OpenAI-compatible server), and by a FAKE
remote judge API (tests/fakes.py's FakeOpenAIServer, scripted per question) whose
replies include ones with no clear verdict."""

from __future__ import annotations

import json
import shutil

import pytest
import typer
from typer.testing import CliRunner

from evaluators.cli.judge import register as register_cli
from evaluators.scoring.judge_parse import parse_verdict
from evaluators.sweep import SweepConfig, run_sweep
from tests.fakes import FakeOpenAIServer


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


@pytest.fixture(scope="module")
def finished_run(sample_path, tmp_path_factory):
    """One real sweep on the sample (8 questions, S=0, k=1), shared: each test judges a copy."""
    out = tmp_path_factory.mktemp("judge_run") / "run"
    run_sweep(SweepConfig(data=str(sample_path), n=8, summary_levels=[0], ks=[1], deletion_modes=[],
                          n_resamples=50), out, progress=False)
    return out


def _copy(run, tmp_path):
    return shutil.copytree(run, tmp_path / "run")


TEXT_REPLIES = {  # question (start) -> the fake judge's reply to the one-word prompt
    "How many pages": "I cannot decide.",
    "How many pre-1920": "Yes or no: no",
    "How many years older": "The reply gives 12 days, not 9, so I cannot say yes. No.",
    "I'm planning to go back": "**Yes**",
    "What should I serve": "Yes or no",
    "How many bikes": "No.",
    "Where did I attend": "<think>19 or 18? within one</think> Yes.",
    "How many projects": "Sí.",
}


class ScriptedFakeJudge(FakeOpenAIServer):
    """A FAKE remote judge API (tests/fakes.py's FakeOpenAIServer) that replies per
    question: :data:`TEXT_REPLIES` to every request (``structured=False``: a provider
    that ignores the JSON schema), or, with ``structured=True``, the schema's JSON to a
    request that asks for it."""

    def __init__(self, structured: bool) -> None:
        self.structured = structured
        super().__init__(model="fake-judge")

    @property
    def reply(self) -> str:  # read by the fake's handler after it stored the request
        body = self.requests[-1]
        prompt = body["messages"][-1]["content"]
        text = next(r for q, r in TEXT_REPLIES.items() if f"Question: {q}" in prompt)
        if self.structured and "response_format" in body:
            verdict = parse_verdict(text)
            return json.dumps({"correct": bool(verdict), "reason": "scripted"})
        return text

    @reply.setter
    def reply(self, value: str | None) -> None:  # FakeOpenAIServer.__init__ sets it
        pass


def _judge_cli(run, server):
    return CliRunner().invoke(_app(), ["judge", str(run), "--model", "openai:fake-judge",
                                       "--base-url", server.base_url])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_unparsed_judge_replies_are_counted_apart_and_listed(finished_run, tmp_path, monkeypatch):
    run = _copy(finished_run, tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "not-needed")
    with ScriptedFakeJudge(structured=False) as server:
        res = _judge_cli(run, server)
    assert res.exit_code == 0, res.output
    assert "2 of 8 judge replies unparsed" in res.output
    # structured output asked once; its reply was no JSON, so the run went on with one word
    assert "response_format" in server.requests[0]
    assert sum("response_format" in b for b in server.requests) == 1 and len(server.requests) == 9
    rows = [json.loads(line) for line in (run / "judge.jsonl").read_text().splitlines()]
    by_q = {next(q for q in TEXT_REPLIES if r["question"].startswith(q)): r for r in rows}
    # verdicts as labelled by hand from the scripted replies
    expected = {"How many pages": None, "How many pre-1920": False, "How many years older": False,
                "I'm planning to go back": True, "What should I serve": None, "How many bikes": False,
                "Where did I attend": True, "How many projects": True}
    assert {q: r["judge"] for q, r in by_q.items()} == expected
    assert all(r["judge_method"] == "text" and r["judge_reply"] == TEXT_REPLIES[q] for q, r in by_q.items())
    block = json.loads((run / "metrics.json").read_text())["judge"]
    assert (block["n_answers"], block["n_judged"], block["n_unparsed"]) == (8, 6, 2)
    assert block["method"] == {"structured": 0, "text": 6}
    assert sorted(u["judge_reply"] for u in block["unparsed"]) == ["I cannot decide.", "Yes or no"]
    assert block["PR_judge"] == pytest.approx(3 / 6)  # over the judged answers only
    judged = [r for r in rows if r["judge"] is not None]
    for rule in ("lme", "study"):
        a = block["agreement"][rule]
        assert a["n"] == 6
        assert a["accuracy"] == pytest.approx(sum(r[rule] == r["judge"] for r in judged) / 6)
    assert {d["question_id"] for d in block["disagreements"]} == {
        r["question_id"] for r in judged if r["lme"] != r["judge"] or r["study"] != r["judge"]}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_structured_verdicts_through_a_fake_remote_judge(finished_run, tmp_path, monkeypatch):
    run = _copy(finished_run, tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "not-needed")
    with ScriptedFakeJudge(structured=True) as server:
        res = _judge_cli(run, server)
    assert res.exit_code == 0, res.output
    assert "0 of 8 judge replies unparsed" in res.output
    assert len(server.requests) == 8 and all("response_format" in b for b in server.requests)
    block = json.loads((run / "metrics.json").read_text())["judge"]
    assert block["method"] == {"structured": 8, "text": 0} and block["n_unparsed"] == 0
    rows = [json.loads(line) for line in (run / "judge.jsonl").read_text().splitlines()]
    # the script answers false where the text reply had no verdict (bool(None))
    assert sum(r["judge"] for r in rows) == 3 and all(r["judge_reason"] == "scripted" for r in rows)


@pytest.mark.llm
@pytest.mark.slow
def test_judge_a_real_run_through_an_openai_compatible_server(finished_run, tmp_path, llama_server, monkeypatch):
    out = _copy(finished_run, tmp_path)
    hyps_before = (out / "hypotheses.jsonl").read_bytes()
    monkeypatch.setenv("MEMKIT_TEST_JUDGE_KEY", "not-needed")
    metrics_before = (out / "metrics.json").read_bytes()
    res = CliRunner().invoke(_app(), [
        "judge", str(out), "--model", "openai:gemma", "--base-url", llama_server,
        "--api-key-env", "MEMKIT_TEST_JUDGE_KEY", "--max-tokens", "8",
    ])
    rows = [json.loads(line) for line in (out / "judge.jsonl").read_text().splitlines()]
    assert len(rows) == 8  # one distinct answer per question (one S, one k)
    # every reply is kept, and read by the documented parse (structured output is tried
    # first: llama.cpp's server constrains it to the schema, cut here by --max-tokens)
    assert all(isinstance(r["judge_reply"], str) for r in rows)
    assert all(r["judge"] is parse_verdict(r["judge_reply"]) for r in rows if r["judge_method"] == "text")
    judged = [r for r in rows if r["judge"] is not None]  # unparsed replies are counted apart
    if not judged:
        # gemma3-270m often echoes the prompt ("You are grading an assistant's reply"):
        # no verdict is read into such replies, and the run says so instead of scoring
        assert res.exit_code == 2 and "no clear verdict for any of the 8 answers" in res.output
        assert (out / "metrics.json").read_bytes() == metrics_before
        assert (out / "hypotheses.jsonl").read_bytes() == hyps_before
        return
    assert res.exit_code == 0, res.output
    assert "lme: accuracy" in res.output and "study: accuracy" in res.output
    block = json.loads((out / "metrics.json").read_text())["judge"]
    assert block["model"] == "openai:gemma" and block["n_answers"] == 8
    judged = [r for r in rows if r["judge"] is not None]  # unparsed replies are counted apart
    assert f"{8 - len(judged)} of 8 judge replies unparsed" in res.output
    assert block["n_judged"] == len(judged) and block["n_unparsed"] == 8 - len(judged)
    n = len(judged)
    assert block["PR_judge"] == pytest.approx(sum(r["judge"] for r in judged) / n)
    for rule in ("lme", "study"):
        a = block["agreement"][rule]
        # accuracy and the disagreement counts re-derived from judge.jsonl
        assert a["accuracy"] == pytest.approx(sum(r[rule] == r["judge"] for r in judged) / n)
        assert a["rule_yes_judge_no"] == sum(r[rule] and not r["judge"] for r in judged)
        assert a["rule_no_judge_yes"] == sum(r["judge"] and not r[rule] for r in judged)
    assert len(block["disagreements"]) == sum(r["lme"] != r["judge"] or r["study"] != r["judge"] for r in judged)
    report = (out / "report.md").read_text()
    assert "PR rules vs the LLM judge (openai:gemma" in report
    assert (out / "hypotheses.jsonl").read_bytes() == hyps_before
