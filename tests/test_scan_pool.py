"""Files read in worker processes (memkit/residue/pool.py) write the report one process
writes: the same hits, notes, coverage and unchecked reasons in the same order, for a
directory of every kind of entry (links, hard links, a FIFO, SQLite with its journal,
containers under a decompression budget) and a large file read in pieces whose
boundaries cut copies, including copies of one secret that overlap across a boundary.
Counts are checked against ``bytes.count`` of the planted text."""

from __future__ import annotations

import gzip
import os
import random
import signal
import sqlite3
from pathlib import Path

import pytest

from memkit.residue import pieces as pieces_mod
from memkit.residue import pool as scan_pool
from memkit.residue.chroma import ResidueReport
from memkit.residue.containers import Limits
from memkit.residue.files import SIDE, Scanner
from memkit.scan.matching import matcher
from memkit.scan.multi import MultiMatcher

SECRETS = ["XQ7-VIOLET-3829", "1212-1212"]
PIECE = 1 << 16


def tree(root: Path) -> Path:
    rng = random.Random(5)
    d = root / "d"
    d.mkdir()
    (d / "a.txt").write_text("call XQ7-VIOLET-3829 now, or x q 7 violet 3829 later\n")
    (d / "b.json").write_text('{"m": "pw XQ7-VI\\u004fLET-3829", "n": ["1212 1212"]}')
    os.link(d / "a.txt", d / "c-hardlink.txt")
    (d / "e-link.txt").symlink_to(d / "a.txt")
    os.mkfifo(d / "f.fifo")
    con = sqlite3.connect(d / "g.db")
    con.execute("CREATE TABLE t (x TEXT)")
    con.executemany("INSERT INTO t VALUES (?)", [("row XQ7-VIOLET-3829",), ("nothing",), ("1212-1212",)])
    con.commit()
    con.close()
    (d / "g.db-wal").write_bytes(b"\x00" * 40 + "XQ7-VIOLET-3829".encode("utf-16-le"))
    for k in range(3):  # 3 members of 60 KiB: the third passes a 150 KiB budget
        (d / f"h{k}.gz").write_bytes(gzip.compress(rng.randbytes(60_000) + b"XQ7-VIOLET-3829\n"))
    # a large file: copies at the piece boundaries, overlapping copies of one secret across them
    big = bytearray(rng.randbytes(40 * PIECE))
    for k in range(1, 40):
        at = k * PIECE
        cut = ["XQ7-VIOLET-3829", "121212121212", "1212-1212-1212-1212", "x q 7 violet 3829",
               "XQ7-VIOLET-3829XQ7-VIOLET-3829"][k % 5].encode(["utf-8", "utf-16-le", "utf-32-be"][k % 3])
        off = at - (k % len(cut)) - 1
        big[off:off + len(cut)] = cut
    (d / "z-big.bin").write_bytes(bytes(big))
    return d


def read(d: Path, m, limits: Limits, pooled: bool, monkeypatch) -> ResidueReport:
    scan_pool.release()
    monkeypatch.setattr(scan_pool, "PIECE_BYTES", PIECE)
    monkeypatch.setattr(scan_pool, "_INLINE_BYTES", 0 if pooled else 1 << 60)
    monkeypatch.setattr(scan_pool, "workers", lambda: 2 if pooled else 1)
    report = ResidueReport(target="t")
    try:
        Scanner(report, m, limits).path(d, SIDE)
    finally:
        scan_pool.release()
    return report


@pytest.mark.parametrize("many", [False, True])
def test_worker_processes_write_the_report_one_process_writes(tmp_path, monkeypatch, many):
    d = tree(tmp_path)
    m = MultiMatcher(SECRETS) if many else matcher(SECRETS[0])
    limits = Limits(max_total_bytes=150_000)
    one = read(d, m, limits, False, monkeypatch)
    pooled = read(d, m, limits, True, monkeypatch)
    assert pooled.to_dict() == one.to_dict()
    body = one.to_dict()
    assert body["unchecked"]["side_file"] == [f"{d}/f.fifo: not a regular file (FIFO, socket or device): not opened"] + [
        r for r in body["unchecked"]["side_file"] if "limit reached" in r]
    assert any("max_total_bytes" in r for r in body["unchecked"]["side_file"])
    assert {r["path"]: r.get("same_as") for r in body["coverage"]}[f"{d}/c-hardlink.txt"] == f"{d}/a.txt"
    assert f"{d}/g.db-wal" in {r["path"] for r in body["coverage"]}
    # the large file's copies, against bytes.count of what was planted
    data = (d / "z-big.bin").read_bytes()
    hits = [h for hits in one.surfaces.values() for h in hits if "z-big.bin@" in h.location]
    verbatim = data.count(b"XQ7-VIOLET-3829")
    assert sum(1 for h in hits if h.secret_index in (0, None) and "[" not in h.location) >= verbatim
    assert sum(1 for h in hits if "[utf-16-le]" in h.location) >= 1
    assert sum(1 for h in hits if "[utf-32-be]" in h.location) >= 1


def test_pieces_join_to_the_chains_of_the_whole_file():
    """Pieces cut everywhere in text full of overlapping copies: the joined copies are
    those one pass over the whole buffer finds (the engine's chains)."""
    from memkit.scan.engine import ScanEngine

    rng = random.Random(9)
    engine = ScanEngine(SECRETS)
    text = "".join(rng.choice(["1212", "-", "1212-1212", " ", "XQ7-VIOLET-3829", "xq7", "violet3829", "12"])
                   for _ in range(3000)).encode()
    whole = sorted((s, e, k, i) for i, spans in engine.scan_bytes(text).items() for s, e, k in spans)
    m = MultiMatcher(SECRETS)
    for step in (7, 13, 64, 1000):
        pieces = []
        for lo in range(0, len(text), step):
            st = m.engine.scan_part(text, lo, min(len(text), lo + step))
            pieces.append(pieces_mod.Piece(lo, min(len(text), lo + step), {
                i: (st.found.get(i, {}), st.exact.get(i, []), i in st.exact_seen)
                for i in set(st.found) | set(st.exact)}, []))
        assert pieces_mod.join(m.engine, text, pieces) == whole, step


@pytest.mark.parametrize("many", [False, True])
def test_a_buffer_read_in_blocks_has_the_copies_of_one_pass(tmp_path, monkeypatch, many):
    """raw_copies reads a large buffer in cache-sized blocks (engine and wide readings
    block by block): the same UTF-8 and wide copies as one pass of each."""
    big = (tree(tmp_path) / "z-big.bin").read_bytes()
    m = MultiMatcher(SECRETS) if many else matcher(SECRETS[0])
    one = pieces_mod.raw_copies(m, big)
    monkeypatch.setattr(pieces_mod, "BLOCK_BYTES", 3 * 4096 + 7)
    assert pieces_mod.raw_copies(m, big) == one
    assert one[0] and one[1]


def _workers_and_inline(monkeypatch, pooled: bool) -> None:
    scan_pool.release()
    monkeypatch.setattr(scan_pool, "PIECE_BYTES", PIECE)
    monkeypatch.setattr(scan_pool, "_INLINE_BYTES", 0 if pooled else 1 << 60)
    monkeypatch.setattr(scan_pool, "workers", lambda: 2 if pooled else 1)


def test_files_are_read_while_the_caller_goes_on(tmp_path, monkeypatch):
    """A started reading adds nothing until it is finished, then exactly what a read in
    one call adds; its workers run below the caller's priority."""
    d = tree(tmp_path)
    m = MultiMatcher(SECRETS)
    whole = read(d, m, Limits(), True, monkeypatch)
    _workers_and_inline(monkeypatch, True)
    report = ResidueReport(target="t")
    try:
        reading = Scanner(report, m, Limits()).start(d, SIDE)
        assert report.total == 0 and not report.coverage and not report.notes
        niceness = scan_pool._POOL["pool"].apply(os.nice, (0,))
        assert niceness == min(19, os.nice(0) + scan_pool.WORKER_NICE)
        reading.finish()
        assert report.to_dict() == whole.to_dict()
        reading.finish()  # once only
        assert report.to_dict() == whole.to_dict()
    finally:
        scan_pool.release()


def _store(root: Path) -> Path:
    """A chroma directory (a record holding the first secret) with side files in it and
    the build directory an interrupted compaction leaves beside it."""
    import chromadb
    from chromadb.config import Settings

    path = root / "db"
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    client.get_or_create_collection("memories").add(ids=["r1"], documents=[f"note {SECRETS[0]}"],
                                                    embeddings=[[0.1, 0.2, 0.3]])
    client.close()
    tree(path)
    leftover = root / ".db.compact-0123abcd"
    leftover.mkdir()
    (leftover / "kept.txt").write_text(f"old {SECRETS[1]}\n")
    return path


@pytest.mark.parametrize("many", [False, True])
def test_a_store_scan_reads_its_files_beside_chromadb_and_writes_one_process_report(tmp_path, monkeypatch, many):
    """The store's files, its leftovers and the side files are read by the workers while
    chromadb reads the store here: the report is the one a scan in one process writes
    (every surface, note and coverage record in the same order)."""
    from memkit.residue.chroma import scan

    store = _store(tmp_path)
    side = tmp_path / "side.txt"
    side.write_text(f"pw {SECRETS[0]}\n")
    kw = {"secrets": SECRETS} if many else {"secret": SECRETS[0]}

    def run(pooled: bool) -> dict:
        _workers_and_inline(monkeypatch, pooled)
        try:
            return scan(store, also=[side], check_embeddings=False, **kw).to_dict()
        finally:
            scan_pool.release()

    one, pooled = run(False), run(True)
    assert pooled == one
    assert one["counts"]["text_other"] >= 1  # chromadb's part, added after the store's files
    assert one["counts"]["side_file"] >= 1 and one["counts"]["disk_other"] >= 1
    assert any("compact-0123abcd" in note for note in one["notes"])
    assert not scan_pool._POOL


def test_a_bad_store_stops_the_workers(tmp_path, monkeypatch):
    from memkit.residue.chroma import NotAChromaDirectory, scan

    side = tmp_path / "side.txt"
    side.write_text("x" * 100)
    _workers_and_inline(monkeypatch, True)
    with pytest.raises(NotAChromaDirectory):
        scan(tmp_path / "nothing-here", SECRETS[0], also=[side])
    assert not scan_pool._POOL


_MEMBER_LOG: list[Path] = []
"""Where :func:`_logged_member` notes each member a worker read (set before forking)."""


def _logged_member(mem, *args):
    with open(_MEMBER_LOG[0], "a") as fh:
        fh.write(f"{os.getpid()} {mem.label}\n")
    return _READ_MEMBER(mem, *args)


_READ_MEMBER = scan_pool._read_member


def _archives(root: Path) -> tuple[Path, dict[str, int]]:
    """Archives of members written with the standard library (a text with copies in
    UTF-8 and UTF-16, an SQLite database, a JSON document whose copy is escaped, a gzip
    stream inside, small members): ``(directory, {member label: verbatim copies})``."""
    import io
    import tarfile
    import zipfile

    rng = random.Random(11)
    d = root / "archives"
    d.mkdir()
    db = root / "m.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.executemany("INSERT INTO notes VALUES (?)", [(f"row {k} " + "word " * 50,) for k in range(300)]
                    + [(f"pw {SECRETS[0]}",), ("1212 1212",)])
    con.commit()
    con.close()
    text = (rng.randbytes(5000).hex() + f" {SECRETS[0]} ").encode() * 3 + f" {SECRETS[0]} ".encode("utf-16-le")
    members = {
        "t.txt": text,
        "m.db": db.read_bytes(),
        "doc.json": ('{"a": "' + "x " * 4000 + '\\ud835\\udc17Q7-VIOLET-3829"}').encode(),  # bold X, escaped
        "inner.gz": gzip.compress(text),
        "small.txt": f"{SECRETS[0]}\n".encode(),
        "empty": b"",
    }
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    (d / "a.tar").write_bytes(tar.getvalue())
    (d / "b.tar.gz").write_bytes(gzip.compress(tar.getvalue()))
    with zipfile.ZipFile(d / "c.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    planted = {}
    for arch in ("a.tar", "b.tar.gz!b.tar", "c.zip"):
        planted[f"{d}/{arch}!t.txt"] = text.count(SECRETS[0].encode())
        planted[f"{d}/{arch}!small.txt"] = 1
    return d, planted


@pytest.mark.parametrize(("many", "budget"), [(False, None), (True, None), (True, 150_000)])
def test_members_of_a_container_are_read_by_every_worker(tmp_path, monkeypatch, many, budget):
    """A container's large members are written out and read by any worker, not by the
    one that opens it; the report is the one a single process writes (the members'
    hits and coverage in the container's order, SQL rows and JSON of the members,
    a container inside one where it is), every planted copy is found,
    and no temporary file is left; under a decompression budget the members past it
    are left out as in one process."""
    d, planted = _archives(tmp_path)
    m = MultiMatcher(SECRETS) if many else matcher(SECRETS[0])
    limits = Limits() if budget is None else Limits(max_total_bytes=budget)
    one = read(d, m, limits, False, monkeypatch)
    _MEMBER_LOG[:] = [tmp_path / "members.log"]
    monkeypatch.setattr(scan_pool, "MEMBER_BYTES", 4096)
    monkeypatch.setattr(scan_pool, "_read_member", _logged_member)
    monkeypatch.setattr(scan_pool.tempfile, "tempdir", str(tmp_path))
    pooled = read(d, m, limits, True, monkeypatch)
    assert pooled.to_dict() == one.to_dict()
    read_apart = (tmp_path / "members.log").read_text().split("\n")
    assert not list(tmp_path.glob("memkit-members-*"))
    if budget is not None:
        assert any("max_total_bytes" in r for rs in one.unchecked.values() for r in rs)
        return
    assert {ln.split(" ", 1)[1] for ln in read_apart if ln} == {
        f"{d}/{arch}!{name}" for arch in ("a.tar", "b.tar.gz!b.tar", "c.zip")
        for name in ("t.txt", "m.db", "doc.json", "inner.gz!inner")}
    assert not list(tmp_path.glob("memkit-members-*"))
    hits = [h for hits in one.surfaces.values() for h in hits]
    for label, copies in planted.items():
        mine = [h for h in hits if h.location.startswith(label + "@") and "[" not in h.location]
        assert len(mine) >= copies, label
    for arch in ("a.tar", "b.tar.gz!b.tar", "c.zip"):
        assert any(h.location.startswith(f"{arch}!m.db:notes:") for h in hits), arch
        assert any(h.location.startswith(f"{d}/{arch}!doc.json") for h in hits), arch
        assert any(h.location.startswith(f"{d}/{arch}!t.txt@") and "[utf-16-" in h.location for h in hits), arch
        assert any(h.location.startswith(f"{d}/{arch}!inner.gz!inner") for h in hits), arch


def test_members_are_read_where_they_cannot_be_written_out(tmp_path, monkeypatch):
    """With no room for temporary files, the worker that opens a container reads its
    members itself: the same report, nothing lost."""
    d, _ = _archives(tmp_path)
    m = MultiMatcher(SECRETS)
    one = read(d, m, Limits(), False, monkeypatch)
    monkeypatch.setattr(scan_pool, "MEMBER_BYTES", 4096)

    def full() -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(scan_pool, "_temp_dir", full)
    assert read(d, m, Limits(), True, monkeypatch).to_dict() == one.to_dict()


@pytest.mark.parametrize("name", ["a!.json", "b!.db", "c.json!.tar"])
def test_a_large_container_is_known_by_its_own_name(tmp_path, monkeypatch, name):
    """A container large enough to be read in pieces, under a name whose part after a
    ``!`` says another kind: the pooled report is the one-process report (the same
    readings, decoders and notes)."""
    import io
    import tarfile

    d = tmp_path / "d"
    d.mkdir()
    rng = random.Random(3)
    text = (rng.randbytes(60_000).hex() + f" {SECRETS[0]} ").encode()
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as tf:
        for k in range(3):
            info = tarfile.TarInfo(f"m{k}.txt")
            info.size = len(text)
            tf.addfile(info, io.BytesIO(text))
    assert len(tar.getvalue()) > 2 * PIECE
    (d / name).write_bytes(tar.getvalue())
    m = MultiMatcher(SECRETS)
    one = read(d, m, Limits(), False, monkeypatch)
    monkeypatch.setattr(scan_pool, "MEMBER_BYTES", 4096)
    assert read(d, m, Limits(), True, monkeypatch).to_dict() == one.to_dict()
    hits = [h for hits in one.surfaces.values() for h in hits]
    for k in range(3):
        assert any(h.location.startswith(f"{d}/{name}!m{k}.txt@") for h in hits)


def test_members_of_a_reading_never_finished_are_removed(tmp_path, monkeypatch):
    """A reading started and never finished (the caller failed in between): stopping the
    workers removes the members they wrote out (decompressed copies of the secret)."""
    import time

    d, _ = _archives(tmp_path)
    _workers_and_inline(monkeypatch, True)
    monkeypatch.setattr(scan_pool, "MEMBER_BYTES", 4096)
    monkeypatch.setattr(scan_pool.tempfile, "tempdir", str(tmp_path))
    try:
        reading = Scanner(ResidueReport(target="t"), MultiMatcher(SECRETS), Limits()).start(d, SIDE)
        assert reading is not None
        pool_dir = Path(scan_pool._POOL["tmp"])
        deadline = time.monotonic() + 60
        while not any(p.is_file() for p in pool_dir.rglob("*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(p.is_file() for p in pool_dir.rglob("*"))
    finally:
        scan_pool.release()
    assert not pool_dir.exists()
    assert not list(tmp_path.glob("memkit-members-*"))


def _dying_batch(*args):
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_that_dies_stops_the_scan_instead_of_hanging_it(tmp_path, monkeypatch):
    """A worker killed while it reads (as SIGBUS kills one whose file shrank under its
    map): the scan raises :class:`WorkerDied`, and stopping the pool leaves no temporary
    directory; without the check, the lost task would be waited for forever."""
    d = tree(tmp_path)
    _workers_and_inline(monkeypatch, True)
    monkeypatch.setattr(scan_pool, "_read_batch", _dying_batch)
    monkeypatch.setattr(scan_pool.tempfile, "tempdir", str(tmp_path))
    try:
        with pytest.raises(scan_pool.WorkerDied):
            Scanner(ResidueReport(target="t"), MultiMatcher(SECRETS), Limits()).path(d, SIDE)
    finally:
        scan_pool.release()
    assert not list(tmp_path.glob("memkit-members-*"))
