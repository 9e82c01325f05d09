"""Concurrent model calls: ``memkit.models.chat.answer_many`` and the sweep's
``--concurrency`` / ``--rps`` against a fake OpenAI-compatible server on 127.0.0.1
(``tests/fakes.py``: a fake, named as such, standing for a remote API that
this machine cannot reach). Replies are checked against the in-process
``ExtractiveChatModel`` the fake answers with; token counts against the fake's
documented definition (whitespace-separated words)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators.sweep import SweepConfig, run_sweep
from graphs.prompts import respond_prompt
from memkit.models.chat import answer_many, chat_model, token_usage
from memkit.models.extractive import ExtractiveChatModel
from memkit.store.cache import LLMCache
from tests.fakes import FakeOpenAIServer, words
from tests.stable import stable


def _prompts(n: int) -> list:
    return [respond_prompt("What is my dog's name?", [f"My dog is called Rex{i}.", f"I live in town {i}."])
            for i in range(n)]


def _model(server: FakeOpenAIServer, **kw):
    # max_retries=0: the openai client's own retries off, so retries are memkit's (with_retry)
    return chat_model(f"openai:{server.model}", base_url=server.base_url, max_retries=0, **kw)


def test_answer_many_keeps_order_sends_each_prompt_once_and_overlaps_calls() -> None:
    prompts = _prompts(6)
    asked = prompts + [prompts[2], prompts[0]]
    with FakeOpenAIServer(latency=0.3) as server:
        replies = answer_many(_model(server), asked, concurrency=3)
        assert server.chat_requests() == 6  # the two repeats were not sent
        assert 1 < server.max_in_flight <= 3
    expected = [ExtractiveChatModel().invoke(p).text for p in asked]
    assert [m.text for m, _ in replies] == expected
    assert [dt for _, dt in replies][6:] == [0.0, 0.0]
    assert all(dt > 0 for _, dt in replies[:6])


def test_retries_rate_limits_and_server_errors_but_not_bad_requests() -> None:
    for status in (429, 500, 503):
        with FakeOpenAIServer(fail_first=2, status=status) as server:
            replies = answer_many(_model(server), _prompts(1), initial_wait=0.01, max_wait=0.05)
            assert server.chat_requests() == 3
            assert replies[0][0].text == ExtractiveChatModel().invoke(_prompts(1)[0]).text
    with FakeOpenAIServer() as server:
        with pytest.raises(Exception, match="only answers memkit's prompts"):
            answer_many(_model(server), ["hello"], initial_wait=0.01)
        assert server.chat_requests() == 1  # a 400 is not retried


def test_answer_many_rejects_bad_options() -> None:
    with FakeOpenAIServer() as server:
        with pytest.raises(ValueError, match="--concurrency"):
            answer_many(_model(server), _prompts(1), concurrency=0)
        with pytest.raises(ValueError, match="--rps"):
            answer_many(_model(server), _prompts(1), rps=0)


def test_rps_cap_still_answers_everything() -> None:
    with FakeOpenAIServer() as server:
        replies = answer_many(_model(server), _prompts(3), concurrency=3, rps=50.0)
        assert server.chat_requests() == 3
    assert [m.text for m, _ in replies] == [ExtractiveChatModel().invoke(p).text for p in _prompts(3)]


def test_token_usage_sums_provider_usage_and_skips_cache_hits(tmp_path: Path) -> None:
    prompts = _prompts(3)
    cache = LLMCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer() as server:
        model = _model(server, cache=cache)
        with token_usage() as usage:
            answer_many(model, prompts, concurrency=2)
            answer_many(model, prompts[:2], concurrency=2)  # both from the cache
        assert server.chat_requests() == 3
    brain = ExtractiveChatModel()
    prompt_words = sum(words(str(m.content)) for p in prompts for m in p.to_messages())
    reply_words = sum(words(brain.invoke(p).text) for p in prompts)
    row = usage.by_model["fake-gpt"]
    assert row == {"calls": 3, "input_tokens": prompt_words, "output_tokens": reply_words,
                   "total_tokens": prompt_words + reply_words, "cached_calls": 2}


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_concurrent_sweep_equals_sequential_sweep(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        cfg = dict(n=2, seed=5, model=f"openai:{server.model}", base_url=server.base_url,
                   summary_levels=[0, 1], ks=[1, 3], deletion_modes=["none", "raw_plus_resummarize"],
                   n_resamples=50)
        seq = run_sweep(SweepConfig(**cfg, concurrency=1), tmp_path / "seq", progress=False)
        sent_seq = server.chat_requests()
        con = run_sweep(SweepConfig(**cfg, concurrency=8), tmp_path / "con", progress=False)
        sent_con = server.chat_requests() - sent_seq
        assert server.max_in_flight > 1
    assert sent_con == sent_seq  # same distinct prompts, each sent once per sweep
    assert stable(_records(tmp_path / "seq" / "results.jsonl")) == stable(_records(tmp_path / "con" / "results.jsonl"))
    assert seq["totals"] == con["totals"]
    tokens = seq["totals"]["tokens"]
    assert set(tokens) == {"write", "main", "forget"}  # S=1 summarizes; the resummarize mode too
    calls = sum(row["calls"] for phase in tokens.values() for row in phase.values())
    # every request the server saw, the forget phase's own (copied) LLM cache included
    assert calls == sent_seq >= seq["totals"]["llm_calls"]
    assert all(row["input_tokens"] > 0 for phase in tokens.values() for row in phase.values())
    assert "Model calls and tokens per phase" in (tmp_path / "seq" / "report.md").read_text()


def test_cli_names_bad_concurrency_and_rps(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from evaluators.cli.sweep import register as register_cli

    app = typer.Typer()
    register_cli(app)
    app.command("noop")(lambda: None)  # two commands: typer keeps `sweep` as a subcommand
    for opt, value in (("--concurrency", "0"), ("--rps", "-1")):
        res = CliRunner().invoke(app, ["sweep", opt, value, "--out", str(tmp_path / "o"), "--quiet"])
        assert res.exit_code == 2, res.output
        assert f"memkit sweep: {opt}:" in res.output
        assert not (tmp_path / "o").exists()
