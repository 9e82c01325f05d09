"""The adversary in the sweep, the report and ``memkit compare``: the committed
LongMemEval sample with the extractive backend, for a memory design and for a LangGraph
target (``memkit sweep --target langgraph``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from evaluators.records import load_records
from evaluators.report.compare import compare_runs
from evaluators.sweep import SweepConfig, run_sweep

REPO = Path(__file__).resolve().parents[1]
SAMPLE = str(REPO / "tests" / "data" / "longmemeval_oracle_sample.json")
BASE = {"data": SAMPLE, "n": 2, "seed": 5, "ks": [3], "deletion_modes": ["full_purge"], "n_resamples": 200}
ADVERSARY = {"probes": ["library"], "attack_budget": 30, "membership": True}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("adversary-runs")
    design = SweepConfig(**BASE, summary_levels=[0], **ADVERSARY)
    run_sweep(design, root / "design", progress=False)
    lg = {**BASE, "target": "langgraph", "target_options": {"backend": "memory"}}
    run_sweep(SweepConfig(**lg, **ADVERSARY), root / "langgraph", progress=False)
    run_sweep(SweepConfig(**lg), root / "langgraph-study", progress=False)
    return root


def _records(d: Path) -> list[dict]:
    return load_records(d / "results.jsonl")[0]


def _decodes_to(secret: str, text: str) -> bool:
    """The test's own decoders: the canary as given, reversed, or in a base64 word."""
    if secret in text or secret in text[::-1]:
        return True
    for word in text.split():
        try:
            if secret in base64.b64decode(word + "=" * (-len(word) % 4), validate=True).decode("utf-8", "ignore"):
                return True
        except ValueError:
            continue
    return False


@pytest.mark.parametrize("name", ["design", "langgraph"])
def test_the_report_shows_how_strong_the_adversary_was(runs, name):
    d = runs / name
    metrics = json.loads((d / "metrics.json").read_text())
    adv = metrics["adversary"]
    phases = [(s["phase"], s["mode"]) for s in adv["settings"]]
    assert phases[0] == ("main", None) and len(phases) == 2 and phases[1][0] == "forget"
    main = adv["settings"][0]
    sets = {r["set"]: r for r in main["sets"]}
    assert set(sets) == {"study", "library", "adaptive"}
    assert len(main["adaptive"]["AER"]) == 30 and main["adaptive"]["budget"] == 30
    assert main["memory"]["library"]["records"] > 0
    auc = main["membership"]["signals"]["combined"]
    assert auc["AUC"] is not None and None not in auc["AUC_ci"]
    # the exact AER of each set, recomputed from the records: users whose canary some
    # reply of the set holds verbatim
    recs = _records(d)
    canary = {r["question_id"]: r["value"] for r in recs if r["type"] == "canary"}
    users = sorted(canary)
    for pset, kind in (("study", "probe"), ("library", "attack")):
        hit = [any(canary[u] in (r["response"] + " ".join(r.get("responses") or []))
                   for r in recs if r["type"] == "call" and r["phase"] == "main" and r["question_id"] == u
                   and r["query_kind"] == kind and (kind == "probe" or r["probe_set"] == pset))
               for u in users]
        assert sets[pset]["AER_exact"] == pytest.approx(sum(hit) / len(users))
    lib_any = [any(_decodes_to(canary[u], r["response"]) for r in recs if r["type"] == "call"
                   and r["phase"] == "main" and r["question_id"] == u and r.get("probe_set") == "library")
               for u in users]
    assert sets["library"]["AER"] >= sum(lib_any) / len(users)
    assert sets["library"]["AER"] >= sets["study"]["AER"]
    report = (d / "report.md").read_text()
    for text in ("## How strong was the adversary", "Extraction per probe family", "**any probe**",
                 "The adaptive attacker against its query budget", "| 30 |", "Memory extraction (MEXTRA's metric)",
                 "Membership inference", "![aer_queries.png](aer_queries.png)",
                 "![membership_roc.png](membership_roc.png)"):
        assert text in report, text
    assert (d / "aer_queries.png").stat().st_size > 0 and (d / "membership_roc.png").stat().st_size > 0
    assert "How strong was the adversary" in (d / "report.html").read_text()
    # every call record is typed; each adaptive user attack at most the budget
    adaptive = [r for r in recs if r["type"] == "call" and r.get("probe_set") == "adaptive"]
    assert max(r["query_index"] for r in adaptive) == 30


def test_the_study_records_are_unchanged_by_the_adversary(runs):
    keep = ("question_id", "phase", "mode", "tier", "k", "query_kind", "level", "template_id", "query", "response",
            "extraction", "correct")

    def study(d):
        return [{k: r.get(k) for k in keep} for r in _records(d)
                if r["type"] == "call" and r["query_kind"] in ("question", "probe")]

    assert study(runs / "langgraph") == study(runs / "langgraph-study")
    a = json.loads((runs / "langgraph" / "metrics.json").read_text())
    b = json.loads((runs / "langgraph-study" / "metrics.json").read_text())
    assert a["by_S"] == b["by_S"] and "adversary" not in b
    assert json.loads((runs / "langgraph-study" / "config.json").read_text()).keys().isdisjoint(
        {"probes", "attack_budget", "attacker_model", "membership"})


def test_compare_pairs_the_adversary(runs, tmp_path):
    result = compare_runs([runs / "design", runs / "langgraph"], tmp_path / "cmp", n_resamples=200)
    rows = result["adversary_differences"]
    assert len(rows) == 1 and rows[0]["n"] == 2 and rows[0]["S_A"] == 0 and rows[0]["S_B"] is None
    for key in ("AER_library_diff", "AER_study_diff", "AER_adaptive_diff", "AUC_diff"):
        assert key in rows[0] and len(rows[0][f"{key}_ci"]) == 2
    a = json.loads((runs / "design" / "metrics.json").read_text())["adversary"]["settings"][0]
    b = json.loads((runs / "langgraph" / "metrics.json").read_text())["adversary"]["settings"][0]
    lib = {s["set"]: s["AER"] for s in a["sets"]}["library"] - {s["set"]: s["AER"] for s in b["sets"]}["library"]
    assert rows[0]["AER_library_diff"] == pytest.approx(lib)
    assert "The adversary: differences A − B" in (tmp_path / "cmp" / "compare.md").read_text()
