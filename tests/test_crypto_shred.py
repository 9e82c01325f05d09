"""Encryption at rest and the ``crypto_shred`` deletion mode (memkit/store/keystore.py,
graphs/forget.py).

Setup: the real session of LongMemEval instance 6b168ec8 with the canary sentence
appended to user turn 6 (as tests/test_forget.py), written at S=1 by the extractive
summarizer with an LLM cache into a persistent store that seals every text under the
user's data key. What the tests check is read independently of memkit: the bytes of
every file (``grep -a``), chroma's SQLite tables (plain SQL), and the AES-GCM of
``cryptography`` with the key bytes read from the key file.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from graphs.forget import (
    DELETION_MODES,
    LADDER,
    STUDY_MODES,
    build_forget_graph,
    forget,
    forget_user,
)
from graphs.memory import write_session
from graphs.nodes import make_summarizer
from memkit.errors import StoreError
from memkit.models.extractive import ExtractiveChatModel
from memkit.store import TieredMemoryStore
from memkit.store.cache import LLMCache
from memkit.store.keystore import KeyDestroyed, KeyStore, is_sealed

pytestmark = pytest.mark.timeout(600)

CANARY = "XQ7-VIOLET-3829"
NS = "6b168ec8"


@pytest.fixture(scope="module")
def session(sample_path):
    data = json.loads(sample_path.read_text())
    inst = next(x for x in data if x["question_id"] == NS)
    sid, date, turns = inst["haystack_session_ids"][0], inst["haystack_dates"][0], inst["haystack_sessions"][0]
    turns = [dict(t) for t in turns]
    turns[6] = {**turns[6], "content": f"{turns[6]['content']} By the way, my private session token is {CANARY}."}
    return sid, date, turns


def _write(root: Path, session, *, keys: bool = True, namespace: str = NS) -> tuple[TieredMemoryStore, LLMCache]:
    store = TieredMemoryStore(root / "store", keystore=KeyStore(root / "keys") if keys else None)
    cache = LLMCache(root / "llm_cache.sqlite")
    write_session(store, namespace, session[0], session[1], session[2], 1,
                  make_summarizer(ExtractiveChatModel(), cache=cache))
    return store, cache


def _grep(*paths: Path, needle: str = CANARY) -> int:
    """Files under ``paths`` whose bytes hold ``needle`` (GNU grep, binary as text)."""
    out = subprocess.run(["grep", "-raFl", needle, *map(str, paths)], capture_output=True, text=True)
    return len(out.stdout.split())


def _key_files(keys: Path) -> dict[str, bytes]:
    return {f.name.split(".")[1]: f.read_bytes()[8:] for f in keys.glob("*.key")}


def _open(token: str, key: bytes, aad: str) -> str:
    """A sealed value opened with the standard library's base64 and cryptography's AES-GCM."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    raw = base64.urlsafe_b64decode(token.removeprefix("mkseal1:"))
    return AESGCM(key).decrypt(raw[8:20], raw[20:], aad.encode()).decode()


def test_ladder_keeps_the_study_modes_first() -> None:
    assert STUDY_MODES == ("none", "raw_only", "raw_plus_resummarize", "full_purge", "tombstone_redaction")
    assert DELETION_MODES == (*STUDY_MODES, "crypto_shred")
    assert LADDER["crypto_shred"] == ("delete_raw", "cascade", "purge_caches", "shred_key")


def test_the_store_writes_only_ciphertext(tmp_path, session) -> None:
    store, cache = _write(tmp_path, session)
    texts = [c.text for c in store.chunks(namespace=NS)]
    assert any(CANARY in t for t in texts)  # read back in clear through the store
    store.close()
    assert _grep(tmp_path / "store") == 0
    con = sqlite3.connect(tmp_path / "store" / "chroma.sqlite3")
    docs = [r[0] for r in con.execute("SELECT string_value FROM embedding_metadata WHERE key = 'chroma:document'")]
    con.close()
    assert docs and all(is_sealed(d) for d in docs)
    # the sealed document of the canary turn opens with the key file's bytes
    (key,) = _key_files(tmp_path / "keys").values()
    store = TieredMemoryStore(tmp_path / "store", keystore=KeyStore(tmp_path / "keys"))
    raw = next(c for c in store.chunks(namespace=NS, tiers=["raw"]) if CANARY in c.text)
    sealed = store._collection.get(ids=[raw.id], include=["documents"])["documents"][0]
    assert _open(sealed, key, f"{raw.id}|text") == raw.text
    with pytest.raises(StoreError, match="does not authenticate"):
        store.keystore.open(NS, sealed, "another-id|text")
    store.close()


def test_crypto_shred_leaves_no_plaintext_and_keeps_the_rest_readable(tmp_path, session) -> None:
    store, cache = _write(tmp_path, session)
    raw = next(c for c in store.chunks(namespace=NS, tiers=["raw"]) if CANARY in c.text)
    others = {c.id: c.text for c in store.chunks(namespace=NS, tiers=["raw"]) if c.id != raw.id}
    old = _key_files(tmp_path / "keys")
    sealed = store._collection.get(ids=[raw.id], include=["documents"])["documents"][0]
    result = forget(store, CANARY, "crypto_shred", namespace=NS, S=1, cache=cache)
    assert result.steps == list(LADDER["crypto_shred"])
    assert result.keys_destroyed == 1 and result.changes()["keys_destroyed"] == 1
    assert raw.id in result.deleted["raw"] and result.deleted["summary"]
    assert result.remaining == {} and "text_raw" in result.verified
    assert "crypto_shred does not rewrite the files" in result.unverified["disk_sqlite"]
    # the other turns are readable, re-sealed under the new key
    assert {c.id: c.text for c in store.chunks(namespace=NS, tiers=["raw"])} == others
    new = _key_files(tmp_path / "keys")
    assert len(new) == 1 and not set(new) & set(old)
    with pytest.raises(KeyDestroyed):
        store.keystore.open(NS, sealed, f"{raw.id}|text")
    store.close()
    # no file holds the canary: not the store, not the cache, not the key store
    assert _grep(tmp_path) == 0
    # chroma still holds the deleted turn's sealed bytes in its log: only the old key opened them
    con = sqlite3.connect(tmp_path / "store" / "chroma.sqlite3")
    logged = [json.loads(m).get("chroma:document") for (m,) in
              con.execute("SELECT metadata FROM embeddings_queue WHERE id = ? AND metadata IS NOT NULL", (raw.id,))]
    con.close()
    assert sealed in logged and _open(sealed, next(iter(old.values())), f"{raw.id}|text") == raw.text
    from memkit.residue import scan

    report = scan(TieredMemoryStore(tmp_path / "store", keystore=KeyStore(tmp_path / "keys")), CANARY,
                  cache_paths=[tmp_path / "llm_cache.sqlite"])
    plain = {s: n for s, n in report.counts().items() if n and not s.startswith("stale_")}
    assert plain == {}
    # the deleted chunks' vectors are still in chroma's log: not plaintext, but weighed
    assert report.counts()["stale_vector"] == sum(len(ids) for ids in result.deleted.values())


def test_crypto_shred_refuses_a_store_without_keys(tmp_path, session) -> None:
    store, cache = _write(tmp_path, session, keys=False)
    before = store.count()
    with pytest.raises(StoreError, match="refused before changing anything"):
        forget(store, CANARY, "crypto_shred", namespace=NS, cache=cache)
    assert store.count() == before
    store.close()


def test_crypto_shred_of_a_user_destroys_the_key(tmp_path, session) -> None:
    store, cache = _write(tmp_path, session)
    write_session(store, "other", session[0], session[1], session[2][:4], 0, make_summarizer(ExtractiveChatModel()))
    theirs = {c.id: c.text for c in store.chunks(namespace="other")}
    result = forget_user(store, NS, "crypto_shred", cache=cache)
    assert result.keys_destroyed == 1 and store.count(namespace=NS) == 0
    assert {c.id: c.text for c in store.chunks(namespace="other")} == theirs and store.keystore.key_ids("other")
    assert store.keystore.key_ids(NS) == []
    store.close()
    assert _grep(tmp_path) == 0


def test_crypto_shred_through_the_graph(tmp_path, session) -> None:
    store, cache = _write(tmp_path, session)
    out = build_forget_graph(store, caches=[cache]).invoke(
        {"secret": CANARY, "mode": "crypto_shred", "namespace": NS, "S": 1})
    assert out["result"].steps == list(LADDER["crypto_shred"]) and out["result"].keys_destroyed == 1
    assert not store.find_containing(CANARY, normalized=True)
    store.close()


def test_destroyed_key_file_is_zeroed_before_unlink(tmp_path) -> None:
    ks = KeyStore(tmp_path / "k")
    token = ks.seal("u", "hello", "a")
    (f,) = list((tmp_path / "k").glob("*.key"))
    fd = open(f, "rb")  # noqa: SIM115 - kept open across the unlink to read what is left
    try:
        assert ks.destroy("u") == 1 and not f.exists()
        assert fd.read() == b"\0" * 40
    finally:
        fd.close()
    with pytest.raises(KeyDestroyed):
        ks.open("u", token, "a")
    mem = KeyStore()
    assert mem.open("v", mem.seal("v", "x", "b"), "b") == "x"


def test_a_target_whose_store_keeps_no_keys_reports_crypto_shred_na(tmp_path) -> None:
    from evaluators.targets.agent import AgentTarget
    from evaluators.targets.base import NotApplicable

    store = TieredMemoryStore(tmp_path / "store")
    target = AgentTarget(lambda text, user_id: "", feed=lambda turns, session_id, date, user_id: None,
                         store=store, forget_mode="crypto_shred")
    with pytest.raises(NotApplicable, match="crypto_shred needs a store that encrypts at rest"):
        target.forget_secret(CANARY, NS)
    with pytest.raises(NotApplicable, match="crypto_shred needs"):
        target.forget_user(NS)
    target.close()
    store.close()
