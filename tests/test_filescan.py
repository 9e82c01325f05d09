"""Files whose stat size is not their length (memkit.residue.files): ``/proc/PID/environ`` and
``/proc/PID/cmdline`` say 0 bytes, ``/sys`` files a page. A file is read to its end
whatever its size says, and its coverage counts the bytes read.

The copies are planted by the operating system: a real child process started with the
secret in its environment and its argv. Ground truth is a plain ``open().read()`` of
the same ``/proc`` file and ``os.stat``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from memkit.residue.chroma import scan
from memkit.residue.containers import Limits
from memkit.scan.engine import ScanEngine

SECRET = "XQ7-VIOLET-3829"
SPELLED = "xq7 violet 3829"  # a spelling the matcher counts a copy


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    """An empty chroma persist directory written by chromadb itself."""
    import chromadb
    from chromadb.config import Settings

    path = tmp_path_factory.mktemp("chroma") / "db"
    chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False)).close()
    return path


@pytest.fixture
def holder():
    """Start a child process; ``holder(env=..., argv=[...])`` -> its pid (killed after)."""
    procs = []

    def start(*, env: dict[str, str], argv: list[str]) -> int:
        p = subprocess.Popen([sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(300)",
                              *argv], env={"PATH": os.environ.get("PATH", ""), **env}, stdout=subprocess.PIPE,
                             text=True)
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline() == "up\n"
        return p.pid

    yield start
    for p in procs:
        p.kill()
        p.wait(timeout=30)


def plain(b: bytes) -> str:
    """Letters and digits, case folded (stdlib only): an independent copy check."""
    text = b.decode("utf-8", "replace")
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


def proc_files(pid: int) -> list[str]:
    return [f"/proc/{pid}/environ", f"/proc/{pid}/cmdline"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("env_value", "arg"), [(SECRET, SECRET), (SPELLED, f"--token={SPELLED}"),
                                                ("nothing", f"token:{SECRET}"), (SECRET, "nothing")])
def test_proc_files_of_a_process_holding_the_secret_are_read_to_their_end(store_dir, holder, env_value, arg):
    pid = holder(env={"MY_TOKEN": env_value}, argv=[arg])
    files = proc_files(pid)
    truth = {f: Path(f).read_bytes() for f in files}
    assert all(os.stat(f).st_size == 0 for f in files)  # the size says nothing
    holds = {f: plain(SECRET.encode()) in plain(b) for f, b in truth.items()}
    assert any(holds.values())
    rep = scan(store_dir, SECRET, also=files, check_embeddings=False)
    assert rep.verdict == "copies remain"
    hit_files = {h.location.split("@")[0] for h in rep.surfaces["side_file"]}
    assert hit_files == {f for f, held in holds.items() if held}
    cov = {c.path: c for c in rep.coverage}
    for f in files:
        assert cov[f].complete and cov[f].bytes_read == cov[f].size == len(truth[f]) > 0, cov[f]


@pytest.mark.timeout(180)
def test_memkit_residue_also_proc_environ(store_dir, holder):
    """The CLI as a user runs it: a process holding the secret is not "clean"."""
    pid = holder(env={"MY_TOKEN": SECRET}, argv=[SECRET])
    memkit = Path(sys.executable).with_name("memkit")
    cmd = [str(memkit), "residue", str(store_dir), SECRET, "--no-embeddings", "--json"]
    for f in proc_files(pid):
        cmd += ["--also", f]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=150,
                         env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    body = json.loads(run.stdout)
    assert body["counts"]["side_file"] == 2 and SECRET not in run.stdout
    sizes = {c["path"]: (c["size"], c["bytes_read"]) for c in body["coverage"]}
    for f in proc_files(pid):
        n = len(Path(f).read_bytes())
        assert sizes[f] == (n, n) and n > 0


@pytest.mark.timeout(120)
def test_a_clean_process_is_clean_over_bytes_read(store_dir, holder):
    pid = holder(env={"MY_TOKEN": "nothing here"}, argv=["nothing"])
    rep = scan(store_dir, SECRET, also=proc_files(pid), embedder=object())  # an empty store: nothing to embed
    assert rep.verdict == "clean", rep.unchecked
    cov = {c.path: c for c in rep.coverage}
    for f in proc_files(pid):
        assert cov[f].bytes_read == len(Path(f).read_bytes()) > 0


@pytest.mark.timeout(120)
def test_a_file_longer_than_the_limit_is_not_clean(store_dir, holder):
    pid = holder(env={"MY_TOKEN": "nothing here", "PAD": "x" * 5000}, argv=["nothing"])
    f = f"/proc/{pid}/environ"
    rep = scan(store_dir, SECRET, also=[f], check_embeddings=False, limits=Limits(max_member_bytes=1000))
    assert rep.verdict == "incomplete"
    (c,) = [c for c in rep.coverage if c.path == f]
    assert c.bytes_read == 1000 and not c.complete and "limit reached" in " ".join(c.left)


def test_a_sys_file_is_read_to_its_end_not_to_its_page_size(store_dir):
    f = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not f.is_file():
        pytest.skip("no /sys/kernel/mm/transparent_hugepage/enabled here")
    data = f.read_bytes()
    assert os.stat(f).st_size != len(data)  # a page, not the length
    rep = scan(store_dir, SECRET, also=[f], check_embeddings=False)
    (c,) = [c for c in rep.coverage if c.path == str(f)]
    assert c.complete and c.size == c.bytes_read == len(data)


def test_scan_engine_reads_a_proc_file_to_its_end(holder):
    pid = holder(env={"MY_TOKEN": SECRET}, argv=[SPELLED])
    engine = ScanEngine([SECRET, "ABSENT-VALUE-0000"])
    for f in proc_files(pid):
        assert engine.counts(engine.scan_file(f)) == {SECRET: 1, "ABSENT-VALUE-0000": 0}
