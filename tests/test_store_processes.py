"""Forgets and compaction with other processes and with ``kill -9``.

Real processes (``subprocess``, and ``os.fork`` from a helper process that has
imported memkit but started no chroma client), real chromadb, the real forget
graph. The embedder is :class:`HashEmbedder`, a deterministic stand-in (NOT a model):
these tests are about files, locks and processes, not about semantics, and loading
MiniLM in every process would cost seconds each. What survives is checked
independently of memkit: chromadb's own client in a fresh process, and a byte grep
of the directory.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memkit.residue.chroma import scan
from memkit.store.tiered import Chunk, StoreError, TieredMemoryStore, chunk_id

REPO = Path(__file__).resolve().parents[1]

EMBEDDER_SRC = '''
import hashlib
import numpy as np

class HashEmbedder:
    """Stand-in embedder (not a model): a 384-d unit vector from SHA-256 of the text."""

    def encode(self, texts):
        rows = []
        for t in texts:
            h = hashlib.sha256(t.encode("utf-8")).digest() * 48
            v = np.frombuffer(h[:384], dtype=np.uint8).astype(np.float32) - 127.5
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), 384)
'''
_ns: dict = {}
exec(EMBEDDER_SRC, _ns)
HashEmbedder = _ns["HashEmbedder"]


def raw(i: int, text: str, ns: str = "u1") -> Chunk:
    return Chunk(chunk_id(ns, "s1", "raw", i, text), text, "raw", ns, "s1", i, "2023/05/01")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def _script(tmp: Path, name: str, body: str) -> Path:
    (tmp / "helper_embedder.py").write_text(EMBEDDER_SRC)
    path = tmp / name
    path.write_text(f"import sys\nsys.path.insert(0, {str(tmp)!r})\n" + textwrap.dedent(body))
    return path


def _chroma_documents(path: Path, tmp: Path) -> list[str]:
    """Documents of the chunk collection, read by chromadb itself in a fresh process."""
    code = textwrap.dedent(f"""
        import json, chromadb
        from chromadb.config import Settings
        c = chromadb.PersistentClient(path={str(path)!r}, settings=Settings(anonymized_telemetry=False))
        print(json.dumps(sorted(c.get_collection("memkit").get()["documents"])))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(),
                         cwd=tmp, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _grep(root: Path, needle: str) -> list[str]:
    """Files under ``root`` (and compaction leftovers beside it) whose bytes hold ``needle``."""
    hits = []
    places = [root, *root.parent.glob(f".{root.name}.compact-*")]
    for place in places:
        for p in place.rglob("*"):
            if p.is_file() and needle.encode() in p.read_bytes():
                hits.append(str(p))
    return hits


@pytest.mark.timeout(300)
def test_forget_in_another_process_while_a_store_is_open(tmp_path):
    """The issue's case: A holds the store open and has searched it; B forgets with
    full_purge; A's search returns no deleted chunk and A's later add is persisted."""
    secret = "XQ7-VIOLET-3829"
    path = tmp_path / "chroma"
    a = TieredMemoryStore(path, embedder=HashEmbedder())
    a.add([raw(0, "I like tea"), raw(1, f"my token is {secret}"), raw(2, "we went hiking")])
    assert {c.text for c in a.search("token", 3)} >= {f"my token is {secret}"}
    forget_b = _script(tmp_path, "b.py", f"""
        from helper_embedder import HashEmbedder
        from memkit.store.tiered import TieredMemoryStore
        from graphs.forget import forget
        store = TieredMemoryStore({str(path)!r}, embedder=HashEmbedder())
        r = forget(store, {secret!r}, "full_purge", namespace=None)
        store.close()
        print("FORGOT", r.steps, r.remaining)
    """)
    out = subprocess.run([sys.executable, str(forget_b)], capture_output=True, text=True, env=_env(),
                         cwd=tmp_path, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "compact" in out.stdout
    # A, still open: no deleted chunk comes back, and its write lands in the new directory.
    found = a.search("token", 10)
    assert found and all(secret not in c.text for c in found)
    a.add([raw(3, "written by A after the forget")])
    assert "written by A after the forget" in {c.text for c in a.chunks()}
    a.close()
    docs = _chroma_documents(path, tmp_path)
    assert docs == sorted(["I like tea", "we went hiking", "written by A after the forget"])
    assert _grep(path, secret) == []


@pytest.mark.timeout(600)
def test_writes_survive_twenty_purges_in_another_process(tmp_path):
    """One process writes 200 chunks (one add each) while another runs full_purge 20
    times: every untargeted chunk is there afterwards, no targeted secret anywhere."""
    path = tmp_path / "chroma"
    secrets = [f"QZ{i}-AMBER-{7100 + i}" for i in range(20)]
    with TieredMemoryStore(path, embedder=HashEmbedder()) as s:
        s.add([raw(i, f"secret number {i} is {x}") for i, x in enumerate(secrets)]
              + [raw(100 + i, f"kept fact {i}") for i in range(10)])
    writer = _script(tmp_path, "writer.py", f"""
        import time
        from helper_embedder import HashEmbedder
        from memkit.errors import StoreBusyError
        from memkit.store.tiered import Chunk, StoreError, TieredMemoryStore, chunk_id
        store = TieredMemoryStore({str(path)!r}, embedder=HashEmbedder(), lock_timeout=5)
        print("READY", flush=True)
        retries = 0
        for i in range(200):
            text = f"writer note {{i}}"
            chunk = Chunk(chunk_id("w", "s", "raw", i, text), text, "raw", "w", "s", i, "2023/05/02")
            while True:
                try:
                    store.add([chunk])
                    break
                except StoreBusyError:
                    retries += 1
                    time.sleep(0.05)
        store.close()
        print("WROTE", retries, flush=True)
    """)
    purger = _script(tmp_path, "purger.py", f"""
        from helper_embedder import HashEmbedder
        from memkit.store.tiered import TieredMemoryStore
        from graphs.forget import forget
        store = TieredMemoryStore({str(path)!r}, embedder=HashEmbedder())
        print("READY", flush=True)
        for secret in {secrets!r}:
            r = forget(store, secret, "full_purge", namespace=None)
            assert "compact" in r.steps and not r.remaining, r
        store.close()
        print("PURGED", flush=True)
    """)
    procs = [subprocess.Popen([sys.executable, str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=_env(), cwd=tmp_path) for p in (purger, writer)]
    outs = [p.communicate(timeout=540) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    assert "PURGED" in outs[0][0] and "WROTE" in outs[1][0]
    print("writer retries after StoreBusyError:", outs[1][0].split("WROTE")[1].strip())
    docs = _chroma_documents(path, tmp_path)
    expected = {f"writer note {i}" for i in range(200)} | {f"kept fact {i}" for i in range(10)}
    assert set(docs) == expected and len(docs) == len(expected)
    for secret in secrets:
        assert _grep(path, secret) == [], secret
    for secret in secrets[::5]:  # every surface, per memkit's own scanner
        report = scan(path, secret, embedder=HashEmbedder())
        assert report.verdict == "clean", (secret, report.counts())
    assert not list(tmp_path.glob(".chroma.compact-*"))


ZYGOTE = """
import os, sys, time
from helper_embedder import HashEmbedder
from memkit.store.tiered import TieredMemoryStore
from graphs.forget import forget
# Imports only: no chroma client has started, so forking is safe.
print("ZYGOTE", flush=True)
for line in sys.stdin:
    path, secret = line.split()
    pid = os.fork()
    if pid == 0:
        store = TieredMemoryStore(path, embedder=HashEmbedder())
        print("COMPACTING", time.monotonic(), flush=True)
        forget(store, secret, "full_purge", namespace=None)
        store.close()
        print("DONE", time.monotonic(), flush=True)
        os._exit(0)
    print("PID", pid, flush=True)
    os.waitpid(pid, 0)
    print("REAPED", flush=True)
"""


@pytest.mark.timeout(600)
def test_kill_9_at_random_points_of_compaction(tmp_path):
    """20 SIGKILLs at seeded random points of a full_purge: each directory opens,
    holds every untargeted chunk, and residue's verdict agrees with a byte grep."""
    secret = "XQ7-VIOLET-3829"
    template = tmp_path / "template"
    kept = [f"kept fact {i}" for i in range(30)]
    with TieredMemoryStore(template, embedder=HashEmbedder()) as s:
        s.add([raw(i, t) for i, t in enumerate(kept)] + [raw(50, f"the token is {secret}"),
                                                        raw(51, f"again: {secret}")])
    zygote = subprocess.Popen([sys.executable, str(_script(tmp_path, "zygote.py", ZYGOTE))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(),
                              cwd=tmp_path, bufsize=1)
    assert zygote.stdout is not None and zygote.stdin is not None

    def expect(prefix: str) -> str:
        while True:
            line = zygote.stdout.readline()
            if not line:
                raise AssertionError(f"helper process ended while waiting for {prefix}")
            if line.startswith(prefix):
                return line

    def trial(n: int, delay: float | None) -> float:
        path = tmp_path / f"t{n}" / "chroma"
        path.parent.mkdir()
        shutil.copytree(template, path)
        zygote.stdin.write(f"{path} {secret}\n")
        zygote.stdin.flush()
        pid = int(expect("PID").split()[1])
        t0 = float(expect("COMPACTING").split()[1])
        if delay is None:
            t1 = float(expect("DONE").split()[1])
            expect("REAPED")
            return t1 - t0
        time.sleep(delay)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        expect("REAPED")
        return 0.0

    try:
        expect("ZYGOTE")
        duration = trial(0, None)  # an uninterrupted run sets the window the kills fall in
        rng = random.Random(23)
        verdicts = []
        for n in range(1, 21):
            trial(n, rng.uniform(0, duration * 1.1))
            path = tmp_path / f"t{n}" / "chroma"
            with TieredMemoryStore(path, embedder=HashEmbedder()) as store:  # recovers
                texts = {c.text for c in store.chunks()}
            assert set(kept) <= texts, n
            assert not re.search("compact-", " ".join(os.listdir(path.parent))), os.listdir(path.parent)
            report = scan(path, secret, embedder=HashEmbedder())
            on_disk = _grep(path, secret)
            assert report.verdict in ("clean", "copies remain"), (n, report.counts(), report.unchecked)
            assert (report.verdict == "clean") == (not on_disk), (n, report.counts(), on_disk)
            if any(secret in t for t in texts):
                assert report.verdict == "copies remain"
            verdicts.append(report.verdict)
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=60)
    print("verdicts after kill -9:", verdicts)


def _hold(tmp: Path, name: str, body: str) -> subprocess.Popen:
    """Start a helper that prints HOLDING once it holds the directory, then sleeps."""
    proc = subprocess.Popen([sys.executable, str(_script(tmp, name, body))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("HOLDING"), (line, proc.stderr.read() if proc.stderr else "")
    return proc


@pytest.mark.timeout(300)
def test_compaction_refuses_a_plain_chromadb_holder_unless_forced(tmp_path):
    path = tmp_path / "chroma"
    store = TieredMemoryStore(path, embedder=HashEmbedder())
    store.add([raw(0, "kept"), raw(1, "doomed XQ7-VIOLET-3829")])
    holder = _hold(tmp_path, "plain.py", f"""
        import time, chromadb
        from chromadb.config import Settings
        c = chromadb.PersistentClient(path={str(path)!r}, settings=Settings(anonymized_telemetry=False))
        c.get_collection("memkit").count()
        print("HOLDING", flush=True)
        time.sleep(120)
    """)
    try:
        store.delete([raw(1, "doomed XQ7-VIOLET-3829").id])
        with pytest.raises(StoreError, match=rf"not memkit stores .*pid {holder.pid}\b.* open"):
            store.compact()
        assert store.compaction_blocker() is not None
        assert store.compaction_blocker(force=True) is None
        assert store.compact(force=True).records >= 1
        assert [c.text for c in store.chunks()] == ["kept"]
    finally:
        holder.kill()
        holder.wait()
        store.close()


@pytest.mark.timeout(300)
def test_a_write_during_another_process_forget_waits_or_fails_retryably(tmp_path):
    from memkit.errors import StoreBusyError

    path = tmp_path / "chroma"
    with TieredMemoryStore(path, embedder=HashEmbedder()) as s:
        s.add([raw(0, "kept")])
    store = TieredMemoryStore(path, embedder=HashEmbedder(), lock_timeout=0.5)
    holder = _hold(tmp_path, "excl.py", f"""
        import time
        from helper_embedder import HashEmbedder
        from memkit.store.tiered import TieredMemoryStore
        store = TieredMemoryStore({str(path)!r}, embedder=HashEmbedder())
        with store.exclusive("forget full_purge"):
            print("HOLDING", flush=True)
            time.sleep(6)
        store.close()
        print("RELEASED", flush=True)
    """)
    try:
        with pytest.raises(StoreBusyError, match=rf"pid {holder.pid}\b.*forget full_purge") as err:
            store.add([raw(1, "written while the forget runs")])
        assert err.value.retryable and any(str(holder.pid) in h for h in err.value.holders)
        store._lock.timeout = 60  # now wait for it: the write lands after the forget
        store.add([raw(1, "written while the forget runs")])
        assert holder.wait(timeout=60) == 0
    finally:
        holder.kill()
        store.close()
    assert _chroma_documents(path, tmp_path) == ["kept", "written while the forget runs"]


@pytest.mark.timeout(300)
def test_residue_reads_a_build_left_by_an_interrupted_compaction(tmp_path):
    """A compaction killed before anything reopened the store leaves its build beside
    the directory; `memkit residue DIR` reads it too instead of calling DIR clean.
    The build is a plain copy made by shutil, holding the secret in a file."""
    import shutil

    from memkit.residue.chroma import scan
    from memkit.store.tiered import TieredMemoryStore

    path = tmp_path / "store"
    TieredMemoryStore(path).close()
    build = tmp_path / ".store.compact-0123abcd"
    shutil.copytree(path, build)
    (build / "left.bin").write_bytes(b"\x00\x01my token is QZ7-VIOLET-3829\x00")
    report = scan(path, "QZ7-VIOLET-3829", check_embeddings=False)
    assert report.total >= 1 and any(".store.compact-0123abcd" in h.location
                                     for hits in report.surfaces.values() for h in hits)
    assert any("interrupted compaction" in n for n in report.notes)
