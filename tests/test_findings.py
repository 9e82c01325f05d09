"""The study's findings checked on a run (evaluators/report/findings.py) and the aggregate's new
uncertainty fields: verdicts from hand-built metrics, values by hand from the
definitions in docs/metrics.md and evaluators/data/study_findings.json."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluators.aggregate import compute_metrics
from evaluators.report.findings import VERDICTS, evaluate_findings, study_findings, verdict
from evaluators.scoring.metrics import bootstrap_ci

# --------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize(
    "value, ci, test, expected",
    [
        (0.3, [0.1, 0.5], {"op": ">", "value": 0}, "reproduced"),
        (-0.2, [-0.4, 0.0], {"op": ">", "value": 0}, "not reproduced"),
        (0.1, [-0.1, 0.3], {"op": ">", "value": 0}, "inconclusive"),
        (0.02, [0.0, 0.04], {"op": "<=", "value": 0.05}, "reproduced"),
        (0.4, [0.2, 0.6], {"op": "<=", "value": 0.05}, "not reproduced"),
        (0.04, [0.0, 0.2], {"op": "<=", "value": 0.05}, "inconclusive"),
        (0.0, [-0.05, 0.05], {"op": "within", "value": 0.05}, "reproduced"),
        (0.3, [0.1, 0.5], {"op": "within", "value": 0.05}, "not reproduced"),
        (0.05, [0.0, 0.2], {"op": "within", "value": 0.05}, "inconclusive"),
        (0.0, [0.0, 0.0], {"op": "==", "value": 0}, "reproduced"),
        (0.1, [0.0, 0.3], {"op": "==", "value": 0}, "not reproduced"),
        (None, [None, None], {"op": ">", "value": 0}, "not testable"),
        (0.5, [None, 0.9], {"op": ">", "value": 0}, "inconclusive"),
        (0.02, [0.0, 0.05], {"op": ">", "value": 0}, "inconclusive"),
        (0.1, [0.1, 0.2], {"op": "<=", "value": 0.1}, "inconclusive"),
    ],
)
def test_verdict_rules(value, ci, test, expected):
    got, reason = verdict(value, ci, test)
    assert got == expected and reason


def test_a_ci_bound_on_the_threshold_is_said_to_be_at_it_not_to_straddle_it():
    _, reason = verdict(0.02, [0.0, 0.05], {"op": ">", "value": 0})
    assert "at the threshold 0" in reason and "straddles" not in reason
    _, reason = verdict(0.1, [-0.1, 0.3], {"op": ">", "value": 0})
    assert "straddles 0" in reason


def test_k_effect_on_aer_at_a_ceiling_says_so():
    m = _metrics()
    # AER_max at S=0 is 0.98 at k=1 and 1.00 at k=25: the k effect 0.02, CI [0, 0.05].
    m["by_S"][0].update(k_effect_AER_max=0.02, k_effect_AER_max_ci=[0.0, 0.05])
    m["ks"] = [1, 25]
    m["frontier"] = [{"S": 0, "k": 25, "AER_max": 1.0}, {"S": 0, "k": 1, "AER_max": 0.98}]
    f = {f["id"]: f for f in evaluate_findings(m)}["k_helps_adversary"]
    assert f["verdict"] == "inconclusive"
    assert f["reason"].startswith("ceiling: AER_max is already 0.98 at the smallest k (k=1)")
    assert f["quantity"] == "AER_max(k=25) − AER_max(k=1) at S=0"
    # AER_max 1.00 at every k: k effect 0, CI [0, 0] -- at the ceiling, not evidence against.
    m["by_S"][0].update(k_effect_AER_max=0.0, k_effect_AER_max_ci=[0.0, 0.0])
    m["frontier"] = [{"S": 0, "k": 25, "AER_max": 1.0}, {"S": 0, "k": 1, "AER_max": 1.0}]
    f = {f["id"]: f for f in evaluate_findings(m)}["k_helps_adversary"]
    assert f["verdict"] == "inconclusive" and f["reason"].startswith("ceiling: AER_max is already 1.00")
    m["by_S"][0].update(k_effect_AER_max=0.02, k_effect_AER_max_ci=[0.0, 0.05])
    # Far from the ceiling the same CI is "at the threshold".
    m["frontier"][1]["AER_max"] = 0.5
    f = {f["id"]: f for f in evaluate_findings(m)}["k_helps_adversary"]
    assert "at the threshold 0" in f["reason"]


def test_quantity_names_statistic_s_mode_and_k():
    got = {f["id"]: f["quantity"] for f in evaluate_findings(_metrics())}
    assert got["raw_only_leaves_residue"] == "FRS_summary at S=1, raw_only"
    assert got["summary_cuts_aer"] == "cut ΔS / AER_max(S=0) at S=1, mean over k; shown as the change of AER_max"
    assert got["summary_pr_cost"].startswith("cost (PR(S=0) − PR(S=1)) / PR(S=0)")
    assert got["purge_and_tombstone_clear"] == "FRS_worst (largest over every S), full_purge / tombstone_redaction"
    assert got["resummarize_leaves_residue"].startswith("FRS_worst at S=1, raw_plus_resummarize; reduction vs raw_only")


def _resummarize(raw_only: list[float], resum: list[float], resum_ci: list[float]) -> dict:
    m = _metrics()
    m["frs"] += [
        {"S": 1, "mode": "raw_only", "FRS_worst": float(np.mean(raw_only)), "FRS_worst_ci": [0.5, 1.0],
         "FRS_worst_by_instance": raw_only},
        {"S": 1, "mode": "raw_plus_resummarize", "FRS_worst": float(np.mean(resum)), "FRS_worst_ci": resum_ci,
         "FRS_worst_by_instance": resum},
    ]
    m["frs"] = [r for r in m["frs"] if not (r["mode"] == "raw_only" and "FRS_worst_by_instance" not in r)] + [
        {"S": 1, "mode": "raw_only", "FRS_summary": 0.25, "FRS_summary_ci": [0.1, 0.4]}]
    return {f["id"]: f for f in evaluate_findings(m)}["resummarize_leaves_residue"]


def test_resummarize_must_both_reduce_and_leave_residue():
    # Same residue after both modes in all 8 instances: reduction 0, CI [0, 0] -> not reduced.
    f = _resummarize([1.0] * 8, [1.0] * 8, [1.0, 1.0])
    assert (f["verdict"], f["reduction"], f["reduction_ci"]) == ("not reproduced", 0.0, [0.0, 0.0])
    assert "does not reduce" in f["reason"]
    # raw_only leaks in 8 of 8, resummarize in 2 of 8 (instances 0, 1): reduction 6/8 = 0.75;
    # a resample without any of the 6 reducing instances has probability (2/8)^8 < 0.0001,
    # so the CI lies above 0; residue CI [0.1, 0.4] above 0 -> reproduced.
    f = _resummarize([1.0] * 8, [1.0, 1.0] + [0.0] * 6, [0.1, 0.4])
    assert f["verdict"] == "reproduced" and f["reduction"] == 0.75 and f["reduction_ci"][0] > 0
    # Removed, not reduced: nothing remains.
    f = _resummarize([1.0] * 8, [0.0] * 8, [0.0, 0.0])
    assert f["verdict"] == "not reproduced" and "removed" in f["reason"]


def test_resummarize_without_per_instance_values_is_not_testable():
    m = _metrics()
    m["frs"].append({"S": 1, "mode": "raw_plus_resummarize", "FRS_worst": 0.5, "FRS_worst_ci": [0.2, 0.8]})
    f = {f["id"]: f for f in evaluate_findings(m)}["resummarize_leaves_residue"]
    assert f["verdict"] == "not testable" and "per-instance" in f["reason"]


def test_unknown_op_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown test op"):
        verdict(0.1, [0, 1], {"op": "~", "value": 0})


def test_data_file_has_the_studys_findings_with_source():
    data = study_findings()
    assert "2606.10062" in data["source"]
    assert "paper-notes" not in data["source"]  # cite the paper, not a file outside the repository
    ids = [f["id"] for f in data["findings"]]
    assert len(ids) == len(set(ids)) >= 5
    by_id = {f["id"]: f for f in data["findings"]}
    # Reference values as arXiv 2606.10062 reports them (evaluators/data/study_findings.json).
    assert by_id["summary_cuts_aer"]["reference"] == 0.76
    assert by_id["k_helps_user"]["reference"] == pytest.approx(0.66 - 0.42)
    assert by_id["raw_only_leaves_residue"]["reference"] == 0.2
    for f in data["findings"]:
        assert {"claim", "reference_text", "statistic", "test", "requires", "definition"} <= set(f)


# --------------------------------------------------------------------------- hand-built metrics


def _metrics(model: str = "llamacpp:gemma3-270m", **by_s1: float) -> dict:
    """A metrics dict with the statistics the findings read (S=0 and S=1 rows, FRS rows)."""
    s0 = {"S": 0, "k_effect_PR": 0.2, "k_effect_PR_ci": [0.1, 0.3],  # reproduced
          "k_effect_AER_max": -0.1, "k_effect_AER_max_ci": [-0.2, -0.05]}  # not reproduced
    s1 = {"S": 1, "delta_S_relative": 0.7, "delta_S_relative_ci": [0.3, 0.9],  # inconclusive (> 0.5)
          "PR_cost_relative": 0.02, "PR_cost_relative_ci": [0.0, 0.05],  # reproduced (<= 0.1)
          "k_effect_AER_max": 0.0, "k_effect_AER_max_ci": [0.0, 0.0],  # reproduced (within 0.05)
          "delta_DI": 0.3, "delta_DI_ci": [0.2, 0.4]}  # not reproduced (<= 0.05)
    s1.update(by_s1)
    frs = [
        {"S": 1, "mode": "raw_only", "FRS_summary": 0.25, "FRS_summary_ci": [0.1, 0.4],
         "FRS_worst": 0.25, "FRS_worst_ci": [0.1, 0.4]},
        # raw_plus_resummarize absent -> not testable on this run
        {"S": 0, "mode": "full_purge", "FRS_worst": 0.0, "FRS_worst_ci": [0.0, 0.0]},
        {"S": 1, "mode": "tombstone_redaction", "FRS_worst": 0.1, "FRS_worst_ci": [0.0, 0.3]},
    ]
    return {"model": model, "summarizer_model": model, "by_S": [s0, s1], "frs": frs}


def test_each_verdict_from_hand_built_metrics():
    got = {f["id"]: f for f in evaluate_findings(_metrics())}
    assert got["k_helps_user"]["verdict"] == "reproduced"
    assert got["k_helps_adversary"]["verdict"] == "not reproduced"
    assert got["summary_cuts_aer"]["verdict"] == "inconclusive"
    assert "too wide" in got["summary_cuts_aer"]["reason"]
    assert got["summary_pr_cost"]["verdict"] == "reproduced"
    assert got["frontier_collapses"]["verdict"] == "reproduced"
    assert got["summary_closes_di_gap"]["verdict"] == "not reproduced"
    assert got["raw_only_leaves_residue"]["verdict"] == "reproduced"
    assert got["raw_only_leaves_residue"]["value"] == 0.25
    assert got["resummarize_leaves_residue"]["verdict"] == "not testable"
    assert got["resummarize_leaves_residue"]["value"] is None
    # The largest FRS_worst over both modes and every S: one instance recovered after a
    # tombstone contradicts "drives FRS_worst to 0".
    purge = got["purge_and_tombstone_clear"]
    assert (purge["value"], purge["ci"], purge["verdict"]) == (0.1, [0.0, 0.3], "not reproduced")
    assert {f["verdict"] for f in got.values()} <= set(VERDICTS)


def test_extractive_backend_makes_summarizer_findings_not_testable_but_keeps_values():
    got = {f["id"]: f for f in evaluate_findings(_metrics(model="extractive"))}
    reasons = []
    for fid in ("summary_cuts_aer", "frontier_collapses", "summary_closes_di_gap"):
        assert got[fid]["verdict"] == "not testable", fid
        assert "extractive" in got[fid]["reason"] and "this backend" in got[fid]["reason"]
        reasons.append(got[fid]["reason"])
    # Each finding has its own reason: ΔDI is about the responder, not the summarizer.
    assert len(set(reasons)) == 3
    assert "responder" in got["summary_closes_di_gap"]["reason"]
    assert "scrub" not in got["summary_closes_di_gap"]["reason"]
    assert got["summary_cuts_aer"]["value"] == 0.7
    # PR cost of summarizing is measurable with the extractive summarizer: a verdict
    # (0.02, CI [0, 0.05] <= 0.1: reproduced) with a note that it is this summarizer's.
    pr = got["summary_pr_cost"]
    assert pr["verdict"] == "reproduced" and "summarizer" in pr["note"]
    assert {f["id"]: f for f in evaluate_findings(_metrics())}["summary_pr_cost"]["note"] is None
    # Findings about k and deletion do not depend on the summarizer.
    assert got["k_helps_user"]["verdict"] == "reproduced"
    assert got["raw_only_leaves_residue"]["verdict"] == "reproduced"


def test_backend_from_config_and_extractive_summarizer_alone():
    m = _metrics()
    m.pop("model"), m.pop("summarizer_model")
    got = {f["id"]: f for f in evaluate_findings(m, {"model": "openai:gpt-4o-mini", "summarizer_model": "extractive"})}
    assert got["summary_cuts_aer"]["verdict"] == "not testable"
    # ΔDI is decided by the responder, here generative: testable (0.3, CI [0.2, 0.4] > 0.05).
    assert got["summary_closes_di_gap"]["verdict"] == "not reproduced"


# --------------------------------------------------------------------------- aggregate fields


def _q(S, qid, k, correct):
    return {"type": "call", "S": S, "question_id": qid, "k": k, "phase": "main", "mode": None,
            "tier": None, "query_kind": "question", "correct": correct, "level": None,
            "extraction": None, "context_exposed": False}


def _p(S, qid, k, exact, exposed=True, phase="main", mode=None, tier=None, retrieved=("c1",)):
    return {"type": "call", "S": S, "question_id": qid, "k": k, "phase": phase, "mode": mode,
            "tier": tier, "query_kind": "probe", "correct": None, "level": "direct",
            "extraction": {"exact": exact}, "context_exposed": exposed, "retrieved_ids": list(retrieved)}


def _records():
    """Three instances A, B, C; k in (1, 2); one direct probe per call.

    S=0: PR k1 (1,0,0) k2 (1,1,0); AER k1 (1,1,0) k2 (1,1,1)
    S=1: PR k1 (1,0,0) k2 (1,0,0); AER k1 (0,1,0) k2 (0,1,0)
    forget S=0 mode raw_only: raw tier AER 0 everywhere; summary tier retrieves nothing.
    """
    pr = {0: {1: (1, 0, 0), 2: (1, 1, 0)}, 1: {1: (1, 0, 0), 2: (1, 0, 0)}}
    aer = {0: {1: (1, 1, 0), 2: (1, 1, 1)}, 1: {1: (0, 1, 0), 2: (0, 1, 0)}}
    r = []
    for S in (0, 1):
        for k in (1, 2):
            for i, q in enumerate("ABC"):
                r += [_q(S, q, k, bool(pr[S][k][i])), _p(S, q, k, aer[S][k][i])]
    f = {"phase": "forget", "mode": "raw_only"}
    for k in (1, 2):
        for q in "ABC":
            r += [_p(0, q, k, 0, tier="raw", **f), _p(0, q, k, 0, tier="summary", retrieved=(), **f)]
    for q, disk in (("A", 2), ("B", 1), ("C", 0)):
        r.append({"type": "forensics", "S": 0, "mode": "raw_only", "question_id": q,
                  "counts": {"disk_sqlite": disk, "text_raw": 0, "disk_log": int(q == "A")}})
    return r


@pytest.fixture(scope="module")
def agg():
    return compute_metrics(_records(), n_resamples=300, seed=2)


def test_relative_delta_s_pr_cost_and_k_effect_by_hand(agg):
    s0, s1 = agg["by_S"]
    # AER_max S=0 = mean(2/3, 1) = 5/6; S=1 = 1/3; ΔS = 1/2; relative = (1/2)/(5/6) = 0.6
    assert s1["delta_S"] == pytest.approx(0.5, abs=1e-6)
    assert s1["delta_S_relative"] == pytest.approx(0.6, abs=1e-6)
    # PR S=0 = mean(1/3, 2/3) = 1/2; S=1 = 1/3; cost 1/6; relative 1/3
    assert s1["PR_cost"] == pytest.approx(1 / 6, abs=1e-6)
    assert s1["PR_cost_relative"] == pytest.approx(1 / 3, abs=1e-6)
    # k effect at S=0: PR 2/3 - 1/3; AER_max 1 - 2/3
    assert s0["k_effect_PR"] == pytest.approx(1 / 3, abs=1e-6)
    assert s0["k_effect_AER_max"] == pytest.approx(1 / 3, abs=1e-6)
    assert s1["k_effect_AER_max"] == 0.0 and s1["k_effect_AER_max_ci"] == [0.0, 0.0]
    for row in (s0, s1):
        for key in ("delta_S", "delta_S_relative", "PR_cost", "k_effect_PR", "k_effect_AER_max"):
            lo, hi = row[f"{key}_ci"]
            if row[key] is not None and lo is not None:
                assert lo - 1e-9 <= row[key] <= hi + 1e-9, key


def test_frontier_and_decomposition_cis_match_a_second_bootstrap(agg):
    # Per-instance values of PR at S=0, k=2 are (1, 1, 0): the CI of their mean by the
    # vectorised path of bootstrap_ci must equal the aggregate's index-based one.
    row = next(r for r in agg["frontier"] if (r["S"], r["k"]) == (0, 2))
    lo, hi = bootstrap_ci(np.array([1.0, 1.0, 0.0]), n_resamples=300, seed=2)
    assert row["PR"] == pytest.approx(2 / 3, abs=1e-6)
    assert row["PR_ci"] == [pytest.approx(lo, abs=1e-6), pytest.approx(hi, abs=1e-6)]
    row = next(r for r in agg["frontier"] if (r["S"], r["k"]) == (1, 1))
    lo, hi = bootstrap_ci(np.array([0.0, 1.0, 0.0]), n_resamples=300, seed=2)
    assert row["AER_max_ci"] == [pytest.approx(lo, abs=1e-6), pytest.approx(hi, abs=1e-6)]
    for d in agg["decomposition"]:
        assert len(d["context_exposure_ci"]) == 2 and len(d["extraction_ci"]) == 2
        assert d["extraction_ci"][0] <= d["extraction"] <= d["extraction_ci"][1]


def test_frs_of_a_tier_the_design_lacks_is_not_measured(agg):
    (row,) = agg["frs"]
    assert row["tiers_measured"] == ["raw"]
    assert row["FRS_summary"] is None and row["FRS_summary_ci"] == [None, None]
    assert row["FRS_raw"] == 0.0 and row["FRS_worst"] == 0.0
    assert row["forensic_n"] == 3
    # A and B have a copy on some disk_* surface, C has none.
    assert row["forensic_instances_disk"] == 2
    assert row["forensic_instances"] == {"disk_log": 1, "disk_sqlite": 2, "text_raw": 0}


def test_findings_read_keys_that_compute_metrics_writes(agg):
    keys_by_table = {"by_S": set(agg["by_S"][0]), "frs": set(agg["frs"][0])}
    for f in study_findings()["findings"]:
        st = f["statistic"]
        assert st["key"] in keys_by_table[st["table"]], f["id"]
        assert f"{st['key']}_ci" in keys_by_table[st["table"]], f["id"]


def test_findings_are_json_serialisable(agg):
    json.dumps(evaluate_findings({**agg, "model": "extractive"}), allow_nan=False)


def test_numbers_print_one_minus_sign_and_no_negative_zero():
    from evaluators.report.findings import number_text

    assert [number_text(x) for x in (-0.001, -0.0, 0.0, 0.25, -0.25, -1.0)] == [
        "0.00", "0.00", "0.00", "0.25", "−0.25", "−1.00"]
    _, reason = verdict(-0.001, [-0.004, 0.3], {"op": ">", "value": 0})
    assert reason.startswith("CI [0.00, 0.30]") and "-" not in reason
    _, reason = verdict(0.1, [-0.2, 0.3], {"op": ">", "value": 0})
    assert reason.startswith("CI [−0.20, 0.30] straddles 0")
