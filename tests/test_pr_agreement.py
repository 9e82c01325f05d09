"""The labelled agreement set (tests/data/pr_agreement.csv) and the PR rules on it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evaluators.scoring.judge import QUESTION_TYPES
from evaluators.scoring.pr_agreement import AGREEMENT_FIELDS, load_agreement_set, rule_agreement

DATA = Path(__file__).parent / "data"
CSV = DATA / "pr_agreement.csv"


def test_agreement_set_covers_the_sample_and_every_type():
    rows = load_agreement_set(CSV)
    assert len(rows) >= 80
    counts = Counter(r.question_type for r in rows)
    assert set(counts) == set(QUESTION_TYPES)  # six LongMemEval types plus abstention
    sample = {x["question_id"]: x for x in json.loads((DATA / "longmemeval_oracle_sample.json").read_text())}
    for r in rows:
        if r.question_id in sample:  # the real sample's question and reference, verbatim
            assert r.question == sample[r.question_id]["question"]
            assert r.reference == str(sample[r.question_id]["answer"])
        else:  # written rows say so in their explanation
            assert "written" in r.explanation
    assert sum(r.label for r in rows) not in (0, len(rows))


def test_default_rule_meets_the_agreement_target(embedder):
    rows = load_agreement_set(CSV)
    lme = rule_agreement(rows, embeddings=embedder)
    study = rule_agreement(rows, rule="study", embeddings=embedder)
    assert lme["n"] == len(rows)
    # accuracy re-derived from the listed disagreements
    assert lme["accuracy"] == pytest.approx(1 - len(lme["disagreements"]) / len(rows))
    assert lme["accuracy"] >= 0.95 and lme["kappa"] >= 0.9
    assert study["accuracy"] < lme["accuracy"]


def test_loader_names_file_row_and_field(tmp_path):
    bad = tmp_path / "set.csv"
    header = ",".join(AGREEMENT_FIELDS)
    bad.write_text(header + "\nmulti-session,q1,How many?,3,three,maybe,why\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"set\.csv: row 1: field 'label' is 'maybe'"):
        load_agreement_set(bad)
    bad.write_text(header + "\nmulti-session,q1,How many?,3,,yes,why\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"row 1: field 'response' is empty"):
        load_agreement_set(bad)
    bad.write_text(header + "\nchit-chat,q1,How many?,3,three,yes,why\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"row 1: field 'question_type' is 'chit-chat'"):
        load_agreement_set(bad)
    bad.write_text("question_type,label\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"missing column\(s\) question_id"):
        load_agreement_set(bad)
