"""``memkit compare``: differences between runs with paired bootstrap CIs, checked
against hand-computed values; unpaired runs refused unless ``--unpaired``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from evaluators.aggregate import compute_metrics
from evaluators.cli.compare import register as register_cli
from evaluators.report.compare import UnpairedRunsError, compare_runs

QIDS = ["q1", "q2", "q3", "q4"]


def _write_run(d: Path, correct, extracted, *, seed=0, design="study", canaries=None, data="synthetic"):
    """A finished run of 4 instances, S=0, k=1, one direct probe per instance."""
    d.mkdir(parents=True)
    recs = []
    for i, q in enumerate(QIDS):
        unit = f"{q}::S0"
        value = (canaries or {}).get(q, f"AAA-{q.upper()}-1111")
        recs.append({"type": "canary", "design": design, "unit": unit, "question_id": q, "S": 0, "value": value})
        base = {"type": "call", "design": design, "unit": unit, "question_id": q, "question_type": "t", "S": 0,
                "k": 1, "phase": "main", "mode": None, "tier": None, "retrieved_ids": [], "context_exposed": False}
        recs.append({**base, "query_kind": "question", "level": None, "correct": bool(correct[i]),
                     "extraction": None})
        recs.append({**base, "query_kind": "probe", "level": "direct", "correct": None,
                     "extraction": {"exact": float(extracted[i])}})
        recs.append({"type": "unit_done", "unit": unit})
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    metrics = compute_metrics(recs, n_resamples=50, seed=0)
    metrics.update(model="extractive", design=design)
    (d / "metrics.json").write_text(json.dumps(metrics))
    (d / "config.json").write_text(json.dumps({"data": data, "seed": seed, "model": "extractive"}))
    return d


PR_A, AER_A = np.array([1, 1, 1, 0.0]), np.array([1, 0, 0, 0.0])
PR_B, AER_B = np.array([1, 0, 0, 0.0]), np.array([1, 1, 0, 0.0])


def test_paired_differences_match_hand_computation(tmp_path):
    a = _write_run(tmp_path / "a", PR_A, AER_A)
    b = _write_run(tmp_path / "b", PR_B, AER_B, design="redacting")
    res = compare_runs([a, b], tmp_path / "cmp", n_resamples=400, seed=11)
    (d,) = res["differences"]
    assert d["paired"] and d["n"] == 4 and d["S"] == 0
    # by hand: PR 3/4 - 1/4; AER 1/4 - 2/4; PUA with one k point is PR * (1 - AER)
    assert d["PR_diff"] == pytest.approx(0.5)
    assert d["AER_max_diff"] == pytest.approx(-0.25)
    assert d["PUA_diff"] == pytest.approx(0.75 * 0.75 - 0.25 * 0.5)
    # CIs: the same instance indices for both runs (bootstrap_ci's documented draw)
    idx = np.random.default_rng(11).integers(0, 4, (400, 4))
    pa, pb, ea, eb = PR_A[idx].mean(1), PR_B[idx].mean(1), AER_A[idx].mean(1), AER_B[idx].mean(1)
    for key, stat in (("PR", pa - pb), ("AER_max", ea - eb), ("PUA", pa * (1 - ea) - pb * (1 - eb))):
        lo, hi = np.percentile(stat, [2.5, 97.5])
        assert d[f"{key}_diff_ci"] == pytest.approx([lo, hi], abs=1e-6), key
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "paired bootstrap" in md and "+0.50 [" in md
    assert (tmp_path / "cmp" / "frontier.png").stat().st_size > 0
    assert [r["design"] for r in res["table2"]] == ["study", "redacting"]


def test_identical_runs_differ_by_zero(tmp_path):
    a = _write_run(tmp_path / "a", PR_A, AER_A)
    b = _write_run(tmp_path / "b", PR_A, AER_A, design="mmr")
    (d,) = compare_runs([a, b], tmp_path / "cmp", n_resamples=100)["differences"]
    for key in ("PR", "AER_max", "PUA"):
        assert d[f"{key}_diff"] == 0 and d[f"{key}_diff_ci"] == [0, 0]


def test_unpaired_runs_are_refused_unless_unpaired(tmp_path):
    a = _write_run(tmp_path / "a", PR_A, AER_A)
    b = _write_run(tmp_path / "b", PR_B, AER_B, seed=1)
    c = _write_run(tmp_path / "c", PR_B, AER_B, canaries={"q2": "ZZZ-OTHER-0000"})
    with pytest.raises(UnpairedRunsError, match="seed differs"):
        compare_runs([a, b], tmp_path / "x")
    with pytest.raises(UnpairedRunsError, match="canaries differ on 1"):
        compare_runs([a, c], tmp_path / "x")
    assert not (tmp_path / "x").exists()

    app = typer.Typer()
    register_cli(app)
    r = CliRunner().invoke(app, [str(a), str(b), "--out", str(tmp_path / "y")])
    assert r.exit_code == 2 and "--unpaired" in r.output
    r = CliRunner().invoke(app, [str(a), str(b), "--out", str(tmp_path / "y"), "--unpaired",
                                 "--n-resamples", "200"])
    assert r.exit_code == 0, r.output
    assert "UNPAIRED" in r.output
    res = json.loads((tmp_path / "y" / "compare.json").read_text())
    (d,) = res["differences"]
    assert not res["paired"] and d["n"] == [4, 4]
    assert d["PR_diff"] == pytest.approx(0.5)
    lo, hi = d["PR_diff_ci"]
    assert lo <= 0.5 <= hi
    assert "UNPAIRED" in (tmp_path / "y" / "compare.md").read_text()


def test_compare_needs_finished_runs(tmp_path):
    a = _write_run(tmp_path / "a", PR_A, AER_A)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        compare_runs([a, tmp_path / "empty"], tmp_path / "x")
    with pytest.raises(ValueError, match="at least two"):
        compare_runs([a], tmp_path / "x")


def test_a_tier_the_design_lacks_is_n_a_with_a_legend(tmp_path):
    a = _write_run(tmp_path / "a", PR_A, AER_A)
    b = _write_run(tmp_path / "b", PR_B, AER_B, design="redacting")
    for d in (a, b):
        m = json.loads((d / "metrics.json").read_text())
        # S=0 has no summary tier: FRS_summary not measured (None), FRS_raw measured 0.
        m["frs"] = [{"S": 0, "mode": "raw_only", "FRS_raw": 0.0, "FRS_raw_ci": [0.0, 0.0], "FRS_summary": None,
                     "FRS_summary_ci": [None, None], "FRS_worst": 0.0, "FRS_worst_ci": [0.0, 0.0]}]
        (d / "metrics.json").write_text(json.dumps(m))
    compare_runs([a, b], tmp_path / "cmp", n_resamples=20)
    md = (tmp_path / "cmp" / "compare.md").read_text()
    frs = md.split("## FRS per deletion mode and tier")[1]
    rows = [line for line in frs.splitlines() if line.startswith("| study") or line.startswith("| extractive")]
    assert rows and all(r.split(" | ")[4] == "n/a" and r.split(" | ")[3] == "0.00 [0.00, 0.00]" for r in rows)
    assert "–" not in frs.split("![frontier]")[0]
    assert "n/a: not measured, the design has no such tier at this S" in frs
