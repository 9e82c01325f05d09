"""A forget's verdict is never "clean" over copies it did not rule out, and shredding one
user never destroys another's key or records.

The copies are planted by code that is not memkit's writer: chromadb's own client (in
another process) for another memory layer's collection, a second user's record, a key
store that is not the store's. Each case was a wrong verdict an adversarial reading found.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from graphs.forget import forget, forget_user
from memkit.residue.chroma import scan
from memkit.store.chunks import Chunk
from memkit.store.keystore import KeyMissing, KeyStore
from memkit.store.langgraph import MemkitStore
from memkit.store.tiered import TieredMemoryStore

S = "XQ7-VIOLET-3829"
OTHER = "ZK4-AMBER-1177"


def _raw(ns: str, texts: list[str]) -> list[Chunk]:
    return [Chunk(id=f"{ns}-{i}", text=t, tier="raw", namespace=ns, session_id="s1", turn_index=i)
            for i, t in enumerate(texts)]


def _grep(root, secret: str) -> int:
    return sum(p.read_bytes().count(secret.encode()) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("mode", ["none", "raw_only", "full_purge"])
def test_a_forget_that_read_nothing_or_left_copies_is_never_clean(tmp_path, embedder, mode):
    store = TieredMemoryStore(tmp_path / "store", embedder=embedder)
    store.add(_raw("u1", [f"My token is {S}."]))
    store.add(_raw("u2", [f"u1 told me her token is {S}."]))  # another user's record holds it
    for result in (forget(store, S, mode, namespace="u1"), forget_user(store, "u1", mode, canaries=[S])):
        report = result.verification
        assert not report.clean and report.verdict != "clean", (mode, report.to_dict())
    # and the files do hold it: compaction rebuilt them from live records, u2's among them
    store.close()
    assert _grep(tmp_path / "store", S) > 0


def test_an_empty_report_is_not_clean():
    from memkit.residue.report import ResidueReport

    report = ResidueReport.from_results("nothing", [S], {})
    assert not report.clean and report.verdict == "incomplete"


@pytest.mark.parametrize("scope", ["secret", "user"])
def test_another_layers_collection_keeps_the_verdict_from_clean(tmp_path, embedder, scope):
    path = tmp_path / "store"
    code = (
        "import chromadb, sys\n"
        "from chromadb.config import Settings\n"
        f"c = chromadb.PersistentClient(path={str(path)!r}, settings=Settings(anonymized_telemetry=False))\n"
        "col = c.create_collection('other_layer', embedding_function=None)\n"
        f"col.add(ids=['o1'], embeddings=[[0.1] * 384], documents=['u1 said: my token is {S}'],"
        " metadatas=[{'user': 'u1'}])\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    store = TieredMemoryStore(path, embedder=embedder, create=True)
    store.add(_raw("u1", [f"My token is {S}.", "I walk my dog Biscuit."]))
    result = (forget(store, S, "full_purge", namespace="u1") if scope == "secret"
              else forget_user(store, "u1", "full_purge", canaries=[S]))
    assert result.remaining.get("text_other") == 1
    report = result.verification
    assert report.verdict == "copies remain" and report["text_other"].copies("<forgotten>") == 1
    # the rebuilt files keep the other layer's record: not claimed clean
    assert not result.rewritten and "live records" in result.unverified["disk_sqlite"]
    store.close()
    assert _grep(path, S) > 0


def test_shredding_a_user_keeps_a_namespace_that_joins_to_the_same_string(tmp_path, embedder):
    """("memories", "u1") is stored joined as "memories.u1", the one-label namespace of
    someone else: their record and their key survive u1's crypto_shred."""
    ks = KeyStore(tmp_path / "keys")
    store = TieredMemoryStore(tmp_path / "store", keystore=ks, embedder=embedder)
    store.add(_raw("u1", [f"My token is {S}.", "I like cats."]))
    store.add(_raw("u10", [f"My token is {OTHER}.", "I like dogs."]))
    MemkitStore(store=store, index={"fields": ["content"]}).put(("memories", "u1"), "k1",
                                                                 {"content": f"lg memory of u1 {S}"})
    store.add(_raw("memories.u1", ["I am the user called memories.u1 and I love opera."]))
    result = forget_user(store, "u1", "crypto_shred", canaries=[S])
    texts = {(c.namespace, c.text) for c in store.chunks()}
    assert ("memories.u1", "I am the user called memories.u1 and I love opera.") in texts
    assert ("u10", f"My token is {OTHER}.") in texts
    assert not any(S in t for _, t in texts)
    assert ks.key_ids("memories.u1") and ks.key_ids("u10") and not ks.key_ids("u1")
    assert result.keys_destroyed >= 2  # u1's key, and the shared namespace's old key (rotated)


def test_a_key_store_without_the_keys_never_reads_as_shredded(tmp_path, embedder):
    store = TieredMemoryStore(tmp_path / "store", keystore=KeyStore(tmp_path / "keys"), embedder=embedder)
    store.add(_raw("u1", [f"My token is {S}."]))
    store.close()
    assert scan(tmp_path / "store", S, keystore=KeyStore(tmp_path / "keys"), embedder=embedder).total == 1
    for wrong in (KeyStore(tmp_path / "other-keys"), KeyStore()):
        report = scan(tmp_path / "store", S, keystore=wrong, embedder=embedder)
        assert not report.clean and report.verdict == "incomplete", {s: h for s, h in report.surfaces.items() if h}
        assert "neither holds nor destroyed" in " ".join(report.unchecked["text_raw"])
        # the store itself refuses to read records as gone; closed before the next scan:
        # an open store's chroma writes HNSW files whose slack holds this process's heap
        # (the secret, decrypted by the first scan), zeroed on close
        opened = TieredMemoryStore(tmp_path / "store", keystore=wrong, embedder=embedder)
        try:
            with pytest.raises(KeyMissing):
                opened.chunks()
        finally:
            opened.close()



@pytest.mark.parametrize("plant", ["files", "side_db", "table"])
def test_compaction_never_deletes_what_chroma_did_not_write(tmp_path, embedder, plant):
    """Files and tables another program put in the store's directory: compaction would
    rebuild the directory without them, so a compacting forget refuses before any change,
    and with unverified_ok the files stay and the disk is not called clean."""
    import gzip
    import sqlite3

    from memkit.store.compaction import not_chromas
    from memkit.store.tiered import StoreError

    path = tmp_path / "store"
    store = TieredMemoryStore(path, embedder=embedder)
    store.add(_raw("u1", [f"My token is {S}.", "I walk my dog Biscuit."]))
    if plant == "files":
        (path / "notes.txt").write_text(f"note: {S}\n")
        with gzip.open(path / "old.gz", "wt") as fh:
            fh.write(f"backup {S}")
        want = ["notes.txt", "old.gz"]
    elif plant == "side_db":
        con = sqlite3.connect(path / "history.db")
        con.execute("CREATE TABLE h (msg TEXT)")
        con.execute("INSERT INTO h VALUES (?)", (f"user said {S}",))
        con.commit()
        con.close()
        want = ["history.db"]
    else:
        con = sqlite3.connect(path / "chroma.sqlite3")
        con.execute("CREATE TABLE audit_log (msg TEXT)")
        con.execute("INSERT INTO audit_log VALUES (?)", (f"user said {S}",))
        con.commit()
        con.close()
        want = ["chroma.sqlite3:audit_log"]
    assert not_chromas(path) == want
    before = store.count()
    for mode in ("full_purge", "tombstone_redaction"):
        with pytest.raises(StoreError, match="refused before changing anything.*what chroma did not write"):
            forget(store, S, mode, namespace="u1")
        with pytest.raises(StoreError, match="what chroma did not write"):
            store.compact()
    assert store.count() == before
    result = forget(store, S, "full_purge", namespace="u1", unverified_ok=True)
    assert not result.rewritten and set(result.unverified) >= {"disk_sqlite", "disk_other"}
    assert not result.verification.clean
    assert not_chromas(path) == want  # nothing deleted
    store.close()
