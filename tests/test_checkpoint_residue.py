"""Issue 21, section 4: checkpoints hold what the saver stores, not what list() shows.

LangGraph issue #7206: after ``delete_thread``, a late ``put_writes`` with the
pre-delete config stores pending writes again; ``list()`` never returns them (their
checkpoint is gone), yet the saver holds the secret. Copies are planted by LangGraph's
own savers; the independent check reads the saver's storage bytes or its SQLite file.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from memkit.residue.chroma import scan, scan_checkpoints, threads_with_copies

SECRET = "XQ7-violet-3829"


def _graph(saver):
    def answer(state: MessagesState) -> dict:
        return {"messages": [AIMessage("noted")]}

    g = StateGraph(MessagesState)
    g.add_node("answer", answer)
    g.add_edge(START, "answer")
    return g.compile(checkpointer=saver)


def _late_write(saver) -> dict:
    """A conversation on thread t1, the thread deleted, then a late put_writes with the
    config from before the deletion (#7206). Returns that config."""
    graph = _graph(saver)
    graph.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "t1"}})
    config = saver.get_tuple({"configurable": {"thread_id": "t1"}}).config
    saver.delete_thread("t1")
    saver.put_writes(config, [("messages", [HumanMessage(f"my code is {SECRET}")])], task_id="late-task")
    return config


def test_in_memory_saver_late_write_after_delete_thread():
    saver = InMemorySaver()
    _late_write(saver)
    assert list(saver.list(None)) == []  # list() shows nothing ...
    stored = [typed[1] for writes in saver.writes.values() for (_, _, typed, _) in writes.values()]
    assert any(SECRET.encode() in blob for blob in stored)  # ... while the saver holds it
    report = scan_checkpoints(saver, SECRET)
    assert len(report.surfaces["checkpoint"]) == 1
    hit = report.surfaces["checkpoint"][0]
    assert "(checkpoint deleted)" in hit.location and threads_with_copies(report) == {"t1"}
    assert report.unchecked == {}
    saver.delete_thread("t1")
    assert scan_checkpoints(saver, SECRET).surfaces["checkpoint"] == []


def test_sqlite_saver_late_write_after_delete_thread(tmp_path, store_dir_empty):
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path / "checkpoints.sqlite"
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    _late_write(saver)
    saver.conn.commit()
    assert list(saver.list(None)) == []
    con = sqlite3.connect(db)  # an independent reader of the saver's file
    rows = con.execute("SELECT thread_id, task_id, value FROM writes").fetchall()
    checkpoints = con.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    con.close()
    assert checkpoints == 0 and any(SECRET.encode() in bytes(v) for _, _, v in rows)
    report = scan_checkpoints(saver, SECRET)
    assert [h.location.split(":<pending")[0].split(":checkpoint=")[0] for h in report.surfaces["checkpoint"]] == [
        "thread=t1"]
    assert "(checkpoint deleted)" in report.surfaces["checkpoint"][0].location
    # the saver's file, given as a side file, shows the same row
    disk = scan(store_dir_empty, SECRET, also=[db], embedder=object())
    assert disk.counts()["side_sqlite"] == 1
    saver.conn.close()


def test_uncommon_saver_is_read_through_list_and_marked_unchecked():
    """A saver memkit cannot read from its storage: list() is scanned, and the surface
    says what could not be seen."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    inner = InMemorySaver()
    _graph(inner).invoke({"messages": [HumanMessage(f"code {SECRET}")]}, {"configurable": {"thread_id": "t"}})

    class Wrapped(BaseCheckpointSaver):
        def list(self, config, **kw):
            return inner.list(config, **kw)

    report = scan_checkpoints(Wrapped(), SECRET)
    assert report.surfaces["checkpoint"] and "list()" in report.unchecked["checkpoint"][0]


@pytest.fixture(scope="module")
def store_dir_empty(tmp_path_factory) -> Path:
    import chromadb
    from chromadb.config import Settings

    path = tmp_path_factory.mktemp("chroma") / "db"
    chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False)).close()
    return path


def _example1():
    path = Path(__file__).resolve().parents[1] / "examples" / "01_audit_react_agent.py"
    spec = importlib.util.spec_from_file_location("memkit_example_01_ckpt21", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # LangGraph resolves the nodes' type hints through it
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(600)
def test_audit_delete_threads_counts_after_its_own_probing(embedder):
    """Example 1 with raw_only: the summary tier keeps the canaries, so the audit's own
    post-forget probes leak them into new threads. With delete_threads those threads
    are deleted too and counted after the probing: the saver ends empty (checked on its
    storage) and ``residue["checkpoint"]`` is 0 for that reason, not because the
    post-forget threads were never looked at."""
    from evaluators.audit import audit, store_forgetter
    from memkit.store.langgraph import MemkitStore
    from memkit.store.tiered import TieredMemoryStore

    ex1 = _example1()
    store = MemkitStore(TieredMemoryStore(embedder=embedder), index={"fields": ["content"]},
                        tiers={("memories", "*", "facts"): "summary"})
    agent = ex1.build_agent(store)
    res = audit(agent, feed=ex1.build_memory_writer(store), forget=store_forgetter(store, "raw_only"),
                forget_mode="raw_only", store=store, n=2, seed=0, n_resamples=20, delete_threads=True)
    after = [r for r in res.records if r["phase"] == "forget"]
    leaked = {r["user_id"] for r in after if any(c["value"] in r["response"] for c in res.canaries)}
    assert leaked, "raw_only should leave canaries that the post-forget probes return"
    saver = agent.checkpointer
    assert not saver.storage and not saver.writes and not saver.blobs  # every thread deleted
    assert res.residue["checkpoint"] == 0
    assert res.checkpoint_residue_kept_threads >= len(leaked)
    store.close()
