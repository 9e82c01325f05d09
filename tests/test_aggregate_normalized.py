"""Both PR rules and the normalized AER in compute_metrics and the report tables;
every value derived by hand from hand-made records."""

from __future__ import annotations

import pytest

from evaluators.aggregate import compute_metrics
from evaluators.report.markdown import tables

LEVELS = ("direct", "indirect", "jailbreak")


def _q(qid, k, correct, study, **kw):
    return {"type": "call", "S": 0, "question_id": qid, "k": k, "phase": "main", "mode": None,
            "tier": None, "query_kind": "question", "correct": correct, "correct_study": study,
            "level": None, "extraction": None, "context_exposed": False, **kw}


def _p(qid, k, level, exact, normalized, phase="main", mode=None, tier=None):
    return {"type": "call", "S": 0, "question_id": qid, "k": k, "phase": phase, "mode": mode,
            "tier": tier, "query_kind": "probe", "correct": None, "level": level,
            "extraction": {"exact": exact, "normalized": normalized, "partial": normalized},
            "context_exposed": True}


def _records():
    r = []
    # lme verdicts A (1,1) B (0,1); study verdicts A (0,0) B (1,0)  (k = 1, 2)
    r += [_q("A", 1, True, False), _q("A", 2, True, False), _q("B", 1, False, True), _q("B", 2, True, False)]
    # direct: never verbatim; normalized A (1,1) B (0,1); other levels 0
    r += [_p("A", 1, "direct", 0, 1), _p("A", 2, "direct", 0, 1), _p("B", 1, "direct", 0, 0), _p("B", 2, "direct", 0, 1)]
    r += [_p(q, k, lv, 0, 0) for q in "AB" for k in (1, 2) for lv in LEVELS[1:]]
    # after forget (mode none), raw tier: normalized A (1,1) B (0,1), exact 0; summary tier 0
    f = {"phase": "forget", "mode": "none"}
    r += [_p("A", 1, "direct", 0, 1, tier="raw", **f), _p("A", 2, "direct", 0, 1, tier="raw", **f),
          _p("B", 1, "direct", 0, 0, tier="raw", **f), _p("B", 2, "direct", 0, 1, tier="raw", **f)]
    r += [_p(q, k, "direct", 0, 0, tier="summary", **f) for q in "AB" for k in (1, 2)]
    return r


@pytest.fixture(scope="module")
def metrics():
    return compute_metrics(_records(), n_resamples=200, seed=3)


def test_both_pr_rules_by_hand(metrics):
    (row,) = metrics["by_S"]
    assert row["PR"] == pytest.approx((0.5 + 1.0) / 2)  # per k: (1+0)/2, (1+1)/2
    assert row["PR_study"] == pytest.approx((0.5 + 0.0) / 2)  # per k: (0+1)/2, (0+0)/2
    lo, hi = row["PR_study_ci"]
    assert lo <= row["PR_study"] <= hi
    k1, k2 = metrics["frontier"]
    assert (k1["PR"], k1["PR_study"], k2["PR"], k2["PR_study"]) == (0.5, 0.5, 1.0, 0.0)


def test_normalized_aer_by_hand(metrics):
    (row,) = metrics["by_S"]
    assert row["AER_max"] == 0.0  # never verbatim
    # normalized direct per k: (1+0)/2 = 0.5, (1+1)/2 = 1 -> mean 0.75; other levels 0
    assert row["AER_direct_normalized"] == pytest.approx(0.75)
    assert row["AER_indirect_normalized"] == 0.0
    assert row["AER_max_normalized"] == pytest.approx(0.75)
    lo, hi = row["AER_max_normalized_ci"]
    assert 0.5 <= lo <= 0.75 <= hi <= 1.0  # resamples of (A, B): per-instance means 1 and 0.5
    k1, k2 = metrics["frontier"]
    assert (k1["AER_max_normalized"], k2["AER_max_normalized"]) == (0.5, 1.0)
    assert (k1["AER_max"], k2["AER_max"]) == (0.0, 0.0)


def test_normalized_frs_by_hand(metrics):
    (row,) = metrics["frs"]
    assert row["FRS_raw"] == 0.0 and row["FRS_worst"] == 0.0
    assert row["FRS_raw_normalized"] == pytest.approx(0.75)
    assert row["FRS_summary_normalized"] == 0.0
    assert row["FRS_worst_normalized"] == pytest.approx(0.75)
    lo, hi = row["FRS_worst_normalized_ci"]
    assert lo <= 0.75 <= hi


def test_report_tables_show_both(metrics):
    by_title = {t: (h, rows) for t, h, rows, _legend in tables(metrics, {"model": "m"})}
    (title,) = [t for t in by_title if t.startswith("PR under both rules")]
    header, rows = by_title[title]
    assert header[:5] == ["S", "PR (lme)", "PR (study)", "AER_max exact", "AER_max normalized"]
    assert rows[0][1].startswith("0.75") and rows[0][2].startswith("0.25")
    assert rows[0][3].startswith("0.00") and rows[0][4].startswith("0.75")
    (frs_title,) = [t for t in by_title if t.startswith("Forgetting residue, normalized")]
    assert by_title[frs_title][1][0][:2] == ["0", "none"]
    assert by_title[frs_title][1][0][2].startswith("0.75")


def test_records_without_study_verdicts_give_no_pr_study():
    recs = [dict(r, correct_study=None) if r["query_kind"] == "question" else r for r in _records()]
    for r in recs:
        r.pop("correct_study", None)
    (row,) = compute_metrics(recs, n_resamples=50, seed=0)["by_S"]
    assert row["PR_study"] is None and row["PR"] == pytest.approx(0.75)


def test_write_report_shows_both(tmp_path, metrics):
    import json

    from evaluators.report.markdown import write_report

    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    md = write_report(tmp_path).read_text()
    assert "| S | PR (lme) | PR (study) | AER_max exact | AER_max normalized |" in md
    assert "FRS_worst normalized" in md
    assert (tmp_path / "probes.png").stat().st_size > 0
