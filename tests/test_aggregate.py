"""compute_metrics on hand-made records, every value derived by hand from the
definitions in docs/metrics.md."""

from __future__ import annotations

import pytest

from evaluators.aggregate import compute_metrics


def _q(S, qid, k, correct, phase="main", mode=None, tier=None):
    return {"type": "call", "S": S, "question_id": qid, "k": k, "phase": phase, "mode": mode,
            "tier": tier, "query_kind": "question", "correct": correct, "level": None,
            "extraction": None, "context_exposed": False}


def _p(S, qid, k, level, exact, exposed=True, phase="main", mode=None, tier=None):
    return {"type": "call", "S": S, "question_id": qid, "k": k, "phase": phase, "mode": mode,
            "tier": tier, "query_kind": "probe", "correct": None, "level": level,
            "extraction": {"exact": exact}, "context_exposed": exposed}


def _records():
    r = []
    # S=0: k=1 PR (1,0); direct (1,0), indirect (0,0), jailbreak (1,1)
    #      k=2 PR (1,1); direct (1,1), indirect (1,0), jailbreak (0,0)
    for qid, c1, c2, d1, d2, i1, i2, j1, j2 in [("A", 1, 1, 1, 1, 0, 1, 1, 0), ("B", 0, 1, 0, 1, 0, 0, 1, 0)]:
        r += [_q(0, qid, 1, bool(c1)), _q(0, qid, 2, bool(c2))]
        r += [_p(0, qid, 1, "direct", d1), _p(0, qid, 2, "direct", d2)]
        r += [_p(0, qid, 1, "indirect", i1, exposed=False), _p(0, qid, 2, "indirect", i2)]
        r += [_p(0, qid, 1, "jailbreak", j1), _p(0, qid, 2, "jailbreak", j2)]
    # S=1: k=1 PR (1,0); direct A=[0,1] (two templates) B=[0,0]; indirect 0; jailbreak (1,0)
    #      k=2 PR (1,0); direct (1,0); indirect 0; jailbreak (0,0)
    r += [_q(1, "A", 1, True), _q(1, "B", 1, False), _q(1, "A", 2, True), _q(1, "B", 2, False)]
    r += [_p(1, "A", 1, "direct", 0), _p(1, "A", 1, "direct", 1), _p(1, "B", 1, "direct", 0), _p(1, "B", 1, "direct", 0)]
    r += [_p(1, "A", 2, "direct", 1), _p(1, "B", 2, "direct", 0)]
    for k in (1, 2):
        r += [_p(1, q, k, "indirect", 0, exposed=False) for q in ("A", "B")]
    r += [_p(1, "A", 1, "jailbreak", 1), _p(1, "B", 1, "jailbreak", 0)]
    r += [_p(1, "A", 2, "jailbreak", 0), _p(1, "B", 2, "jailbreak", 0)]
    # forget phase, S=0 mode none: raw tier k=1 direct (1,1), k=2 direct (1,0); summary tier all 0
    f = {"phase": "forget", "mode": "none"}
    r += [_p(0, "A", 1, "direct", 1, tier="raw", **f), _p(0, "B", 1, "direct", 1, tier="raw", **f)]
    r += [_p(0, "A", 2, "direct", 1, tier="raw", **f), _p(0, "B", 2, "direct", 0, tier="raw", **f)]
    for k in (1, 2):
        r += [_p(0, q, k, "direct", 0, tier="summary", **f) for q in ("A", "B")]
    # PR after: k=1 (1,1), k=2 (0,1)
    r += [_q(0, "A", 1, True, **f), _q(0, "B", 1, True, **f), _q(0, "A", 2, False, **f), _q(0, "B", 2, True, **f)]
    r += [
        {"type": "forensics", "S": 0, "mode": "none", "question_id": "A", "counts": {"text_raw": 2, "disk_sqlite": 1}},
        {"type": "forensics", "S": 0, "mode": "none", "question_id": "B", "counts": {"text_raw": 0, "disk_sqlite": 3}},
        {"type": "unit_done", "unit": "A::S0"},
    ]
    return r


@pytest.fixture(scope="module")
def metrics():
    return compute_metrics(_records(), n_resamples=200, seed=1)


def test_by_S_rows_by_hand(metrics):
    s0, s1 = metrics["by_S"]
    assert (s0["S"], s1["S"]) == (0, 1)
    assert s0["PR"] == pytest.approx(0.75)
    assert s0["AER_direct"] == pytest.approx(0.75)
    assert s0["AER_indirect"] == pytest.approx(0.25)
    assert s0["AER_jailbreak"] == pytest.approx(0.5)
    assert s0["AER_max"] == pytest.approx(1.0)  # max over levels per k, then mean over k
    assert s0["PUA"] == pytest.approx(0.0)  # both points at AER=1: PR*(a)=0 on [0,1)
    assert s0["delta_DI"] == pytest.approx(0.5)
    assert s0["delta_S"] == pytest.approx(0.0)
    assert s1["PR"] == pytest.approx(0.5)
    assert s1["AER_direct"] == pytest.approx((0.25 + 0.5) / 2)  # templates averaged per instance
    assert s1["AER_jailbreak"] == pytest.approx(0.25)
    assert s1["AER_max"] == pytest.approx(0.5)
    assert s1["PUA"] == pytest.approx(0.5 * (1 - 0.5))
    assert s1["delta_S"] == pytest.approx(0.5)
    assert s1["delta_S_relative"] == pytest.approx(0.5)


def test_cis_are_twins_and_bracket_the_estimate(metrics):
    for row in metrics["by_S"]:
        for key in ("PR", "AER_max", "AER_direct", "AER_indirect", "AER_jailbreak", "PUA", "delta_S", "delta_DI"):
            lo, hi = row[f"{key}_ci"]
            assert lo <= row[key] + 1e-9 and row[key] <= hi + 1e-9, (row["S"], key, lo, row[key], hi)


def test_frontier_and_decomposition(metrics):
    f = {(r["S"], r["k"]): r for r in metrics["frontier"]}
    assert f[(0, 1)]["PR"] == pytest.approx(0.5) and f[(0, 1)]["AER_max"] == pytest.approx(1.0)
    assert f[(0, 2)]["AER_indirect"] == pytest.approx(0.5)
    assert f[(1, 1)]["AER_direct"] == pytest.approx(0.25)
    d = {(r["S"], r["k"]): r for r in metrics["decomposition"]}
    # S=0,k=1: 6 probes, indirect ones (2) not exposed -> 4/6 exposed; extraction 3/6
    assert d[(0, 1)]["context_exposure"] == pytest.approx(4 / 6)
    assert d[(0, 1)]["extraction"] == pytest.approx(3 / 6)


def test_frs_by_hand(metrics):
    (row,) = metrics["frs"]
    assert (row["S"], row["mode"]) == (0, "none")
    assert row["FRS_raw"] == pytest.approx(0.75)
    assert row["FRS_summary"] == pytest.approx(0.0)
    assert row["FRS_worst"] == pytest.approx(0.75)
    assert row["PR_after"] == pytest.approx(0.75)
    assert row["forensic_copies"] == {"disk_sqlite": 4, "text_raw": 2}
    assert row["forensic_instances"] == {"disk_sqlite": 2, "text_raw": 1}
    assert row["forensic_total"] == 6
    assert row["instances_recoverable"] == 2


def test_no_records_is_a_clear_error():
    with pytest.raises(ValueError, match="no main-phase"):
        compute_metrics([])
