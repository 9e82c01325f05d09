"""A small real sweep over the LongMemEval sample records both PR rules and both AERs,
and hypotheses.jsonl stays what LongMemEval's evaluate_qa.py reads."""

from __future__ import annotations

import json

import pytest

from evaluators.scoring.metrics import answers_correct
from evaluators.sweep import SweepConfig, run_sweep


@pytest.fixture(scope="module")
def run(sample_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("pr_rules") / "out"
    cfg = SweepConfig(data=str(sample_path), n=8, summary_levels=[0], ks=[1, 3], deletion_modes=["none"],
                      n_resamples=100)
    return out, run_sweep(cfg, out, progress=False)


@pytest.mark.slow
def test_records_carry_both_verdicts(run, embedder):
    out, metrics = run
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    qs = [r for r in recs if r.get("type") == "call" and r["query_kind"] == "question" and r["phase"] == "main"]
    assert qs and all(isinstance(r["correct"], bool) and isinstance(r["correct_study"], bool) for r in qs)
    # re-scored independently from the recorded responses
    assert [r["correct_study"] for r in qs] == answers_correct(
        [r["response"] for r in qs], [r["expected"] for r in qs], embeddings=embedder, rule="study")
    assert [r["correct"] for r in qs] == answers_correct(
        [r["response"] for r in qs], [r["expected"] for r in qs], embeddings=embedder,
        question_ids=[r["question_id"] for r in qs], question_types=[r["question_type"] for r in qs],
        questions=[r["query"] for r in qs])
    # the float reference of the sample is matched as "38", not "38.0"
    assert all(r["expected"] != "38.0" for r in qs)
    (row,) = metrics["by_S"]
    assert row["PR_study"] is not None and row["AER_max_normalized"] >= row["AER_max"]
    (frs,) = metrics["frs"]
    assert frs["FRS_worst_normalized"] >= frs["FRS_worst"]


@pytest.mark.slow
def test_hypotheses_are_what_evaluate_qa_reads(run, sample_path):
    out, _ = run
    ids = {x["question_id"] for x in json.loads(sample_path.read_text())}
    lines = (out / "hypotheses.jsonl").read_text().splitlines()
    hyps = [json.loads(line) for line in lines]
    assert len(hyps) == 8
    for h in hyps:
        assert set(h) == {"question_id", "hypothesis"} and isinstance(h["hypothesis"], str)
        assert h["question_id"] in ids
