"""Tests of memkit.residue.chroma on real chromadb directories and the real MiniLM embedder.

The central properties: after delete + provenance cascade + compact, and
after redact + compact, no surface holds the secret; after delete alone, the copy the
scanner reports is really in the file bytes (checked here by reading the bytes).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import string
import subprocess
import sys
import tempfile
from pathlib import Path

import chromadb
import pytest
import typer
from chromadb.config import Settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evaluators.cli.residue import register as register_cli
from memkit.residue.chroma import (
    SURFACES,
    NotAChromaDirectory,
    scan,
    secret_bytes_regex,
)
from memkit.store.tiered import Chunk, TieredMemoryStore, chunk_id, compact_directory

SECRET = "XQ7-VIOLET-3829"
SEPS = rb"[ \t\r\n\f\v\-_]"


def norm_bytes(b: bytes) -> bytes:
    """Independent normalization: lowercase, then drop every separator byte."""
    return re.sub(SEPS, b"", b.lower())


def independent_counts(path: Path, secret: str) -> tuple[int, int]:
    """(exact, normalized) occurrences of ``secret`` in a file's bytes, computed without
    the scanner: ``bytes.count`` of the UTF-8 secret, and of the normalized secret in
    the normalized bytes."""
    data = path.read_bytes()
    return data.count(secret.encode()), norm_bytes(data).count(norm_bytes(secret.encode()))


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def raw(ns: str, session: str, i: int, text: str) -> Chunk:
    return Chunk(chunk_id(ns, session, "raw", i, text), text, "raw", ns, session, i, "2023/05/01")


def summary(ns: str, session: str, i: int, text: str, sources: list[str]) -> Chunk:
    return Chunk(chunk_id(ns, session, "summary", i, text), text, "summary", ns, session, -1,
                 "2023/05/01", list(sources))


def nonzero(report) -> dict[str, int]:
    return {k: v for k, v in report.counts().items() if v}


# --------------------------------------------------------------------------- matching


def test_bytes_regex_matches_exact_and_normalized_utf8():
    pat = secret_bytes_regex(SECRET)
    hay = b"..XQ7-VIOLET-3829..xq7 violet\n3829..XQ7_VIOLET_3829..XQ7VIOLET3829..XQ7-VIOLET-3828"
    found = [m.group(0) for m in pat.finditer(hay)]
    assert found == [b"XQ7-VIOLET-3829", b"xq7 violet\n3829", b"XQ7_VIOLET_3829", b"XQ7VIOLET3829"]
    assert secret_bytes_regex("café").search("Le CAFé".encode())


def test_report_shape_and_masking(embedder):
    with TieredMemoryStore(embedder=embedder) as store:
        text = f"{SECRET}{SECRET} and again xq7 violet 3829!"
        store.add([raw("u", "s", 0, text)])
        rep = scan(store, SECRET)
    assert list(rep.counts()) == list(SURFACES)
    hits = rep.surfaces["text_raw"]
    assert [h.kind for h in hits] == ["exact", "exact", "normalized"]
    assert rep.total == 3 and not rep.clean
    out = rep.to_json()
    assert SECRET not in out and "xq7 violet 3829" not in out.lower()
    assert json.loads(out)["counts"]["text_raw"] == 3
    # 24 characters of context each side; a partial occurrence at the edge is masked too.
    assert hits[0].snippet == "[SECRET][SECRET] and agai"
    assert hits[2].snippet == "[SECRET] and again [SECRET]!"
    assert "no disk surfaces" in " ".join(rep.notes) and rep.unchecked == {}


# --------------------------------------------------------------------------- properties

SUBJECTS = ["I", "My sister", "Our team", "The landlord", "My doctor"]
VERBS = ["mentioned", "booked", "cancelled", "asked about", "forgot"]
OBJECTS = ["the trip to Lisbon", "a yoga class", "the quarterly report", "a new laptop",
           "the dentist appointment", "dinner on Friday"]
COLORS = ["VIOLET", "AMBER", "TEAL", "CRIMSON", "OLIVE"]

canaries = st.builds(
    lambda a, w, d: f"{a}-{w}-{d}",
    st.text(alphabet=string.ascii_uppercase + string.digits, min_size=3, max_size=3),
    st.sampled_from(COLORS),
    st.integers(1000, 9999),
)
FORMS = {
    "exact": lambda s: s,
    "lower": str.lower,
    "spaced": lambda s: s.replace("-", " "),
    "underscored": lambda s: s.replace("-", "_").lower(),
}


@st.composite
def memories(draw):
    """A two-namespace memory: raw turns (some carry a form of the secret) and summaries
    whose text concatenates their sources, so a summary holds the secret exactly when
    one of its sources does."""
    secret = draw(canaries)
    n = draw(st.integers(2, 6))
    turns = [
        f"{draw(st.sampled_from(SUBJECTS))} {draw(st.sampled_from(VERBS))} {draw(st.sampled_from(OBJECTS))}."
        for _ in range(n)
    ]
    planted = draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=2))
    for i in planted:
        form = FORMS[draw(st.sampled_from(sorted(FORMS)))](secret)
        turns[i] = f"{turns[i]} My private session token is {form}."
    spaces = [draw(st.sampled_from(["u1", "u2"])) for _ in range(n)]
    raws = [raw(spaces[i], f"sess-{spaces[i]}", i, t) for i, t in enumerate(turns)]
    sums = []
    for ns in sorted(set(spaces)):
        mine = [r for r in raws if r.namespace == ns]
        for j in range(draw(st.integers(0, 2))):
            src = draw(st.lists(st.sampled_from(mine), min_size=1, max_size=len(mine), unique_by=lambda c: c.id))
            sums.append(summary(ns, f"sess-{ns}", j, "Summary: " + " / ".join(c.text for c in src),
                                [c.id for c in src]))
    return secret, raws, sums


def _build(path: Path, embedder, raws, sums) -> TieredMemoryStore:
    store = TieredMemoryStore(path, embedder=embedder)
    store.add(raws)
    if sums:
        store.add(sums)
    return store


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=memories(), order=st.randoms(use_true_random=False), extra=st.integers(0, 2))
def test_delete_cascade_compact_leaves_no_copy(embedder, data, order, extra):
    secret, raws, sums = data
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store"
        store = _build(path, embedder, raws, sums)
        # Deletion sequence: the chunks holding the secret (exact or normalized form),
        # their provenance cascade, and a few innocent chunks, in random batches.
        hits = store.find_containing(secret, normalized=True)
        doomed = [c.id for c in hits] + [c.id for c in store.derived_from([c.id for c in hits])]
        innocent = [c.id for c in store.chunks() if c.id not in doomed]
        doomed += order.sample(innocent, min(extra, len(innocent)))
        order.shuffle(doomed)
        while doomed:
            cut = order.randint(1, len(doomed))
            batch, doomed = doomed[:cut], doomed[cut:]
            assert set(store.delete(batch)) == set(batch)

        # Delete alone: the API no longer shows the secret, the bytes still hold it,
        # and the scanner reports exactly the copies that are in the file.
        after_delete = scan(store, secret)
        for s in ("text_raw", "text_summary", "text_other", "metadata", "stale_embedding"):
            assert after_delete.counts()[s] == 0, s
        exact, normalized = independent_counts(path / "chroma.sqlite3", secret)
        assert normalized > 0  # the deleted text really is on disk
        disk = after_delete.surfaces["disk_sqlite"]
        assert sum(h.kind == "exact" for h in disk) == exact
        assert len(disk) == normalized
        assert after_delete.counts()["disk_log"] > 0  # chroma's WAL table keeps the ADD record

        report = store.compact()
        assert report.bytes_after > 0
        assert not store.find_containing(secret, normalized=True)
        # At rest: close (which also zeroes HNSW slack), then scan the directory.
        store.close()
        clean = scan(path, secret)
        assert clean.clean, nonzero(clean)
        for f in path.rglob("*"):
            if f.is_file():
                assert independent_counts(f, secret) == (0, 0), f


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=memories())
def test_redact_compact_leaves_no_copy(embedder, data):
    secret, raws, sums = data
    with tempfile.TemporaryDirectory() as tmp:
        source = _build(Path(tmp) / "source", embedder, raws, sums)
        # Same pre-deletion state in a second store, vectors copied (no re-embedding).
        path = Path(tmp) / "redacted"
        store = TieredMemoryStore(path, embedder=embedder)
        for ns in ("u1", "u2"):
            source.copy_namespace(ns, ns, target=store)
        n = store.count()
        holding = [c.id for c in store.find_containing(secret, normalized=True)]
        changed = store.redact(secret)
        assert sorted(changed) == sorted(holding)
        store.tombstone(secret, changed, namespace="*", reason="forget:tombstone_redaction")
        assert all("[REDACTED]" in c.text for c in store.get(changed))
        before_compact = scan(store, secret)
        assert sum(before_compact.counts()[s] for s in ("text_raw", "text_summary", "metadata",
                                                        "stale_embedding")) == 0
        assert before_compact.counts()["disk_log"] > 0  # the original ADD records
        store.compact()
        assert store.count() == n
        store.close()  # at rest: closing also zeroes HNSW slack
        source.close()
        rep = scan(path, secret)
        assert rep.clean, nonzero(rep)
        for f in path.rglob("*"):
            if f.is_file():
                assert independent_counts(f, secret) == (0, 0), f


# --------------------------------------------------------------------------- surfaces


def test_stale_embedding_flags_text_changed_without_reembedding(embedder, tmp_path):
    store = TieredMemoryStore(tmp_path / "db", embedder=embedder)
    a = raw("u", "s", 0, f"my private session token is {SECRET}")
    b = raw("u", "s", 1, "I enjoy long walks on the beach")
    store.add([a, b])
    new_text = "my private session token is [REDACTED]"
    # New text, old vector: what a redaction that forgets to re-embed leaves.
    store.collection.update(ids=[a.id], documents=[new_text], embeddings=store.embeddings_of([a.id]))
    rep = scan(store, SECRET)
    stale = rep.surfaces["stale_embedding"]
    assert [h.location for h in stale] == [f"{store.collection_name}:{a.id}"]
    cos = float(embedder.encode([f"my private session token is {SECRET}"])[0] @ embedder.encode([new_text])[0])
    assert cos < 0.99
    assert stale[0].snippet.startswith(f"cos(stored, embed(text))={cos:.3f}")
    assert rep.counts()["text_raw"] == 0
    assert scan(store, SECRET, check_embeddings=False).counts()["stale_embedding"] == 0
    store.redact("[REDACTED]", replacement="[GONE]")  # re-embeds the chunk
    assert scan(store, SECRET).counts()["stale_embedding"] == 0
    store.close()


def test_cache_surfaces_scan_every_table_and_the_bytes(tmp_path, embedder):
    cache = tmp_path / "llm_cache.sqlite"
    con = sqlite3.connect(cache)
    con.execute("CREATE TABLE generations (prompt TEXT, llm TEXT, response TEXT, raw BLOB)")
    con.execute("CREATE TABLE other (k INTEGER PRIMARY KEY, v TEXT) ")
    con.execute("INSERT INTO generations VALUES (?, 'm', 'ok', ?)",
                (f"context: token {SECRET}", b"resp xq7_violet_3829"))
    con.execute("INSERT INTO generations VALUES ('q', 'm', 'nothing', X'00')")
    con.execute("INSERT INTO other VALUES (1, 'clean')")
    con.commit()
    con.close()
    with TieredMemoryStore(embedder=embedder) as store:
        rep = scan(store, SECRET, cache_paths=[cache])
        hits = rep.surfaces["cache"]
        assert sorted((h.location, h.kind) for h in hits) == [
            ("llm_cache.sqlite:generations:row0:prompt", "exact"),
            ("llm_cache.sqlite:generations:row0:raw@5", "normalized")  # byte offset in the blob,
        ]
        exact, normalized = independent_counts(cache, SECRET)
        assert rep.counts()["cache_disk"] == normalized >= 2
        con = sqlite3.connect(cache)
        # Python's SQLite is built with SECURE_DELETE on; a stock build (as in chroma's
        # Rust binary) leaves deleted rows in the file, which is what we reproduce here.
        con.execute("PRAGMA secure_delete = OFF")
        con.execute("DELETE FROM generations WHERE prompt LIKE '%VIOLET%'")
        con.commit()
        assert scan(store, SECRET, cache_paths=[cache]).counts()["cache"] == 0
        assert independent_counts(cache, SECRET)[1] > 0  # deleted row still in the file
        con.execute("VACUUM")
        con.close()
        rep = scan(store, SECRET, cache_paths=[cache])
        assert rep.counts()["cache_disk"] == 0 == independent_counts(cache, SECRET)[1]
        with pytest.raises(ValueError, match="not an SQLite"):
            (tmp_path / "x.txt").write_text("hello")
            scan(store, SECRET, cache_paths=[tmp_path / "x.txt"])
        with pytest.raises(FileNotFoundError):
            scan(store, SECRET, cache_paths=[tmp_path / "missing.sqlite"])


def test_fulltext_index_residue_without_content(tmp_path, embedder):
    """An FTS5 index entry whose content row is gone is still found by MATCH."""
    path = tmp_path / "db"
    store = TieredMemoryStore(path, embedder=embedder)
    store.add([raw("u", "s", 0, f"token {SECRET} here"), raw("u", "s", 1, "plain text")])
    live = scan(store, SECRET, check_embeddings=False)
    assert [h.location for h in live.surfaces["disk_fulltext"]] == [
        "embedding_fulltext_search_content:row0:c0"]
    store.close()
    con = sqlite3.connect(path / "chroma.sqlite3")
    con.execute("DELETE FROM embedding_fulltext_search_content WHERE c0 LIKE '%VIOLET%'")
    con.commit()
    con.close()
    rep = scan(path, SECRET, check_embeddings=False)
    assert [h.location for h in rep.surfaces["disk_fulltext"]] == ["embedding_fulltext_search MATCH rowid=1"]


def test_scan_is_read_only(tmp_path, embedder):
    path = tmp_path / "db"
    store = TieredMemoryStore(path, embedder=embedder)
    store.add([raw("u", "s", 0, f"token {SECRET}")])
    store.delete([c.id for c in store.chunks()])
    store.close()
    before = tree_digest(path)
    rep = scan(path, SECRET)
    assert not rep.clean
    assert tree_digest(path) == before  # no byte changed, no -wal/-journal created
    store = TieredMemoryStore(path, embedder=embedder)
    before = tree_digest(path)
    scan(store, SECRET)
    assert tree_digest(path) == before
    store.close()


# --------------------------------------------------------------------------- foreign dirs and CLI


def write_foreign_dir(path: Path, docs: list[str], metas: list[dict], embedder) -> None:
    """A Chroma directory written with chromadb directly (not memkit)."""
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    col = client.create_collection("notes", embedding_function=None)
    col.add(ids=[f"n{i}" for i in range(len(docs))], documents=docs, metadatas=metas,
            embeddings=embedder.encode(docs))
    client.close()


@pytest.fixture
def cli():
    app = typer.Typer()
    register_cli(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps `residue` a named subcommand
        """Nothing."""

    return app


def test_cli_on_a_directory_chromadb_wrote(tmp_path, embedder, cli):
    dirty = tmp_path / "dirty"
    write_foreign_dir(
        dirty,
        ["call me at noon", f"the vault code is {SECRET}", "groceries: milk, eggs"],
        [{"src": "chat"}, {"src": "chat"}, {"src": f"email from {SECRET.lower()}"}],
        embedder,
    )
    runner = CliRunner()
    res = runner.invoke(cli, ["residue", str(dirty), SECRET, "--json"])
    assert res.exit_code == 1, res.output
    body = json.loads(res.stdout)
    assert body["clean"] is False
    assert body["counts"]["text_other"] == 1 and body["counts"]["metadata"] == 1
    assert body["counts"]["text_raw"] == 0 == body["counts"]["text_summary"]
    assert body["counts"]["disk_sqlite"] >= 2 and body["counts"]["disk_log"] == 2
    assert SECRET not in res.stdout and SECRET.lower() not in res.stdout

    table = runner.invoke(cli, ["residue", str(dirty), SECRET, "--no-embeddings"])
    assert table.exit_code == 1
    assert "text_other" in table.stdout and "[SECRET]" in table.stdout and SECRET not in table.stdout

    # Deleting with chromadb alone leaves disk residue; memkit's compact removes it.
    client = chromadb.PersistentClient(path=str(dirty), settings=Settings(anonymized_telemetry=False))
    client.get_collection("notes").delete(ids=["n1", "n2"])
    client.close()
    res = runner.invoke(cli, ["residue", str(dirty), SECRET, "--json"])
    counts = json.loads(res.stdout)["counts"]
    assert res.exit_code == 1 and counts["text_other"] == 0 and counts["disk_sqlite"] > 0
    assert independent_counts(dirty / "chroma.sqlite3", SECRET)[1] == counts["disk_sqlite"]
    compact_directory(dirty)
    res = runner.invoke(cli, ["residue", str(dirty), SECRET, "--json"])
    assert res.exit_code == 0, res.stdout
    assert json.loads(res.stdout)["total"] == 0

    # Written by a fresh process: chromadb copies heap bytes into HNSW file slack, and
    # this process holds the secret (a raw chromadb write here can carry a real copy).
    clean = tmp_path / "clean"
    code = (
        "import chromadb, numpy as np; from chromadb.config import Settings;"
        f"c = chromadb.PersistentClient(path={str(clean)!r}, settings=Settings(anonymized_telemetry=False));"
        "col = c.create_collection('notes', embedding_function=None);"
        "col.add(ids=['n0', 'n1'], documents=['nothing to see', 'still nothing'],"
        " metadatas=[{'a': 1}, {'a': 2}], embeddings=np.asarray(" + repr(embedder.encode(
            ["nothing to see", "still nothing"]).tolist()) + ", dtype=np.float32)); c.close()"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120,
                   env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    res = runner.invoke(cli, ["residue", str(clean), SECRET])
    assert res.exit_code == 0, res.output
    assert "clean" in res.stdout
    # no cache, side file or checkpointer was given: those rows say so, not "0"
    assert "not given, so not scanned: LLM caches (--cache FILE); side files (--also FILE)" in res.stdout
    body = json.loads(runner.invoke(cli, ["residue", str(clean), SECRET, "--json"]).stdout)
    assert set(body["not_given"]) == {"cache", "cache_disk", "checkpoint", "side_sqlite", "side_disk",
                                      "side_fulltext", "side_json", "side_pickle", "side_file"}

    res = runner.invoke(cli, ["residue", str(tmp_path / "nowhere"), SECRET])
    assert res.exit_code == 2 and "does not exist" in res.output
    res = runner.invoke(cli, ["residue", str(tmp_path), SECRET])  # one level above clean/
    assert res.exit_code == 2
    assert "not a Chroma persist directory" in res.output and "did you mean" in res.output
    with pytest.raises(NotAChromaDirectory):
        scan(tmp_path, SECRET)


def test_memkit_command_in_a_subprocess(tmp_path, embedder):
    """The installed `memkit residue` entry point, secret read from stdin."""
    dirty = tmp_path / "dirty"
    write_foreign_dir(dirty, [f"code {SECRET}"], [{"k": 1}], embedder)
    exe = Path(sys.executable).with_name("memkit")
    cmd = [str(exe), "residue", str(dirty), "-", "--json", "--no-embeddings"]
    res = subprocess.run(cmd, input=SECRET + "\n", capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stderr
    assert json.loads(res.stdout)["counts"]["text_other"] == 1
    res = subprocess.run([str(exe), "residue", str(dirty), "ABSENT-VALUE-0000", "--json", "--no-embeddings"],
                         capture_output=True, text=True, timeout=120)
    # Nothing found, but the stale-embedding surface was skipped: "incomplete", not "clean".
    assert res.returncode == 3, res.stderr
    body = json.loads(res.stdout)
    assert all(v == 0 for v in body["counts"].values())
    assert body["verdict"] == "incomplete" and body["clean"] is False
    assert list(body["unchecked"]) == ["stale_embedding"]
    res = subprocess.run([str(exe), "residue", str(dirty), "ABSENT-VALUE-0000", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verdict"] == "clean"


def test_secret_in_another_unicode_normal_form_is_found(tmp_path):
    """A secret stored composed (NFC: 'ë') is found when asked for decomposed (NFD:
    'e' + U+0308), and the other way round: a scanner must never say clean for the
    same text in another normal form."""
    import unicodedata

    import chromadb

    nfc = unicodedata.normalize("NFC", "Zoë-Ørsted 秘密 4471")
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfc != nfd
    client = chromadb.PersistentClient(path=str(tmp_path / "db"))
    col = client.get_or_create_collection("names", embedding_function=None)
    col.add(ids=["1"], documents=[f"my name is {nfc}"], embeddings=[[0.1] * 384])
    client.close()
    for asked in (nfc, nfd):
        rep = scan(tmp_path / "db", asked, check_embeddings=False)
        assert rep.counts()["text_other"] == 1, asked
        assert rep.counts()["disk_sqlite"] >= 1, asked


def test_list_metadata_of_a_deleted_collection_is_residue(tmp_path, embedder):
    """chromadb 1.5.9 keeps a deleted collection's list-valued metadata as live rows,
    and the next records written inherit them (chroma-core/chroma#7594). A secret
    planted there by chromadb alone (memkit never wrote this directory), with a
    lower-case spelling, is residue: the scan is not clean, the SQLite bytes hold it
    (counted independently), and once another record inherits it, it is on the
    ``metadata`` surface too."""
    path = tmp_path / "ghost"
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    col = client.create_collection("notes", embedding_function=None)
    col.add(ids=["n1"], documents=["a note"], embeddings=embedder.encode(["a note"]).tolist(),
            metadatas=[{"tags": ["work", f"pin {SECRET.lower()}"]}])
    client.delete_collection("notes")
    client.close()
    report = scan(path, SECRET, check_embeddings=False)
    assert not report.clean
    assert report.counts()["metadata"] == 0  # no live record holds it yet
    assert report.counts()["disk_sqlite"] >= 1
    assert independent_counts(path / "chroma.sqlite3", SECRET)[1] >= 1

    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    other = client.create_collection("other", embedding_function=None)
    other.add(ids=["m1"], documents=["unrelated"], embeddings=embedder.encode(["unrelated"]).tolist(),
              metadatas=[{"k": 1}])
    inherited = other.get(ids=["m1"], include=["metadatas"])["metadatas"][0].get("tags")
    client.close()
    report = scan(path, SECRET, check_embeddings=False)
    assert not report.clean
    if inherited:  # chromadb #7594 still open in this version
        assert report.counts()["metadata"] == 1
