"""Forget requests in words (graphs/forget_request.py, evaluators/forget_requests.py)
through the one runner: each user gets a planted secret (canary) and a planted fact;
every kind of request is issued about each; per kind the audit reports what was found
and deleted, the collateral, FRS and residue, each with a CI.

What a forget left is checked without memkit where it matters: chroma's SQLite read
with plain SQL, the directory's bytes with ``grep -a``, a LangGraph store through its
own ``search``.
"""

from __future__ import annotations

import sqlite3
import subprocess

import pytest

from evaluators.forget_requests import REQUEST_KINDS, request_text
from graphs.forget_request import (
    build_forget_request_graph,
    forget_request,
    identifiers,
    resolve,
    store_items,
)
from graphs.memory import write_session
from graphs.nodes import make_summarizer
from memkit.dataset.canaries import plant
from memkit.dataset.facts import plant_fact
from memkit.dataset.synthetic import synthetic
from memkit.scan.matching import matcher
from memkit.store import TieredMemoryStore

pytestmark = pytest.mark.timeout(1200)


def _users(store: TieredMemoryStore, n: int, seed: int = 0) -> list[tuple[str, object, object, object]]:
    """``n`` synthetic users written at S=0, each with a canary and a fact."""
    out = []
    for inst in synthetic(n, seed):
        p, c = plant(inst, seed)
        p, f = plant_fact(p, seed, avoid=(c.session_index, c.turn_index))
        for sid, date, turns in p.sessions():
            write_session(store, inst.question_id, sid, date, [t.to_dict() for t in turns], 0,
                          make_summarizer("extractive"))
        out.append((inst.question_id, p, c, f))
    return out


def _live_docs(path) -> list[str]:
    """Every live document of a Chroma directory, read with plain SQL."""
    con = sqlite3.connect(path / "chroma.sqlite3")
    try:
        return [r[0] for r in con.execute("SELECT string_value FROM embedding_metadata WHERE key = 'chroma:document'")]
    finally:
        con.close()


def test_request_texts_are_seeded_and_never_leak_the_value_where_they_should_not() -> None:
    v = "XQ7-VIOLET-3829"
    for kind in REQUEST_KINDS:
        text = request_text(kind, "token", v, "2023/05/20 (Sat) 02:21", seed=3)
        assert text == request_text(kind, "token", v, "2023/05/20 (Sat) 02:21", seed=3)
        assert (v in text) == (kind == "exact")
    assert "Saturday" in request_text("indirect", "token", v, "2023/05/20 (Sat) 02:21")
    assert "xq7" in request_text("obfuscated", "token", v, "")
    assert identifiers("By the way, my private session token is XQ7-VIOLET-3829.") == ["XQ7-VIOLET-3829"]
    assert "Anouk Varga" in identifiers("Also, my doctor's name is Anouk Varga.")


def test_deterministic_resolver_per_kind() -> None:
    """The matcher finds a value however it is spelt; retrieval with an English
    embedding finds no request in another language (ForgetEval's finding)."""
    store = TieredMemoryStore(collection="requests")
    try:
        for ns, p, c, f in _users(store, 2):
            items = store_items(store, ns)
            for value, cat, s in ((c.value, "token", c.session_index), (f.value, f.category, f.session_index)):
                for kind in ("exact", "obfuscated", "es", "de", "zh"):
                    res = resolve(request_text(kind, cat, value, p.haystack_dates[s]), items, store.embedder)
                    hit = any(matcher(value).search(t) for t in res.texts())
                    assert hit == (kind in ("exact", "obfuscated")), (kind, cat, res.preview())
                    assert res.resolver == "deterministic" and res.considered == len(items)
    finally:
        store.close()


def test_forget_request_deletes_what_it_resolved_and_nothing_else(tmp_path) -> None:
    store = TieredMemoryStore(tmp_path / "store")
    ((ns, p, c, f),) = _users(store, 1, seed=4)
    refused = forget_request(store, f"Please forget {f.value}.", "full_purge", namespace=ns, confirm=lambda r: False)
    assert not refused.confirmed and refused.results == [] and refused.resolution.matches
    assert any(f.value in d for d in _live_docs(store.path))
    done = forget_request(store, request_text("obfuscated", f.category, f.value, ""), "full_purge", namespace=ns)
    assert done.resolution.matches and all(f.value in t for t in done.resolved_texts)
    assert done.changes()["request"]["items"] == len(done.resolution.matches)
    store.close()
    docs = _live_docs(tmp_path / "store")
    assert not any(f.value in d for d in docs)  # the fact is gone from every live record
    assert any(c.value in d for d in docs)  # the canary, in another turn, is not collateral
    grep = subprocess.run(["grep", "-raFl", f.value, str(tmp_path / "store")], capture_output=True, text=True)
    assert grep.stdout == ""  # full_purge compacted: no byte of the fact is left


def test_the_request_graph_previews_then_forgets(tmp_path) -> None:
    store = TieredMemoryStore(tmp_path / "store")
    ((ns, p, c, f),) = _users(store, 1, seed=5)
    out = build_forget_request_graph(store).invoke({"request": f"Please forget {c.value}.", "mode": "raw_only",
                                                    "namespace": ns})
    assert c.value in out["preview"] and out["result"].results
    assert not store.find_containing(c.value, namespace=ns, tiers=["raw"], normalized=True)
    nothing = build_forget_request_graph(store).invoke({"request": "Bitte vergiss meine Adresse.", "mode": "raw_only",
                                                        "namespace": ns})
    assert "result" not in nothing and "Nothing found" in nothing["preview"]
    store.close()


@pytest.mark.slow
def test_audit_reports_each_request_kind_for_secret_and_fact() -> None:
    """The issue's test: per kind, items found and deleted, collateral, FRS and residue."""
    from evaluators.audit import audit
    from evaluators.targets.memkit_design import build

    with build("study", mode="raw_only", S=1) as target:
        res = audit(target, n=2, forget=False, forget_requests=REQUEST_KINDS, forget_about=("secret", "fact"),
                    n_resamples=50)
    rows = {(r["request"], r["about"]): r for r in res.forget_requests}
    assert set(rows) == {(k, a) for k in REQUEST_KINDS for a in ("secret", "fact")}
    for (kind, _), r in rows.items():
        assert r["n"] == 2 and "na" not in r
        for key in ("found", "deleted", "residue", "collateral", "FRS_worst"):
            assert r[key] is not None and len(r[f"{key}_ci"]) == 2, (kind, key, r)
        if kind in ("exact", "obfuscated"):  # raw_only: the raw turn goes, the summary's copy stays
            assert r["found"] == 1.0 and r["residue_surfaces"]["text_raw"] == 0
        if kind in ("es", "de", "zh"):
            assert r["found"] == 0.0 and r["deleted"] == 0.0 and r["residue_surfaces"]["text_raw"] == 2
    assert "## Forgetting as users ask for it" in res.report and "| raw_only | zh | fact |" in res.report


def test_a_target_that_takes_only_a_secret_is_na_for_requests() -> None:
    from evaluators.audit import audit

    kept: dict[str, list[str]] = {}

    def feed(turns, session_id, date, user_id):
        kept.setdefault(user_id, []).extend(t["content"] for t in turns if t["role"] == "user")

    def forget(secret, user_id):
        kept[user_id] = [t for t in kept.get(user_id, []) if secret not in t]

    res = audit(lambda text, user_id: " ".join(kept.get(user_id, []))[:200], feed=feed, forget=forget, n=2,
                forget_requests=("paraphrase", "es"), n_resamples=20)
    assert [r["request"] for r in res.forget_requests] == ["paraphrase", "es"]
    assert all("takes only a secret" in r["na"] and "found" not in r for r in res.forget_requests)
    assert "| - | custom | paraphrase | secret | n/a |" in res.report


def test_a_langgraph_store_target_forgets_a_request_in_words() -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from evaluators.targets.base import load_target

    secret, other = "QZ7-VIOLET-3829", "K4P-AMBER-1047"
    with load_target("langgraph", backend="memory", embed=DeterministicFakeEmbedding(size=8), dims=8) as target:
        for user, s in (("user-a", secret), ("user-b", other)):
            target.feed([{"role": "user", "content": f"my private session token is {s}, keep it"},
                         {"role": "user", "content": "I adopted a cat named Biscuit last spring"}], "s1",
                        "2024/01/01 (Mon) 10:00", user)
        assert target.supports("forget_request")
        done = target.forget_request(request_text("obfuscated", "token", secret, ""), "user-a")
        assert done.changes()["deleted"]["items"] == 1
        a = [i.value["content"] for i in target.store.search(("memories", "user-a"), limit=10)]
        b = [i.value["content"] for i in target.store.search(("memories", "user-b"), limit=10)]
        assert not any(secret in t for t in a) and any("Biscuit" in t for t in a)
        assert any(other in t for t in b)


@pytest.mark.llm
def test_llm_resolver_next_to_the_deterministic_one() -> None:
    """The tiny llama.cpp model judges every request; literal matches are kept whatever
    it answers (benchmarks/bench_forget_requests.py measures both per kind)."""
    from memkit.models import chat_model

    model = chat_model("llamacpp:smollm2-135m", max_tokens=16)
    store = TieredMemoryStore(collection="requests-llm")
    try:
        ((ns, p, c, f),) = _users(store, 1, seed=6)
        items = store_items(store, ns)
        found = {"deterministic": 0, "llm": 0}
        for value, cat, s in ((c.value, "token", c.session_index), (f.value, f.category, f.session_index)):
            for kind in REQUEST_KINDS:
                text = request_text(kind, cat, value, p.haystack_dates[s])
                det = resolve(text, items, store.embedder)
                llm = resolve(text, items, store.embedder, chat_model=model)
                assert llm.resolver.startswith("llm:")
                found["deterministic"] += any(matcher(value).search(t) for t in det.texts())
                found["llm"] += any(matcher(value).search(t) for t in llm.texts())
                if kind == "exact":
                    assert any(m.why == "literal" for m in llm.matches)
        assert found["deterministic"] >= 4  # exact and obfuscated, both items
    finally:
        store.close()
