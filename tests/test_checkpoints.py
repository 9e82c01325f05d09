"""Encrypted LangGraph checkpoints are "not decoded" (never clean) unless the key or
serializer is given; then they are read (memkit.residue.checkpoints, memkit.residue.chroma).

Checkpoints are written by LangGraph itself: a graph run on ``SqliteSaver`` with
``EncryptedSerializer.from_pycryptodome_aes(key=...)``, and a late pending write. The
independent check reads the saver's file with ``sqlite3`` and decrypts each value with
pycryptodome directly (nonce, tag, ciphertext as LangGraph stores them), never through
memkit.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from Crypto.Cipher import AES
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

from memkit.residue.checkpoints import aes_serde, key_from_env
from memkit.residue.chroma import scan, scan_checkpoints

SECRET = "XQ7-VIOLET-3829"
KEY = b"0123456789abcdef0123456789abcdef"  # 32 bytes, as LANGGRAPH_AES_KEY holds it


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    import chromadb
    from chromadb.config import Settings

    path = tmp_path_factory.mktemp("chroma") / "db"
    chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False)).close()
    return path


def run_graph(db: Path, serde) -> None:
    """Thread t1 holds the secret in its messages; thread t2 only in a pending write
    put after its run (a late write of a task)."""
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False), **({"serde": serde} if serde else {}))

    def answer(state: MessagesState) -> dict:
        return {"messages": [AIMessage("noted")]}

    g = StateGraph(MessagesState)
    g.add_node("answer", answer)
    g.add_edge(START, "answer")
    graph = g.compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage(f"my token is {SECRET}")]}, {"configurable": {"thread_id": "t1"}})
    graph.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "t2"}})
    config = saver.get_tuple({"configurable": {"thread_id": "t2"}}).config
    saver.put_writes(config, [("messages", [HumanMessage(f"later: {SECRET}")])], task_id="late-task")
    saver.conn.commit()
    saver.conn.close()


def stored(db: Path) -> list[tuple[str, str, bytes]]:
    con = sqlite3.connect(db)
    rows = [("checkpoints", t, bytes(b)) for t, b in con.execute("SELECT type, checkpoint FROM checkpoints")]
    rows += [("writes", t, bytes(b)) for t, b in con.execute("SELECT type, value FROM writes")]
    con.close()
    return rows


def decrypt(blob: bytes, key: bytes, mode: int) -> bytes:
    """pycryptodome directly: LangGraph stores nonce (16) + tag (16) + ciphertext."""
    return AES.new(key, mode, nonce=blob[:16]).decrypt_and_verify(blob[32:], blob[16:32])


@pytest.mark.parametrize(("key", "mode"), [(KEY, AES.MODE_EAX), (KEY[:16], AES.MODE_EAX), (KEY[:24], AES.MODE_GCM)])
def test_encrypted_checkpoint_db_is_not_clean_without_the_key_and_found_with_it(tmp_path, store_dir, key, mode):
    db = tmp_path / "checkpoints.sqlite"
    run_graph(db, EncryptedSerializer.from_pycryptodome_aes(key=key, mode=mode))
    rows = stored(db)
    encrypted = [r for r in rows if r[1].endswith("+aes")]
    assert encrypted and all(SECRET.encode() not in b for _, _, b in rows)  # nothing in plain bytes
    holding = [r for r in encrypted if SECRET.encode() in decrypt(r[2], key, mode)]
    assert any(table == "writes" for table, _, _ in holding)  # a pending write holds it
    # without the key: incomplete, with how many values and why
    rep = scan(store_dir, SECRET, also=[db], embedder=object())
    assert rep.verdict == "incomplete" and rep.total == 0
    (reason,) = rep.unchecked["side_sqlite"]
    assert f"{len(encrypted)} of {len(rows)} stored values are encrypted ('msgpack+aes': " in reason
    cov = {c.path: c for c in rep.coverage}[str(db)]
    assert not cov.complete and "langgraph-checkpoint" in cov.decoders
    # with it: every value decoded, the copies found (thread t2's pending write among them)
    rep = scan(store_dir, SECRET, also=[db], embedder=object(), checkpoint_serde=aes_serde(key))
    assert rep.verdict == "copies remain" and "side_sqlite" not in rep.unchecked
    locations = [h.location for h in rep.surfaces["side_sqlite"]]
    assert any(loc.startswith("checkpoints.sqlite:writes:thread=t2") and "late-task" in loc for loc in locations)
    assert any("thread=t1" in loc for loc in locations)
    assert {c.path: c for c in rep.coverage}[str(db)].complete
    # a wrong key decrypts nothing: still not clean, and said so
    rep = scan(store_dir, SECRET, also=[db], embedder=object(), checkpoint_serde=aes_serde(b"f" * len(key)))
    assert rep.verdict == "incomplete" and "could not be decrypted" in rep.unchecked["side_sqlite"][0]


def test_the_same_run_unencrypted_gives_the_same_copies(tmp_path, store_dir):
    plain, secret_db = tmp_path / "plain.sqlite", tmp_path / "enc.sqlite"
    run_graph(plain, None)
    run_graph(secret_db, EncryptedSerializer.from_pycryptodome_aes(key=KEY))
    assert {t for _, t, _ in stored(plain)} <= {"msgpack", "null", "empty"}
    a = scan(store_dir, SECRET, also=[plain], embedder=object())
    b = scan(store_dir, SECRET, also=[secret_db], embedder=object(), checkpoint_serde=aes_serde(KEY))
    assert a.verdict == b.verdict == "copies remain"
    def where(rep):  # file name, checkpoint and task ids (time-based) aside
        return sorted((re.sub(r"(checkpoint=|<pending )[0-9a-f-]{36}", r"\1*", h.location.split(":", 1)[1]), h.kind)
                      for h in rep.surfaces["side_sqlite"])

    assert where(a) == where(b)
    # decoded once, not also as the raw bytes of the same value
    assert len(a.surfaces["side_sqlite"]) == sum(SECRET.encode() in blob for _, _, blob in stored(plain))


def test_a_checkpointer_with_encrypted_values(tmp_path):
    """The checkpointer= path: a saver opened without the key reads nothing it can
    decode (not clean); given the serializer, the copies are found."""
    db = tmp_path / "checkpoints.sqlite"
    run_graph(db, EncryptedSerializer.from_pycryptodome_aes(key=KEY))
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))  # default serializer: no key
    try:
        rep = scan_checkpoints(saver, SECRET)
        assert rep.total == 0 and rep.verdict == "incomplete"
        assert "stored values are encrypted ('msgpack+aes': " in rep.unchecked["checkpoint"][0]
        rep = scan_checkpoints(saver, SECRET, serde=EncryptedSerializer.from_pycryptodome_aes(key=KEY))
        assert rep.surfaces["checkpoint"] and rep.unchecked == {}
        assert any("late-task" in h.location for h in rep.surfaces["checkpoint"])
    finally:
        saver.conn.close()


def _cli(store_dir: Path, db: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    memkit = Path(sys.executable).with_name("memkit")
    return subprocess.run([str(memkit), "residue", str(store_dir), SECRET, "--also", str(db), "--json", *args],
                          capture_output=True, text=True, timeout=150,
                          env={**os.environ, "ANONYMIZED_TELEMETRY": "False", **env})


@pytest.mark.timeout(400)
def test_memkit_residue_checkpoint_key_env(tmp_path, store_dir):
    db = tmp_path / "checkpoints.sqlite"
    run_graph(db, EncryptedSerializer.from_pycryptodome_aes(key=KEY))
    run = _cli(store_dir, db, env={})
    assert run.returncode == 3, run.stdout[-2000:] + run.stderr[-2000:]
    assert "encrypted" in json.loads(run.stdout)["unchecked"]["side_sqlite"][0]
    run = _cli(store_dir, db, "--checkpoint-key-env", "MY_CKPT_KEY", env={"MY_CKPT_KEY": KEY.decode()})
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert json.loads(run.stdout)["counts"]["side_sqlite"] >= 2
    assert KEY.decode() not in run.stdout + run.stderr and SECRET not in run.stdout
    for env, words in [({}, "MY_CKPT_KEY is not set"), ({"MY_CKPT_KEY": "short"}, "16, 24 or 32 bytes")]:
        bad = _cli(store_dir, db, "--checkpoint-key-env", "MY_CKPT_KEY", env=env)
        assert bad.returncode == 2 and words in bad.stderr and "Traceback" not in bad.stderr
        assert "short" not in bad.stderr


def test_key_from_env_as_langgraph_reads_it(monkeypatch):
    monkeypatch.setenv("K", KEY.decode())
    assert key_from_env("K") == KEY
    monkeypatch.setenv("K", "x" * 17)
    with pytest.raises(ValueError, match="16, 24 or 32 bytes") as err:
        key_from_env("K")
    assert "x" * 17 not in str(err.value)
