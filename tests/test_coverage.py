"""Issue 21, sections 1-3: "clean" only for bytes memkit actually read.

Every copy here is planted by code that is not memkit's (open, sqlite3, gzip, bz2,
lzma, zstandard, zipfile, tarfile, json, numpy, struct); every verdict is checked
against what was planted. The target store is an empty chroma directory, so each
verdict is decided by the side files (``also``).
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import random
import shutil
import sqlite3
import struct
import subprocess
import sys
import tarfile
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memkit.residue.chroma import scan
from memkit.residue.containers import Limits

SECRET = "XQ7-violet-3829"
SPELLED = "xq7 VIOLET 3829"  # another spelling the matcher counts (case, separators)


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    """An empty chroma persist directory written by chromadb itself."""
    import chromadb
    from chromadb.config import Settings

    path = tmp_path_factory.mktemp("chroma") / "db"
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    client.close()
    return path


def _scan(store_dir: Path, *also: Path, **kw):
    return scan(store_dir, SECRET, also=list(also), embedder=object(), **kw)


def _side_hits(report) -> dict[str, int]:
    return {k: v for k, v in report.counts().items() if v and k.startswith("side_")}


def _cli(store_dir: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    memkit = Path(sys.executable).with_name("memkit")
    return subprocess.run([str(memkit), "residue", str(store_dir), SECRET, *args], capture_output=True,
                          text=True, timeout=timeout,
                          env={**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"})


def _history_db(path: Path, text: str) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE history (id INTEGER PRIMARY KEY, memory TEXT)")
    con.execute("INSERT INTO history (memory) VALUES (?)", (text,))
    con.commit()
    con.close()
    return path


# --------------------------------------------------------------------------- 1. coverage


@pytest.mark.timeout(300)
def test_cli_symlink_utf16_and_gzip_exit_codes(store_dir, tmp_path):
    """The issue's examples through `memkit residue` in a subprocess: a symlink to
    history.db inside an --also directory, a UTF-16LE text file and a memories.json.gz
    backup (each exited 0 "clean") are found, exit 1; a directory holding only an
    unopenable container exits 3; a clean one exits 0 (in process)."""
    real = _history_db(tmp_path / "history.db", f"the user's code is {SECRET}")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "history.db").symlink_to(real)
    wide = tmp_path / "wide"
    wide.mkdir()
    (wide / "notes.txt").write_bytes(f"remember {SECRET} please".encode("utf-16-le"))
    backup = tmp_path / "backup"
    backup.mkdir()
    with gzip.open(backup / "memories.json.gz", "wt", encoding="utf-8") as fh:
        json.dump([{"memory": f"code {SECRET}"}], fh)
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "dump.7z").write_bytes(b"7z\xbc\xaf'\x1c" + bytes(64))
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "notes.txt").write_bytes("nothing to see".encode("utf-16"))

    res = _cli(store_dir, "--also", str(linked), "--also", str(wide), "--also", str(backup), "--json")
    assert res.returncode == 1, res.stderr[-2000:]
    body = json.loads(res.stdout)
    assert body["counts"]["side_sqlite"] == 1  # the row of history.db, reached through the link
    assert any(r["path"] == f"{linked}/history.db" and r["complete"] for r in body["coverage"])
    locations = [h["location"] for h in body["surfaces"]["side_file"] + body["surfaces"]["side_json"]]
    assert any("[utf-16-le]" in loc and "notes.txt" in loc for loc in locations)
    assert any("memories.json.gz!memories.json" in loc for loc in locations)
    res = _cli(store_dir, "--also", str(odd), "--json")
    assert res.returncode == 3, res.stdout[-2000:]
    body = json.loads(res.stdout)
    assert body["unchecked"] == {"side_file": [f"{odd}/dump.7z: 7z archive: a format memkit cannot open"]}
    assert body["coverage_summary"].endswith("1 not fully checked (see unchecked)")

    from typer.testing import CliRunner

    from evaluators.cli import app

    res = CliRunner().invoke(app, ["residue", str(store_dir), SECRET, "--also", str(clean)])
    assert res.exit_code == 0, res.output
    shown = " ".join(res.output.split())  # rich wraps lines at 80 columns
    assert "coverage: 2 files" in shown and "every byte covered" in shown


def test_coverage_records_in_json(store_dir, tmp_path):
    (tmp_path / "a.txt").write_text("plain", encoding="utf-8")
    with zipfile.ZipFile(tmp_path / "b.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("inner/c.json", json.dumps({"x": "nothing"}))
    rep = _scan(store_dir, tmp_path)
    assert rep.verdict == "clean", rep.unchecked
    by_path = {r["path"]: r for r in rep.to_dict()["coverage"]}
    a = by_path[f"{tmp_path}/a.txt"]
    assert a["size"] == a["bytes_read"] == 5 and a["complete"]
    assert a["decoders"][:5] == ["utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
    assert "zip" in by_path[f"{tmp_path}/b.zip"]["decoders"]
    member = by_path[f"{tmp_path}/b.zip!inner/c.json"]
    assert member["complete"] and member["size"] == len(json.dumps({"x": "nothing"}))
    assert "json" in member["decoders"]
    assert "chroma.sqlite3" in by_path  # the store's own files are covered too
    assert rep.to_dict()["coverage_summary"].startswith("coverage: ")


def test_symlinks_followed_once_loops_end_broken_links_listed(store_dir, tmp_path):
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "memo.txt").write_text(f"memo {SECRET}")
    (d / "alias.txt").symlink_to(d / "sub" / "memo.txt")
    (d / "sub" / "loop").symlink_to(d)  # a directory loop
    rep = _scan(store_dir, d)
    assert rep.counts()["side_file"] == 1  # one file, two paths: read once
    same = [r for r in rep.coverage if r.same_as]
    assert [r.path for r in same] == [f"{d}/sub/memo.txt"] and same[0].same_as == f"{d}/alias.txt"
    (d / "gone").symlink_to(tmp_path / "nowhere")
    (d / "sub" / "memo.txt").write_text("nothing left")
    rep = _scan(store_dir, d)
    assert rep.verdict == "incomplete"
    assert any("broken" in r and "gone" in r for r in rep.unchecked["side_file"])


@pytest.mark.timeout(60)
def test_fifo_is_listed_not_opened(store_dir, tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "ok.txt").write_text("fine")
    rep = _scan(store_dir, tmp_path)  # opening the FIFO would block forever
    assert rep.verdict == "incomplete"
    assert any("pipe" in r and "not a regular file" in r for r in rep.unchecked["side_file"])


@pytest.mark.timeout(120)
def test_unreadable_file_is_not_checked(store_dir, tmp_path):
    """A file the scan may not read is not checked. Root reads a file whatever its mode,
    so as root the scan runs in a process without the capabilities that let it
    (``setpriv`` drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH), as an unprivileged
    user's would."""
    f = tmp_path / "secret.txt"
    f.write_text("x")
    f.chmod(0)
    if os.geteuid() != 0:
        rep = _scan(store_dir, tmp_path)
        assert rep.verdict == "incomplete" and "unreadable" in " ".join(rep.unchecked["side_file"])
        return
    cat = subprocess.run(["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "cat", str(f)],
                         capture_output=True, text=True)
    assert cat.returncode != 0 and "Permission denied" in cat.stderr  # without them root cannot read it
    res = subprocess.run(["setpriv", "--bounding-set", "-dac_override,-dac_read_search", sys.executable, "-m",
                          "evaluators.cli", "residue", str(store_dir), SECRET, "--also", str(tmp_path), "--json",
                          "--no-embeddings"], capture_output=True, text=True, timeout=100,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    body = json.loads(res.stdout)
    assert body["verdict"] == "incomplete" and "unreadable" in " ".join(body["unchecked"]["side_file"])


@pytest.mark.timeout(120)
def test_file_changing_during_the_scan_is_listed(store_dir, tmp_path):
    f = tmp_path / "growing.log"
    f.write_bytes(os.urandom(8 << 20))
    stop = threading.Event()

    def writer():
        with open(f, "ab") as fh:
            while not stop.is_set():
                fh.write(b"more log line\n")
                fh.flush()
                stop.wait(0.002)

    t = threading.Thread(target=writer)
    t.start()
    try:
        rep = _scan(store_dir, f)
    finally:
        stop.set()
        t.join()
    assert rep.verdict == "incomplete"
    assert "changed during the scan" in " ".join(rep.unchecked["side_file"])


# --------------------------------------------------------------------------- 2. encodings


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16", "utf-32-le", "utf-32-be", "utf-32"])
def test_text_in_wide_encodings(store_dir, tmp_path, encoding):
    f = tmp_path / "notes.txt"
    f.write_bytes(f"line one\nthe code: {SPELLED}.\n".encode(encoding))
    rep = _scan(store_dir, f)
    assert rep.verdict == "copies remain" and rep.counts()["side_file"] == 1
    hit = rep.surfaces["side_file"][0]
    assert "[utf-" in hit.location and SPELLED not in hit.snippet and "[SECRET]" in hit.snippet
    f.write_bytes("line one\nthe code: none.\n".encode(encoding))
    assert _scan(store_dir, f).verdict == "clean"


def test_json_in_utf16(store_dir, tmp_path):
    f = tmp_path / "memories.json"
    f.write_bytes(json.dumps({"memories": [f"code {SECRET}"]}, ensure_ascii=False).encode("utf-16"))
    rep = _scan(store_dir, f)
    assert rep.counts()["side_json"] == 1


def test_sqlite_in_utf16_live_rows_and_freed_pages(store_dir, tmp_path):
    db = tmp_path / "mem.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA encoding = 'UTF-16le'")
    con.execute("PRAGMA secure_delete = OFF")
    con.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, body TEXT)")
    con.executemany("INSERT INTO m (body) VALUES (?)", [(f"code {SECRET} kept",), ("filler " * 50,)])
    con.commit()
    assert con.execute("PRAGMA encoding").fetchone()[0] == "UTF-16le"
    assert f"code {SECRET}".encode("utf-16-le") in db.read_bytes()  # as the bytes lie on disk
    rep = _scan(store_dir, db)
    assert rep.counts()["side_sqlite"] == 1  # the live row, through SQL
    assert any("[utf-16-le]" in h.location for h in rep.surfaces["side_disk"])
    con.execute("DELETE FROM m WHERE body LIKE 'code%'")
    con.commit()
    con.close()
    assert f"code {SECRET}".encode("utf-16-le") in db.read_bytes()  # a freed cell
    rep = _scan(store_dir, db)
    assert rep.counts()["side_sqlite"] == 0
    assert any("[utf-16-le]" in h.location for h in rep.surfaces["side_disk"])


def test_fixed_width_strings_in_binary_files(store_dir, tmp_path):
    """numpy's fixed-width unicode arrays are UTF-32; a C struct field may be UTF-16."""
    np.save(tmp_path / "names.npy", np.array(["alice", SECRET, "bob"], dtype="<U24"))
    np.savez(tmp_path / "bundle.npz", names=np.array([SECRET], dtype=">U20"))
    record = struct.pack("<I64sI", 7, SECRET.encode("utf-16-le"), 9)
    (tmp_path / "records.bin").write_bytes(record * 3)
    rep = _scan(store_dir, tmp_path)
    locs = [h.location for h in rep.surfaces["side_file"]]
    assert any("names.npy" in loc and "[utf-32-le]" in loc for loc in locs)
    assert any("bundle.npz!names.npy" in loc and "[utf-32-be]" in loc for loc in locs)
    assert sum("records.bin" in loc and "[utf-16-le]" in loc for loc in locs) == 3


def test_binary_noise_is_no_copy(store_dir, tmp_path):
    """Code points as 64-bit integers (``3 0 0 0 0 0 0 0 8 0 ...``: as 32-bit ones they
    would be UTF-32 text) and seeded random bytes spell nothing: NUL separates no
    letters, as in the UTF-8 byte pattern."""
    digits = np.array([ord(c) for c in "38293829xq7violet"], dtype="<i8")
    (tmp_path / "ints.bin").write_bytes(digits.tobytes())
    (tmp_path / "noise.bin").write_bytes(random.Random(0).randbytes(1 << 20))
    rep = scan(store_dir, "3829", also=[tmp_path], embedder=object())
    assert rep.verdict == "clean", [h.location for h in rep.surfaces["side_file"]][:5]


# --------------------------------------------------------------------------- containers


def _compressors():
    return {
        "gz": lambda b: gzip.compress(b),
        "bz2": lambda b: bz2.compress(b),
        "xz": lambda b: lzma.compress(b),
        "lzma": lambda b: lzma.compress(b, format=lzma.FORMAT_ALONE),
        "zst": lambda b: zstandard.ZstdCompressor().compress(b),
    }


@pytest.mark.parametrize("suffix", ["gz", "bz2", "xz", "lzma", "zst"])
def test_compressed_streams(store_dir, tmp_path, suffix):
    payload = json.dumps([{"memory": f"the code is {SECRET}"}]).encode()
    f = tmp_path / f"memories.json.{suffix}"
    f.write_bytes(_compressors()[suffix](payload))
    rep = _scan(store_dir, f)
    assert [h.location.split("@")[0] for h in rep.surfaces["side_json"]] == [f"{f}!memories.json"]
    f.write_bytes(_compressors()[suffix](b'[{"memory": "nothing"}]'))
    rep = _scan(store_dir, f)
    assert rep.verdict == "clean", rep.unchecked


def test_archives_members_labelled_by_inner_path(store_dir, tmp_path):
    with zipfile.ZipFile(tmp_path / "export.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("users/u1/notes.txt", f"note {SECRET}")
        zf.writestr("users/u2/notes.txt", "nothing")
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as tf:
        data = _history_db(tmp_path / "h.db", f"kept {SPELLED}").read_bytes()
        info = tarfile.TarInfo("backup/history.db")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    (tmp_path / "h.db").unlink()
    with zipfile.ZipFile(tmp_path / "nested.zip", "w") as zf:
        zf.writestr("snap.tar.gz", inner.getvalue())
    rep = _scan(store_dir, tmp_path)
    # the zip member; the tar's own bytes (tar stores its members uncompressed)
    assert [h.location.split("@")[0] for h in rep.surfaces["side_file"]] == [
        f"{tmp_path}/export.zip!users/u1/notes.txt", f"{tmp_path}/nested.zip!snap.tar.gz!snap.tar"]
    # an SQLite database inside a tar inside gzip inside a zip: its rows through SQL,
    # its bytes as a database's
    assert [h.location for h in rep.surfaces["side_sqlite"]] == ["history.db:history:row0:memory"]
    assert [h.location.split("@")[0] for h in rep.surfaces["side_disk"]] == [
        f"{tmp_path}/nested.zip!snap.tar.gz!snap.tar!backup/history.db"]
    assert any(r.path == f"{tmp_path}/nested.zip!snap.tar.gz!snap.tar!backup/history.db"
               for r in rep.coverage)


def test_zip_after_other_data_and_docx_like_members(store_dir, tmp_path):
    """A self-extracting archive (a zip after a script) and a .npz/.docx-style zip are
    opened by their central directory, not only by a leading signature."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("word/document.xml", f"<w:t>code {SECRET}</w:t>" + "<w:t>pad</w:t>" * 200)
    (tmp_path / "setup.bin").write_bytes(b"#!/bin/sh\nexit 0\n" + buf.getvalue())
    rep = _scan(store_dir, tmp_path / "setup.bin")
    assert [h.location.split("@")[0] for h in rep.surfaces["side_file"]] == [
        f"{tmp_path}/setup.bin!word/document.xml"]


def _encrypted_zip(path: Path) -> None:
    """A zip whose member is flagged encrypted (bit 0 of the general-purpose flags, in
    the local header and the central directory): zipfile writes no encrypted zips."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("vault.txt", "ciphertext would be here")
    data = bytearray(buf.getvalue())
    data[data.find(b"PK\x03\x04") + 6] |= 1
    data[data.find(b"PK\x01\x02") + 8] |= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("case", ["encrypted", "truncated_gzip", "truncated_zstd", "corrupt_zip",
                                  "unknown", "depth", "size"])
def test_unopenable_containers_are_not_checked(store_dir, tmp_path, case):
    f = tmp_path / "x"
    limits = Limits()
    if case == "encrypted":
        f = tmp_path / "vault.zip"
        _encrypted_zip(f)
    elif case == "truncated_gzip":
        f = tmp_path / "m.json.gz"
        f.write_bytes(gzip.compress(os.urandom(4096) + b"tail")[:-40])
    elif case == "truncated_zstd":
        f = tmp_path / "m.json.zst"
        f.write_bytes(zstandard.ZstdCompressor().compress(b"nothing here " * 4000)[:-20])
    elif case == "corrupt_zip":
        f = tmp_path / "c.zip"
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("a.txt", "nothing " * 1000)
        f.write_bytes(buf.getvalue()[:60])
    elif case == "unknown":
        f = tmp_path / "memories.json.br"
        f.write_bytes(os.urandom(200))
    elif case == "depth":
        data = b"nothing"
        for _ in range(6):
            data = gzip.compress(data)
        f = tmp_path / "deep.gz"
        f.write_bytes(data)
        limits = Limits(max_depth=4)
    else:  # a small decompression bomb against a small limit
        f = tmp_path / "bomb.gz"
        f.write_bytes(gzip.compress(bytes(8 << 20)))
        limits = Limits(max_member_bytes=1 << 20)
    rep = _scan(store_dir, f, limits=limits)
    assert rep.verdict == "incomplete", (case, rep.counts(), rep.unchecked)
    reasons = " ".join(r for rs in rep.unchecked.values() for r in rs)
    expected = {"encrypted": "encrypted", "truncated_gzip": "truncated", "truncated_zstd": "truncated",
                "corrupt_zip": "cannot be opened", "unknown": "Brotli",
                "depth": "max_depth", "size": "max_member_bytes"}[case]
    assert expected in reasons, reasons


def test_truncated_stream_still_reports_what_it_held(store_dir, tmp_path):
    f = tmp_path / "m.json.gz"
    f.write_bytes(gzip.compress(f"code {SECRET} ".encode() + os.urandom(8192))[:-100])
    rep = _scan(store_dir, f)
    assert rep.verdict == "copies remain" and rep.counts()["side_json"] == 1
    assert "truncated" in " ".join(rep.unchecked["side_json"])


# --------------------------------------------------------------------------- 3. FTS


_FTS_CREATE = {
    "fts5": "CREATE VIRTUAL TABLE idx USING fts5(body, content='memories', content_rowid='id')",
    "fts5_trigram": "CREATE VIRTUAL TABLE idx USING fts5(body, content='memories', content_rowid='id', "
                    "tokenize='trigram')",
    "fts4": "CREATE VIRTUAL TABLE idx USING fts4(content='memories', body)",
    "fts5_contentless": "CREATE VIRTUAL TABLE idx USING fts5(body, content='')",
}
"""An FTS index of table ``memories`` (external content, or none) by kind."""


def _fts_db(path: Path, create: str, content_table: bool = True) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    if content_table:
        con.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, body TEXT)")
    con.execute(create)
    return con


@pytest.mark.parametrize("kind", ["fts5", "fts5_trigram", "fts4", "fts5_contentless"])
def test_fulltext_index_outlives_its_row(store_dir, tmp_path, kind):
    """External-content FTS without a delete trigger: the row is deleted, the index
    still answers MATCH (an independent sqlite3 query shows it), residue counts it as
    side_fulltext."""
    db = tmp_path / "fts.db"
    create = _FTS_CREATE[kind]
    con = _fts_db(db, create, content_table=kind != "fts5_contentless")
    texts = [f"the user said {SPELLED} yesterday", "walks the dog daily"]
    for i, text in enumerate(texts, 1):
        if kind != "fts5_contentless":
            con.execute("INSERT INTO memories (id, body) VALUES (?, ?)", (i, text))
        con.execute("INSERT INTO idx (rowid, body) VALUES (?, ?)", (i, text))
    if kind != "fts5_contentless":
        con.execute("DELETE FROM memories WHERE id = 1")  # no delete trigger: the index keeps it
    con.commit()
    query = '"violet 3829"' if kind != "fts5_trigram" else '"violet 3829"'
    assert con.execute("SELECT rowid FROM idx WHERE idx MATCH ?", (query,)).fetchall() == [(1,)]
    con.execute("VACUUM")
    con.close()
    rep = _scan(store_dir, db)
    assert rep.counts()["side_sqlite"] == 0
    index_hits = [h for h in rep.surfaces["side_fulltext"] if "rowid=1" in h.location]
    assert index_hits, (rep.counts(), rep.unchecked)
    assert rep.verdict == "copies remain"


@pytest.mark.parametrize("kind", ["fts5", "fts5_trigram", "fts4"])
def test_fulltext_index_residue_of_one_secret_among_many(store_dir, tmp_path, kind):
    """Many secrets' MATCH queries are tried in batches joined by OR: the index residue of
    one secret in a later batch is found under its own index, and no other secret gets
    a hit (ground truth: a MATCH of that secret's phrase alone, by sqlite3)."""
    import random

    rng = random.Random(5)
    others = [f"{rng.choice('ABCDEFGH')}{rng.randrange(10, 99)}-{w}-{rng.randrange(1000, 9999)}"
              for w in ("AMBER", "CEDAR", "DELTA", "EMBER") for _ in range(150)]
    secrets = sorted(set(others) - {SECRET})[:580] + [SECRET]
    secrets = secrets[:300] + [SECRET] + secrets[300:-1]  # in the second batch of 256
    db = tmp_path / "fts.db"
    create = _FTS_CREATE[kind]
    con = _fts_db(db, create)
    for i, text in enumerate([f"the user said {SPELLED} yesterday", "walks the dog daily"], 1):
        con.execute("INSERT INTO memories (id, body) VALUES (?, ?)", (i, text))
        con.execute("INSERT INTO idx (rowid, body) VALUES (?, ?)", (i, text))
    con.execute("DELETE FROM memories WHERE id = 1")
    con.commit()
    assert con.execute("SELECT rowid FROM idx WHERE idx MATCH ?", ('"violet 3829"',)).fetchall() == [(1,)]
    con.close()
    rep = scan(store_dir, secrets=secrets, also=[db], embedder=object())
    got = {h.secret_index for h in rep.surfaces["side_fulltext"]}
    assert got == {300}, (got, rep.unchecked.get("side_fulltext"))


def test_fulltext_index_copy_written_without_separators(store_dir, tmp_path):
    """The index rebuilt from fts5vocab finds a copy whose tokens differ from the
    secret's own (so no MATCH phrase of the secret's tokens can)."""
    db = tmp_path / "fts.db"
    con = _fts_db(db, "CREATE VIRTUAL TABLE idx USING fts5(body, content='memories', content_rowid='id')")
    con.execute("INSERT INTO memories VALUES (1, 'code XQ7violet-38-29 ok')")
    con.execute("INSERT INTO idx (rowid, body) VALUES (1, 'code XQ7violet-38-29 ok')")
    con.execute("DELETE FROM memories")
    con.commit()
    con.close()
    rep = _scan(store_dir, db)
    assert [h.location for h in rep.surfaces["side_fulltext"]] == ["fts.db:idx index rowid=1"]


def test_fulltext_clean_index_is_clean(store_dir, tmp_path):
    db = tmp_path / "fts.db"
    con = _fts_db(db, "CREATE VIRTUAL TABLE idx USING fts5(body, content='memories', content_rowid='id')")
    con.execute("CREATE TRIGGER d AFTER DELETE ON memories BEGIN "
                "INSERT INTO idx(idx, rowid, body) VALUES ('delete', old.id, old.body); END")
    con.execute("INSERT INTO memories VALUES (1, ?)", (f"code {SECRET}",))
    con.execute("INSERT INTO idx (rowid, body) VALUES (1, ?)", (f"code {SECRET}",))
    con.execute("DELETE FROM memories")
    con.execute("INSERT INTO idx(idx) VALUES ('optimize')")
    con.commit()
    con.execute("VACUUM")
    con.close()
    rep = _scan(store_dir, db)
    assert rep.verdict == "clean", (rep.counts(), rep.unchecked)
    assert "fulltext" in next(r for r in rep.coverage if r.path == str(db)).decoders


# --------------------------------------------------------------------------- property


_WORDS = ["apple", "river", "stone", "cloud", "window", "garden", "yellow", "paper", "music", "forest"]
_ENCODINGS = ["utf-8", "utf-16-le", "utf-16-be", "utf-16", "utf-32-le", "utf-32-be", "utf-32"]
_CONTAINERS = ["none", "gz", "bz2", "xz", "zst", "zip", "tar", "tar.gz"]


def _wrap(name: str, data: bytes, container: str) -> tuple[str, bytes]:
    if container == "none":
        return name, data
    if container in ("gz", "bz2", "xz", "zst"):
        return f"{name}.{container}", _compressors()[container](data)
    buf = io.BytesIO()
    if container == "zip":
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(f"dir/{name}", data)
        return "archive.zip", buf.getvalue()
    with tarfile.open(fileobj=buf, mode="w:gz" if container == "tar.gz" else "w") as tf:
        info = tarfile.TarInfo(f"dir/{name}")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return f"archive.{container}", buf.getvalue()


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    secret=st.tuples(st.text("ABCDEFGHJKLMNPQRSTUVWXYZ", min_size=2, max_size=4),
                     st.text("0123456789", min_size=3, max_size=5)).map(lambda t: f"{t[0]}-{t[1]}"),
    words=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=30),
    present=st.booleans(),
    encoding=st.sampled_from(_ENCODINGS),
    container=st.sampled_from(_CONTAINERS),
    as_json=st.booleans(),
    noise=st.integers(0, 64),
)
def test_property_never_clean_over_a_copy(store_dir, tmp_path_factory, secret, words, present,
                                          encoding, container, as_json, noise):
    """A file built from random encodings and containers: memkit never says clean when
    the secret's bytes are in it (any encoding), and says clean when they are not and
    every file could be decoded."""
    d = tmp_path_factory.mktemp("prop")
    text = " ".join(words[: len(words) // 2] + ([secret] if present else []) + words[len(words) // 2:])
    body = json.dumps({"memory": text}, ensure_ascii=False) if as_json else text
    data = random.Random(noise).randbytes(noise) + body.encode(encoding)
    name, blob = _wrap("memories.json" if as_json else "notes.txt", data, container)
    (d / name).write_bytes(blob)
    rep = scan(store_dir, secret, also=[d], embedder=object())
    if present:
        assert rep.verdict == "copies remain", (encoding, container, rep.unchecked)
    else:
        assert rep.verdict == "clean", (encoding, container, rep.counts(), rep.unchecked)
    shutil.rmtree(d)


_SEPARATORS = ["", " ", "-", "\u2013", "\u200b", "\u00a0", "\u3000", "\\u2013", "&nbsp;", "<b>", "%20",
               "\u00ad", "\ufeff", "__", "\u0301"]


@st.composite
def _spelled(draw):
    runs = draw(st.lists(st.text("ABCDEFGHJKMNPQRSTUVWXYZ0123456789", min_size=2, max_size=5),
                         min_size=2, max_size=4))
    secret = "-".join(runs)
    seps = [draw(st.sampled_from(_SEPARATORS)) for _ in runs[1:]]
    copy = runs[0] + "".join(s + r for s, r in zip(seps, runs[1:], strict=True))
    style = draw(st.sampled_from(["upper", "lower", "fullwidth", "bold", "NFKD"]))
    if style == "lower":
        copy = copy.lower()
    elif style == "fullwidth":
        copy = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() and c.isascii() else c for c in copy)
    elif style == "bold":  # mathematical bold capitals and digits: outside the BMP
        copy = "".join(chr(0x1D400 + ord(c) - 65) if "A" <= c <= "Z" else
                       chr(0x1D7CE + ord(c) - 48) if c.isdigit() else c for c in copy)
    return secret, f"token: {copy}; end", draw(st.sampled_from(_ENCODINGS[1:]))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_spelled())
def test_property_wide_passes_find_what_the_text_matcher_finds(case):
    """Whatever spelling the text matcher counts as a copy is found in the same text
    encoded as UTF-16/32: the lookup table drops no character a copy can hold."""
    from memkit.scan.encodings import wide_spans
    from memkit.scan.matching import matcher

    secret, text, encoding = case
    m = matcher(secret)
    if not m.search(text):  # not a copy by the matcher's own rules: nothing to hold to
        return
    data = b"\x00\x01" + text.encode(encoding) + b"\x00"
    assert wide_spans(data, m), (secret, text, encoding)


def test_fulltext_without_positions_is_queried_by_tokens_and_marked(store_dir, tmp_path):
    """An FTS5 index with detail=none stores no positions: its documents cannot be
    rebuilt, so the table is listed as not fully checked; MATCH on every token of the
    secret still finds the deleted row."""
    db = tmp_path / "fts.db"
    con = _fts_db(db, "CREATE VIRTUAL TABLE idx USING fts5(body, content='memories', content_rowid='id', "
                      "detail='none')")
    con.execute("INSERT INTO memories VALUES (1, ?)", (f"code {SECRET}",))
    con.execute("INSERT INTO idx (rowid, body) VALUES (1, ?)", (f"code {SECRET}",))
    con.execute("DELETE FROM memories")
    con.commit()
    con.close()
    rep = _scan(store_dir, db)
    assert [h.location for h in rep.surfaces["side_fulltext"]] == ["fts.db:idx MATCH rowid=1"]
    assert "detail=none" in " ".join(rep.unchecked["side_fulltext"])


def test_many_secrets_in_one_pass_find_what_single_scans_find(tmp_path):
    """``scan(secrets=[...])`` over every reading the coverage rule adds (UTF-16 text,
    a gzip JSON backup, an FTS5 index whose content is gone) finds each secret exactly
    where a scan for that secret alone does; copies planted by the standard library."""
    from memkit.residue.chroma import scan
    from memkit.store.tiered import TieredMemoryStore

    side = tmp_path / "side"
    side.mkdir()
    (side / "notes.txt").write_bytes("user said XQ7-VIOLET-3829 yesterday".encode("utf-16-le"))
    with gzip.open(side / "mem.json.gz", "wt") as fh:
        json.dump({"m": "call me at AB9-RIVER-1111"}, fh)
    con = sqlite3.connect(side / "h.db")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(x, content='')")
    con.execute("INSERT INTO t(rowid, x) VALUES (1, 'token QQ1-STONE-2222 here')")
    con.commit()
    con.close()
    TieredMemoryStore(tmp_path / "chroma").close()
    secrets = ["XQ7-VIOLET-3829", "AB9-RIVER-1111", "QQ1-STONE-2222", "ZZ0-NONE-0000"]
    many = scan(tmp_path / "chroma", secrets=secrets, also=[side], check_embeddings=False)
    rows = many.per_secret()
    for i, secret in enumerate(secrets):
        one = scan(tmp_path / "chroma", secret, also=[side], check_embeddings=False)
        assert rows[i]["counts"] == {k: v for k, v in one.counts().items() if v}, secret
    assert [r["total"] > 0 for r in rows] == [True, True, True, False]
