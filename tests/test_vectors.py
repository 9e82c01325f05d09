"""Leftover vectors (memkit/residue/vectors.py) and what they reveal (memkit/residue/weigh.py).

The chroma#7662 case: 2,000 records written with chromadb itself, 100 deleted through
its API, ``chroma vacuum`` run with chromadb's own CLI, then scanned: SQL says 1,900
records, and the bytes of ``data_level0.bin`` still hold the 100 deleted vectors
(found here with ``bytes.find`` of each planted vector; an ``l2`` collection stores
them exactly as given). Vectors there are a deterministic stand-in embedding (no
semantics are needed to count them). The pgvector case plants real MiniLM vectors
through LangGraph's ``PostgresStore`` on a real PostgreSQL 16 + pgvector server.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys

import numpy as np
import psycopg
import pytest

from memkit.dataset.canaries import TOKEN_RE
from memkit.dataset.facts import ATTRIBUTES, decoys, plant_fact
from memkit.residue import scan
from memkit.residue.vectors import LeftoverVector, chroma_leftover_vectors, pg_vectors_in
from memkit.residue.weigh import PlantedItem, summarize, weigh

DIM = 16


def stand_in_embedding(text: str) -> np.ndarray:
    """A deterministic stand-in embedding (SHA-256 of the text): no semantics, distinct vectors."""
    raw = np.frombuffer(hashlib.sha256(text.encode()).digest(), dtype=np.uint8)[:DIM]
    return (raw.astype(np.float32) - 127.5) / 64.0


def _vacuum(path) -> subprocess.CompletedProcess:
    """chromadb's own CLI (the ``chroma`` entry point) on ``path``."""
    code = ("import sys; from chromadb.cli.cli import app; "
            f"sys.argv = ['chroma', 'vacuum', '--path', {str(path)!r}, '--force']; app()")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.timeout(600)
def test_chroma_7662_vacuum_leaves_the_deleted_vectors_and_memkit_says_so(tmp_path):
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "chroma"
    ids = [f"doc-{i}" for i in range(2000)]
    vecs = np.stack([stand_in_embedding(i) for i in ids])
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    col = client.create_collection("notes", embedding_function=None)  # l2: vectors stored as given
    for s in range(0, 2000, 500):
        col.add(ids=ids[s:s + 500], embeddings=vecs[s:s + 500], documents=[f"note {i}" for i in ids[s:s + 500]])
    deleted = ids[::20]
    assert len(deleted) == 100
    col.delete(ids=deleted)
    client.close()
    res = _vacuum(path)
    assert res.returncode == 0, res.stderr
    con = sqlite3.connect(path / "chroma.sqlite3")
    assert con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 1900  # SQL: the store is clean
    con.close()
    # independently: the deleted vectors' bytes, in the HNSW files
    (level0,) = list(path.glob("*/data_level0.bin"))
    data = level0.read_bytes()
    left = [i for i, v in zip(ids, vecs, strict=True) if i in set(deleted) and data.find(v.tobytes()) >= 0]
    assert len(left) == 100
    # memkit reads them, tied to their records
    read = chroma_leftover_vectors(path)
    hnsw = [v for v in read.leftovers if v.surface == "disk_hnsw"]
    assert sorted(v.record_id for v in hnsw) == sorted(deleted)
    assert all(np.array_equal(v.vector, vecs[ids.index(v.record_id)]) for v in hnsw)
    report = scan(path, "ABSENT-VALUE-0000", check_embeddings=False)
    assert report.counts()["stale_vector"] == 100
    assert report.verdict == "copies remain" and not report.clean


def test_pgvector_datums_are_found_in_both_header_forms() -> None:
    v = np.arange(1, 5, dtype=np.float32)
    long = np.uint32((8 + 16) << 2).tobytes() + np.int16(4).tobytes() + b"\0\0" + v.tobytes()
    short = bytes([((8 + 16) << 1) | 1]) + np.int16(4).tobytes() + b"\0\0" + v.tobytes()
    got = pg_vectors_in(b"xx" + long + b"yyy" + short, 4)
    assert [at for at, _ in got] == [2, 2 + len(long) + 3]
    assert all(np.array_equal(x, v) for _, x in got)
    assert pg_vectors_in(long, 5) == []


def test_decoys_are_of_the_same_kind_and_weighing_ranks_the_true_value(embedder) -> None:
    secret = "XQ7-VIOLET-3829"
    ds = decoys(secret, "token", 100, seed=1)
    assert len(set(ds)) == 100 and secret not in ds and all(TOKEN_RE.fullmatch(d) for d in ds)
    assert decoys(secret, "token", 100, seed=1) == ds  # seeded
    assert len(decoys("4821", "pin", 100, seed=0)) == 100 and set(ATTRIBUTES) >= {"pin", "name", "place", "token"}
    turn = f"I fixed my bike today. By the way, my private session token is {secret}."
    vec = embedder.encode([turn])[0]
    items = [PlantedItem("u1", secret, "token", turn), PlantedItem("u2", "4821", "pin", "My bank card PIN is 4821.")]
    other = embedder.encode(["what a lovely day for a walk"])[0]
    w = weigh([LeftoverVector("disk_log", "q:1", vec, None, "record deleted"),
               LeftoverVector("disk_log", "q:2", other, None, "record deleted")], items, embedder, seed=0)
    assert [x.owner for x in w] == ["u1", None]
    assert w[0].match > 0.99 and w[0].rank is not None and 1 <= w[0].rank <= 101
    rows = summarize(w, owner="u1")["disk_log"]
    assert rows["vectors"] == 2 and rows["attributed"] == 1 and rows["ranks"] == [w[0].rank]


def test_a_fact_is_planted_away_from_the_canary_with_its_own_stream() -> None:
    from memkit.dataset.canaries import plant
    from memkit.dataset.synthetic import synthetic

    inst = synthetic(1, 3)[0]
    p, c = plant(inst, 3)
    q, f = plant_fact(p, 3, avoid=(c.session_index, c.turn_index))
    assert (f.session_index, f.turn_index) != (c.session_index, c.turn_index)
    assert f.sentence in q.haystack_sessions[f.session_index][f.turn_index].content
    assert c.sentence in q.haystack_sessions[c.session_index][c.turn_index].content
    assert plant_fact(p, 3, avoid=(c.session_index, c.turn_index))[1] == f


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_pgvector_leftover_vectors_of_deleted_canary_turns_are_weighed(pg_server, pg_db, embedder):
    """LangGraph's PostgresStore (pgvector index, real MiniLM vectors): after the forget
    deletes each user's canary item through the API, its vector is still in the table's
    files; memkit weighs it and the audit reports the re-identification rate with a CI."""
    from evaluators.audit import audit
    from evaluators.targets.base import load_target

    with load_target("langgraph", backend="postgres", pg_uri=pg_db, pgdata=pg_server.pgdata) as target:
        res = audit(target, n=3, seed=2, forget=True, weigh_vectors=True, n_resamples=50)
        vectors = res.vectors
        assert vectors is not None and "surfaces" in vectors, vectors
        heap = vectors["surfaces"]["disk_pg_heap"]
        assert heap["attributed"] >= 3 and heap["reidentified"] is not None and len(heap["reidentified_ci"]) == 2
        assert "What the leftover vectors reveal" in res.report and "disk_pg_heap" in res.report
        # independently: no live row, yet the canary turn's vector bytes are in the heap file
        with psycopg.connect(pg_db, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            schema, rel = conn.execute(
                "SELECT n.nspname, pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE c.relname = 'store_vectors' AND c.relkind = 'r'").fetchone()
            live = [json.loads(e) for (e,) in conn.execute(f'SELECT embedding::text FROM "{schema}".store_vectors')]
        data = (pg_server.pgdata / rel).read_bytes()
        found = 0
        for c in res.canaries:
            turn = next(t["content"] for t in _turns(res, c) if c["value"] in t["content"])
            v = np.asarray(embedder.encode([turn])[0], dtype=np.float32)
            assert not any(np.allclose(v, np.asarray(x, dtype=np.float32), atol=1e-6) for x in live)
            found += data.find(v.tobytes()) >= 0
        assert found == 3


def _turns(res, canary):
    """The planted instance's turns of the canary's session (regenerated as the audit did)."""
    from memkit.dataset.canaries import plant
    from memkit.dataset.facts import plant_fact
    from memkit.dataset.synthetic import synthetic

    inst = next(i for i in synthetic(3, 2, sessions_per_instance=(2, 4), turns_per_session=(6, 8))
                if i.question_id == canary["question_id"])
    p, c = plant(inst, 2)
    p, _ = plant_fact(p, 2, avoid=(c.session_index, c.turn_index))
    return [t.to_dict() for t in p.haystack_sessions[c.session_index]]
