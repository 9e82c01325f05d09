"""memkit's ``langgraph.json`` graphs under a real ``langgraph dev`` server on 127.0.0.1.

``langgraph dev`` (package ``langgraph-cli[inmem]``) refuses synchronous blocking calls
on its event loop unless ``--allow-blocking`` is given; the server is started without
it. A client writes two users' sessions with canaries, forgets one user's canary with
``full_purge``, reads, and then every file the server and the store left on disk is
scanned twice: by ``memkit residue`` and by a plain byte search (a second
implementation that knows nothing of memkit's matcher).

The server's own files (``.langgraph_api/*.pckl``, written by ``langgraph_runtime_inmem``)
keep each run's input — including the forget request's secret — until the threads are
deleted; the test checks that memkit finds those copies and that they are gone once
the threads are deleted through the SDK.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memkit.residue.chroma import scan

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
CANARY_1 = "XQ7-VIOLET-3829"
CANARY_2 = "KP4-AMBER-1177"


def _bytes_hits(root: Path, needle: str) -> dict[str, int]:
    """Second implementation: count raw UTF-8 occurrences of ``needle`` per file under root."""
    b = needle.encode()
    hits = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            n = p.read_bytes().count(b)
            if n:
                hits[str(p.relative_to(root))] = n
    return hits


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory, free_port, serve):
    """A real ``langgraph dev`` over memkit's graphs; yields (base_url, workdir, store_dir)."""
    langgraph = Path(sys.executable).parent / "langgraph"
    if not langgraph.exists():
        pytest.fail("langgraph-cli is not installed: install memkit's dev extra (langgraph-cli[inmem])")
    work = tmp_path_factory.mktemp("lgdev")
    config = json.loads((REPO / "langgraph.json").read_text())
    config["dependencies"] = [str(REPO)]
    config["graphs"] = {n: str(REPO / s.removeprefix("./")) for n, s in config["graphs"].items()}
    (work / "langgraph.json").write_text(json.dumps(config))
    store_dir = work / "store"
    port = free_port()
    env = {
        **os.environ,
        "MEMKIT_STORE_DIR": str(store_dir),
        "MEMKIT_LLM_CACHE": str(work / "llm_cache.sqlite"),
        "MEMKIT_CACHE_DIR": str(work / "cache"),
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "ANONYMIZED_TELEMETRY": "False",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    cmd = [str(langgraph), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
           "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    with serve(cmd, base + "/ok", what="langgraph dev", timeout=180, log=work / "server.log",
               cwd=work, env=env):
        yield base, work, store_dir


def _wait(client, graph: str, payload: dict) -> tuple[str, dict]:
    thread = client.threads.create()
    out = client.runs.wait(thread["thread_id"], graph, input=payload, raise_error=False)
    return thread["thread_id"], out


def test_write_forget_read_under_langgraph_dev(dev_server) -> None:
    from langgraph_sdk import get_sync_client

    base, work, store_dir = dev_server
    client = get_sync_client(url=base)
    threads = []
    for user, canary, sid in (("u1", CANARY_1, "s1"), ("u2", CANARY_2, "s2")):
        turns = [{"role": "user", "content": f"My locker code is {canary}, please remember it."},
                 {"role": "assistant", "content": "Noted."}]
        tid, out = _wait(client, "memory_write", {
            "namespace": user, "session_id": sid, "date": "2023/05/01", "turns": turns, "S": 1})
        assert "__error__" not in out, out
        assert len(out["raw_ids"]) == 1 and len(out["summary_ids"]) == 1, out
        threads.append(tid)

    tid, out = _wait(client, "forget", {"secret": CANARY_1, "mode": "full_purge", "namespace": "u1"})
    assert "__error__" not in out, out
    result = out["result"]
    assert result["steps"] == ["delete_raw", "cascade", "purge_caches", "compact"]
    assert result["remaining"] == {} and result["unverified"] == {}
    assert len(result["deleted"]["raw"]) == 1 and len(result["deleted"]["summary"]) == 1
    threads.append(tid)

    for user, canary, expect in (("u1", CANARY_1, False), ("u2", CANARY_2, True)):
        tid, out = _wait(client, "memory_read", {
            "query": "What is my locker code?", "namespace": user, "k": 3, "S": 1})
        assert "__error__" not in out, out
        texts = " ".join(c["text"] if isinstance(c, dict) else str(c) for c in out["chunks"])
        assert (canary in texts) is expect, out
        threads.append(tid)

    log = (work / "server.log").read_text()
    assert "BlockingError" not in log and "Blocking call" not in log

    # The store directory: no copy of the forgotten canary (memkit and a byte search agree),
    # the other user's canary is still there (the scan sees what it should).
    assert _bytes_hits(store_dir, CANARY_1) == {}
    assert _bytes_hits(store_dir, CANARY_2) != {}
    report = scan(store_dir, CANARY_1, cache_paths=[work / "llm_cache.sqlite"])
    assert report.verdict == "clean", report.counts()
    assert scan(store_dir, CANARY_2, check_embeddings=False).total > 0

    # The server's own files keep the runs' inputs (the writes and the forget request).
    api = work / ".langgraph_api"
    deadline = time.time() + 30  # the in-memory runtime flushes every 10 s
    while time.time() < deadline and not _bytes_hits(api, CANARY_1):
        time.sleep(1)
    plain = _bytes_hits(api, CANARY_1)
    assert plain, "langgraph dev kept no copy of the runs' inputs (the test no longer tests that)"
    report = scan(store_dir, CANARY_1, also=[api], check_embeddings=False)
    side = sum(n for s, n in report.counts().items() if s.startswith("side_"))
    assert side >= sum(plain.values()), (report.counts(), plain)
    assert report.verdict != "clean"

    # Delete the threads through the SDK and wait until the runtime has flushed the
    # deletion to disk (the run log file loses the canary; one more flush period after).
    for t in client.threads.search(limit=1000):
        client.threads.delete(t["thread_id"])
    assert client.threads.search(limit=1000) == []
    deadline = time.time() + 40
    while time.time() < deadline and ".langgraph_ops.pckl" in _bytes_hits(api, CANARY_1):
        time.sleep(1)
    # ... and one more flush after that (a file written after we saw the deletion), not a fixed wait
    seen = time.time()
    while time.time() < deadline + 30 and not any(p.stat().st_mtime > seen for p in api.glob("*.pckl")):
        time.sleep(0.5)
    plain = _bytes_hits(api, CANARY_1)
    assert ".langgraph_ops.pckl" not in plain, plain
    print("langgraph dev files holding the canary after thread deletion:", plain)
    # Whatever the server still keeps on disk, memkit's verdict must match the byte search.
    # (langgraph-runtime-inmem 0.36.7 keeps the deleted threads' channel values and pending
    # writes in .langgraph_checkpoint.{2,3}.pckl: memkit must say "copies remain".)
    report = scan(store_dir, CANARY_1, also=[api])
    side = sum(n for s, n in report.counts().items() if s.startswith("side_"))
    assert side >= sum(plain.values()), (report.counts(), plain)
    assert report.verdict == ("copies remain" if plain else "clean"), (report.counts(), plain)

    # `memkit residue` (the CLI) says the same: exit 1 with copies, 0 when clean.
    memkit = shutil.which("memkit", path=str(Path(sys.executable).parent)) or "memkit"
    proc = subprocess.run([memkit, "residue", str(store_dir), "-", "--also", str(api), "--json"],
                          input=CANARY_1, capture_output=True, text=True, timeout=300)
    assert proc.returncode == (1 if plain else 0), proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["total"] == report.total
    assert CANARY_1 not in proc.stdout
