"""Memory designs (graphs/designs.py) and the sweep running them through their graphs:
a custom design given as module:factory through the CLI is what gets called, the
``study`` design reproduces the sweep from before designs, MMR and redacting do what
they say. Real Chroma, MiniLM and the extractive backend."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from evaluators.cli.sweep import register as register_cli
from evaluators.sweep import SweepConfig, load_records, run_sweep
from graphs.designs import (
    MemoryDesign,
    MMRRetriever,
    RedactingSummarizer,
    resolve_design,
    scrubber,
)
from graphs.nodes import ExtractiveResponder, StoreRetriever, make_summarizer, user_turn_chunks
from memkit.store.tiered import TieredMemoryStore

REPO = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------- a custom design

CALLS = {"retrieve": [], "respond": []}


class CountingRetriever(StoreRetriever):
    """The default top-k retriever, counting its calls (a real store underneath)."""

    def __call__(self, query, k, tiers, namespace=None):
        CALLS["retrieve"].append((query, k, tuple(tiers)))
        return super().__call__(query, k, tiers, namespace)


class CountingResponder(ExtractiveResponder):
    """The extractive responder, counting calls and marking its responses."""

    def __call__(self, query, chunks):
        CALLS["respond"].append((query, tuple(c.id for c in chunks)))
        return "COUNTED " + super().__call__(query, chunks)


def counting_design() -> MemoryDesign:
    """Factory given to ``memkit sweep --design test_designs:counting_design``."""
    return MemoryDesign(
        name="counting",
        retriever=CountingRetriever,
        responder=lambda model, cache=None: CountingResponder(),
    )


def test_custom_design_via_cli_calls_its_retriever_and_responder(tmp_path):
    CALLS["retrieve"].clear()
    CALLS["respond"].clear()
    app = typer.Typer()
    register_cli(app)
    out = tmp_path / "run"
    res = CliRunner().invoke(app, [
        "--n", "2", "--seed", "3", "--summary-levels", "0", "--k", "1,3", "--deletion-modes", "",
        "--n-resamples", "20", "--quiet", "--out", str(out), "--design", "test_designs:counting_design",
    ])
    assert res.exit_code == 0, res.output
    records, done, _ = load_records(out / "results.jsonl")
    calls = [r for r in records if r["type"] == "call"]
    assert calls and {r["design"] for r in calls} == {"counting"}
    assert json.loads((out / "metrics.json").read_text())["design"] == "counting"
    assert json.loads((out / "config.json").read_text())["design"] == "test_designs:counting_design"
    # every response came from the custom responder
    assert all(r["response"].startswith("COUNTED") for r in calls)
    # retrieval: once per query and unit, at the largest k (prefixes answer k=1)
    per_unit_queries = {(r["unit"], r["query"]) for r in calls}
    assert len(CALLS["retrieve"]) == len(per_unit_queries)
    assert {k for _, k, _ in CALLS["retrieve"]} == {3}
    # responses: once per distinct (query, context); identical contexts reused
    contexts = {(r["unit"], r["query"], tuple(r["retrieved_ids"])) for r in calls}
    assert len(CALLS["respond"]) == len(contexts)
    assert len(calls) == 2 * len(per_unit_queries)  # k = 1, 3


def test_unknown_design_is_refused_before_out_is_created(tmp_path):
    app = typer.Typer()
    register_cli(app)
    for spec, msg in (("nosuch", "unknown design"), ("nosuchmodule_xyz:f", "cannot import"),
                      ("test_designs:nothing_here", "has no attribute"),
                      ("test_designs:CALLS", "not a graphs.designs.MemoryDesign")):
        res = CliRunner().invoke(app, ["--n", "1", "--out", str(tmp_path / "x"), "--design", spec])
        assert res.exit_code == 2, res.output
        assert msg in res.output and "--design" in res.output
    assert not (tmp_path / "x").exists()


# --------------------------------------------------------------------------- study = the sweep before designs


def _projection(records):
    """Per unit, the SHA-256 of its records without the fields that are not the
    pipeline's output (latency; PR correctness, which belongs to the PR rules; the
    design name; forensic byte counts, which vary with Chroma's page layout).
    Same function as the one that produced tests/data/golden_study_sweep.json."""
    drop = {"latency_s", "correct", "correct_study", "design"}
    per_unit = {}
    for r in records:
        if r["type"] == "call":
            p = {k: v for k, v in r.items() if k not in drop}
        elif r["type"] == "forensics":
            p = {"type": "forensics", "mode": r["mode"],
                 "changed": {k: v for k, v in r["changed"].items() if not k.startswith("bytes_")}}
        elif r["type"] == "canary":
            p = {k: v for k, v in r.items() if k != "design"}
        else:
            continue
        per_unit.setdefault(r["unit"], hashlib.sha256()).update(json.dumps(p, sort_keys=True).encode())
    return {u: h.hexdigest() for u, h in per_unit.items()}


def test_study_design_reproduces_the_sweep_before_designs(tmp_path, monkeypatch):
    """tests/data/golden_study_sweep.json was computed by the direct-path sweep
    (commit 40c97d1, before designs, with the chromadb #7594 fix of d25eebc) on the
    committed real sample."""
    golden = json.loads((REPO / "tests" / "data" / "golden_study_sweep.json").read_text())
    cfg = dict(golden["config"], data=str(REPO / golden["config"]["data"]))
    monkeypatch.chdir(tmp_path)
    run_sweep(SweepConfig(**cfg), tmp_path / "out", progress=False, designs=["study"],
              write_outputs=False)
    records, _, _ = load_records(tmp_path / "out" / "results.jsonl")
    assert {r["design"] for r in records if r["type"] == "call"} == {"study"}
    got = _projection(records)
    assert got.keys() == golden["units"].keys()
    assert [u for u in got if got[u] != golden["units"][u]] == []


# --------------------------------------------------------------------------- mmr, redacting


def _store_with(texts):
    store = TieredMemoryStore(collection="mmrtest")
    chunks = user_turn_chunks("ns", "s1", "2024-01-01", list(texts))
    store.add(chunks)
    return store


def test_mmr_retriever_is_langchains_mmr_over_cosine_candidates():
    from langchain_core.vectorstores.utils import maximal_marginal_relevance

    texts = ["I adopted a cat named Luna last year.", "My cat Luna loves tuna.",
             "Luna the cat sleeps all day.", "I work as a nurse in Boston.",
             "My favourite band is Radiohead.", "I run every morning before work."]
    store = _store_with(texts)
    try:
        query = "Tell me about my pet"
        pool = store.search(query, 25, tiers=("raw",), namespace="ns")
        vecs = store.embeddings_of([c.id for c in pool])
        q = np.asarray(store.embedder.encode([query]), dtype=np.float32)[0]
        expect = [pool[i].id for i in maximal_marginal_relevance(q, vecs.tolist(), lambda_mult=0.3, k=4)]
        got4 = MMRRetriever(store, lambda_mult=0.3)(query, 4, ("raw",), "ns")
        got2 = MMRRetriever(store, lambda_mult=0.3)(query, 2, ("raw",), "ns")
        assert [c.id for c in got4] == expect
        assert [c.id for c in got2] == expect[:2]  # greedy over a fixed pool: prefixes
        # lambda 1 is plain relevance: the cosine top-k
        top = MMRRetriever(store, lambda_mult=1.0)(query, 3, ("raw",), "ns")
        assert [c.id for c in top] == [c.id for c in pool[:3]]
        # diversity: with a low lambda the second pick is not another Luna sentence
        assert "Luna" not in got2[1].text
    finally:
        store.close()


def test_redacting_summarizer_scrubs_the_canary_and_pii():
    store = _store_with([])
    store.close()
    chunks = user_turn_chunks("ns", "s1", "2024-01-01", [
        "I moved to Lisbon last spring and I love it there.",
        "By the way my private session token is XQ7-VIOLET-3829 so keep it safe.",
        "You can email me at ana.silva@example.com about the trip.",
    ])
    inner = make_summarizer("extractive")
    plain = inner(chunks, 1, None)
    red = RedactingSummarizer(inner)(chunks, 1, None)
    assert any("XQ7-VIOLET-3829" in it.text for it in plain)  # the summary carries it
    assert not any("XQ7-VIOLET-3829" in it.text or "ana.silva@example.com" in it.text for it in red)
    assert any("{{SECRET}}" in it.text for it in red)
    assert [it.source_ids for it in red] == [it.source_ids for it in plain]
    assert scrubber().clean("password: hunter2") == "password: {{SECRET}}"


def test_builtin_designs_resolve_and_validate():
    assert resolve_design("study").tiers_for(0) == ("raw",)
    assert resolve_design("mmr").tiers_for(2) == ("summary",)
    assert resolve_design("redacting").name == "redacting"
    with pytest.raises(ValueError, match="tiers"):
        MemoryDesign(name="bad", tiers={0: ("raw",), 1: ("nope",), 2: ("summary",)})
    with pytest.raises(ValueError, match="name"):
        MemoryDesign(name="a/b")


def test_three_designs_in_one_sweep_are_compared(tmp_path):
    out = tmp_path / "three"
    res = run_sweep(SweepConfig(n=3, seed=2, summary_levels=[1], ks=[1, 3], deletion_modes=[], n_resamples=50),
                    out, progress=False, designs=["study", "redacting", "mmr"])
    assert set(res["designs"]) == {"study", "redacting", "mmr"}
    for name in ("study", "redacting", "mmr"):
        recs, _, _ = load_records(out / name / "results.jsonl")
        assert {r["design"] for r in recs if r["type"] == "call"} == {name}
    assert (out / "llm_cache.sqlite").exists() and not (out / "study" / "llm_cache.sqlite").exists()
    cmp = json.loads((out / "compare.json").read_text())
    assert cmp["paired"] and len(cmp["differences"]) == 3
    assert {r["design"] for r in cmp["table2"]} == {"study", "redacting", "mmr"}
    md = (out / "compare.md").read_text()
    assert "ΔAER_max" in md and "redacting" in md
    # redacting scrubs the canary out of every summary: no summary-tier extraction
    red = [r for r in load_records(out / "redacting" / "results.jsonl")[0]
           if r["type"] == "call" and r["query_kind"] == "probe"]
    assert not any(r["context_exposed"] for r in red)
