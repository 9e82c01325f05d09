"""The ``langmem``, ``mem0`` and ``memkit`` targets end to end on their real backends,
and ``audit()`` over a target.

Copies are planted through each system's own API (LangMem's tools inside LangGraph's
prebuilt agent, mem0's ``Memory.add``, a memkit design's write graph); expected counts
come from the backends read without memkit (the store's own ``search``, ``sqlite3``
on mem0's history database and Chroma's SQLite file).
"""

from __future__ import annotations

import sqlite3

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from evaluators.targets.base import load_target, scan_all

S1, S2 = "QZ7-VIOLET-3829", "K4P-AMBER-1047"
U1, U2 = "user-a", "user-b"


def _session(secret: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"my private session token is {secret}, keep it"},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "I adopted a cat named Biscuit last spring"},
    ]


def _plant(target) -> None:
    target.feed(_session(S1), "s1", "2024/01/01", U1)
    target.feed(_session(S2), "s2", "2024/01/02", U2)


def _like(db, sql: str, secret: str) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return sum(str(v).count(secret) for (v,) in con.execute(sql))
    finally:
        con.close()


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_langmem_tools_write_and_delete_through_the_store():
    with load_target("langmem", backend="memory", embed=DeterministicFakeEmbedding(size=8), dims=8) as target:
        _plant(target)
        stored = [i.value["content"] for i in target.store.search(("memories", U1), limit=100)]
        assert sorted(stored) == sorted(t["content"] for t in _session(S1) if t["role"] == "user")
        before = scan_all(target.surfaces(), [S1, S2])
        assert before["store_api"].copies(S1) == sum(c.count(S1) for c in stored) == 1
        assert "QZ7" in target.ask("what is my private session token?", U1, "t-1")
        target.forget_secret(S1, U1)
        target.forget_user(U2)
        left = [i.value["content"] for i in target.store.search(("memories", U1), limit=100)]
        assert left == ["I adopted a cat named Biscuit last spring"]
        assert target.store.search(("memories", U2), limit=100) == []
        after = scan_all(target.surfaces(), [S1, S2])
        assert after["store_api"].copies(S1) == after["store_api"].copies(S2) == 0
        # user 1's threads (the session, the question, the forget request) keep the secret
        assert after["checkpoint"].copies(S1) > 0 and after["checkpoint"].copies(S2) == 0


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_mem0_history_keeps_what_delete_took_out(tmp_path):
    with load_target("mem0", workdir=tmp_path / "m") as target:
        _plant(target)
        history = tmp_path / "m" / "history.db"
        rows = "SELECT old_memory FROM history UNION ALL SELECT new_memory FROM history"
        before = scan_all(target.surfaces(), [S1, S2])
        assert before["side_sqlite"].copies(S1) == _like(history, rows, S1) == 1
        assert before["metadata"].copies(S1) >= 1
        assert target.forget_secret(S1, U1) == 1
        target.forget_user(U2)
        after = scan_all(target.surfaces(), [S1, S2])
        assert target.memory.get_all(filters={"user_id": U2})["results"] == []
        assert after["metadata"].copies(S1) == after["metadata"].copies(S2) == 0
        # mem0's history logs the DELETE with the old text: a second copy
        assert after["side_sqlite"].copies(S1) == _like(history, rows, S1) == 2
        assert after["stale_embedding"].status == "not_checked"
        assert not target.supports("delete_threads") and target.deletion_steps() == {}


@pytest.mark.timeout(180)
def test_memkit_design_raw_only_keeps_the_summary_and_compact(tmp_path, embedder):
    with load_target("memkit", mode="raw_only", workdir=tmp_path / "d") as target:
        _plant(target)
        db = tmp_path / "d" / "chroma" / "chroma.sqlite3"
        docs = "SELECT string_value FROM embedding_metadata WHERE key = 'chroma:document'"
        before = scan_all(target.surfaces(), [S1, S2])
        assert before["text_raw"].copies(S1) + before["text_summary"].copies(S1) == _like(db, docs, S1) > 0
        target.forget_secret(S1, U1)
        target.forget_user(U2)
        after = scan_all(target.surfaces(), [S1, S2])
        assert after["text_raw"].copies(S1) == 0 and after["text_summary"].copies(S1) == _like(db, docs, S1) == 1
        assert after["text_raw"].copies(S2) == after["text_summary"].copies(S2) == _like(db, docs, S2) == 0
        target.deletion_steps()["compact"]()
        compacted = scan_all(target.surfaces(), [S1, S2])
        raw = sum(p.read_bytes().count(S2.encode()) for p in (tmp_path / "d").rglob("*") if p.is_file())
        assert sum(s.copies(S2) for s in compacted.results().values() if s.status == "checked") == raw == 0


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_audit_runs_a_target_with_steps_and_reports_na():
    from evaluators.audit import audit

    with load_target("langgraph", backend="memory", embed=DeterministicFakeEmbedding(size=8), dims=8) as target:
        res = audit(target, forget=True, n=2, forget_scope="user", forget_steps=["vacuum"], n_resamples=20)
    assert res.phases == ["before", "forget"]
    assert res.steps_na and "vacuum" in res.steps_na
    assert res.surface_scans["before"]["store_api"]["holders"] == 2
    assert res.residue == {"store_api": 0, "store_vectors": 0, "checkpoint": 0}
    assert res.aer_after["max"] == 0.0
    assert "| store_api | 2/2" in res.report and "`vacuum`: n/a" in res.report
    with load_target("langgraph", backend="memory", embed=DeterministicFakeEmbedding(size=8), dims=8) as target:
        kept = audit(target, forget=False, n=1, n_resamples=20)
    assert kept.forget_mode is None and kept.phases == ["before"] and kept.aer_after is None
