"""A store directory that cannot be renamed (a mount point, such as a container volume):
a forget that compacts either completes -- the files are rewritten in place -- or
refuses before changing anything (memkit.store.compaction, graphs.forget).

"Cannot rename this directory" is shown two ways: a real bind mount (``unshare -m`` +
``mount --bind``, where the machine lets this user mount; skipped otherwise), and a
stand-in that is NOT a mount: ``os.rename`` and ``renameat2`` answer ``EBUSY`` for
exactly the store's path, as the kernel does for a mount point. What survives is read
independently of memkit: chromadb's own client in a fresh process, and a byte grep.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import memkit.store.compaction as compaction
from graphs.forget import forget
from memkit.residue.chroma import scan
from memkit.store.tiered import StoreError, TieredMemoryStore
from tests.test_store_processes import HashEmbedder, _chroma_documents, _env, _grep, _script, raw

SECRET = "XQ7-VIOLET-3829"
KEPT = [f"kept fact {i}" for i in range(20)]


def make_store(path: Path) -> None:
    with TieredMemoryStore(path, embedder=HashEmbedder()) as s:
        s.add([raw(i, t) for i, t in enumerate(KEPT)] + [raw(50, f"the token is {SECRET}"),
                                                        raw(51, f"again: {SECRET}")])


def pin(monkeypatch, path: Path) -> None:
    """Stand-in for a mount point at ``path`` (NOT a mount): renaming it fails with EBUSY."""
    path = path.resolve()
    real_rename, real_exchange = os.rename, compaction._exchange

    def rename(src, dst, *a, **kw):
        if Path(src).resolve() == path:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(src))
        return real_rename(src, dst, *a, **kw)

    def exchange(a: Path, b: Path) -> bool:
        return False if path in (Path(a).resolve(), Path(b).resolve()) else real_exchange(a, b)

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(compaction, "_exchange", exchange)


def check_forgotten(path: Path, tmp: Path) -> None:
    assert sorted(_chroma_documents(path, tmp)) == sorted(KEPT)
    assert _grep(path, SECRET) == []
    assert not list(path.parent.glob(f".{path.name}.compact-*"))
    assert not (path.parent / f".{path.name}.memkit" / "compaction.json").exists()


@pytest.mark.timeout(300)
def test_full_purge_on_a_directory_that_cannot_be_renamed_compacts_in_place(tmp_path, monkeypatch):
    path = tmp_path / "chroma"
    make_store(path)
    ino = os.stat(path).st_ino
    pin(monkeypatch, path)
    with TieredMemoryStore(path, embedder=HashEmbedder()) as store:
        result = forget(store, SECRET, "full_purge", namespace=None)
        assert result.steps == ["delete_raw", "cascade", "purge_caches", "compact"]
        assert not result.remaining and "disk_sqlite" in result.rewritten
        assert sorted(c.text for c in store.chunks()) == sorted(KEPT)  # the handle goes on
        store.add([raw(60, "written after the purge")])
        report = store.compact()
        assert report.method == "in place" and report.records == len(KEPT) + 1
    assert os.stat(path).st_ino == ino  # the directory itself never moved
    monkeypatch.undo()
    KEPT.append("written after the purge")
    try:
        check_forgotten(path, tmp_path)
        assert scan(path, SECRET, embedder=HashEmbedder()).verdict == "clean"
    finally:
        KEPT.pop()


KILLER = """
import errno, os, sys
from pathlib import Path
from helper_embedder import HashEmbedder
import memkit.store.compaction as compaction
from memkit.store.tiered import TieredMemoryStore
from graphs.forget import forget

path, point = Path(sys.argv[1]).resolve(), sys.argv[2]
real_rename, real_exchange = os.rename, compaction._exchange
def rename(src, dst, *a, **kw):  # stand-in for a mount point (NOT a mount)
    if Path(src).resolve() == path:
        raise OSError(errno.EBUSY, "Device or resource busy", str(src))
    return real_rename(src, dst, *a, **kw)
os.rename = rename
compaction._exchange = lambda a, b: False if path in (Path(a).resolve(), Path(b).resolve()) else real_exchange(a, b)
if point in ("before-copy", "mid-copy"):  # killed before any entry, or after the first, is copied in
    calls, kill_at = [0], 1 if point == "before-copy" else 2
    def killing(real):
        def copy(*a, **kw):
            calls[0] += 1
            if calls[0] == kill_at:
                os._exit(9)
            return real(*a, **kw)
        return copy
    compaction.shutil.copy2 = killing(compaction.shutil.copy2)
    compaction.shutil.copytree = killing(compaction.shutil.copytree)
elif point == "after-copy":  # killed once the copy is recorded, before the build is shredded
    real_shred = compaction._shred_tree
    compaction._shred_tree = lambda p: os._exit(9) if ".compact-" in p.name else real_shred(p)
store = TieredMemoryStore(str(path), embedder=HashEmbedder())
forget(store, sys.argv[3], "full_purge", namespace=None)
print("NOT KILLED", flush=True)
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("point", ["before-copy", "mid-copy", "after-copy"])
def test_a_kill_during_an_in_place_compaction_is_rolled_forward(tmp_path, point):
    path = tmp_path / "chroma"
    make_store(path)
    script = _script(tmp_path, "killer.py", KILLER)
    proc = subprocess.run([sys.executable, str(script), str(path), point, SECRET], capture_output=True,
                          text=True, env=_env(), cwd=tmp_path, timeout=240)
    assert proc.returncode == 9, proc.stdout + proc.stderr[-3000:]
    assert (path.parent / ".chroma.memkit" / "compaction.json").exists()
    with TieredMemoryStore(path, embedder=HashEmbedder()) as store:  # opening recovers
        assert sorted(c.text for c in store.chunks()) == sorted(KEPT)
    check_forgotten(path, tmp_path)


@pytest.mark.timeout(120)
def test_a_store_that_cannot_be_locked_refuses_before_deleting(tmp_path, monkeypatch):
    """A parent directory memkit cannot write (stand-in: the lock cannot be created, as
    for a read-only parent; root ignores permission bits): the forget refuses first."""
    path = tmp_path / "chroma"
    make_store(path)

    def no_lock(*a, **kw):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / ".chroma.memkit"))

    monkeypatch.setattr("memkit.store.tiered.DirectoryLock", no_lock)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = TieredMemoryStore(path, embedder=HashEmbedder())
    try:
        assert "not writable" in store.compaction_blocker()
        with pytest.raises(StoreError, match="refused before changing anything"):
            forget(store, SECRET, "full_purge", namespace=None)
        assert len(store.chunks()) == len(KEPT) + 2
    finally:
        store.close()


def _can_bind_mount(tmp: Path) -> str | None:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "no unshare/mount here"
    (tmp / "probe-a").mkdir()
    (tmp / "probe-b").mkdir()
    proc = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {tmp / 'probe-a'} {tmp / 'probe-b'}"],
                          capture_output=True, text=True, timeout=30)
    return None if proc.returncode == 0 else f"mount not permitted: {proc.stderr.strip()[:200]}"


MOUNTED = """
import os, sys
from pathlib import Path
from helper_embedder import HashEmbedder
from memkit.store.tiered import TieredMemoryStore
from graphs.forget import forget
path = Path(sys.argv[1])
mounts = {line.split()[4] for line in open("/proc/self/mountinfo")}  # a bind mount keeps st_dev
assert str(path) in mounts, path
try:
    os.rename(path, path.with_name("elsewhere"))
except OSError as exc:
    print("RENAME", exc.errno, flush=True)
store = TieredMemoryStore(str(path), embedder=HashEmbedder())
r = forget(store, sys.argv[2], "full_purge", namespace=None)
print("STEPS", " ".join(r.steps), "REMAINING", r.remaining, flush=True)
print("METHOD", store.compact().method, flush=True)
store.close()
"""


@pytest.mark.timeout(300)
def test_full_purge_on_a_real_bind_mount(tmp_path):
    why = _can_bind_mount(tmp_path)
    if why is not None:
        pytest.skip(why)
    volume, mounted = tmp_path / "volume", tmp_path / "app" / "chroma"
    make_store(volume)
    mounted.mkdir(parents=True)
    script = _script(tmp_path, "mounted.py", MOUNTED)
    cmd = f"mount --bind {volume} {mounted} && exec {sys.executable} {script} {mounted} {SECRET}"
    proc = subprocess.run(["unshare", "-m", "sh", "-c", cmd], capture_output=True, text=True, env=_env(),
                          cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert f"RENAME {errno.EBUSY}" in proc.stdout
    assert "STEPS delete_raw cascade purge_caches compact REMAINING {}" in proc.stdout
    assert "METHOD in place" in proc.stdout
    check_forgotten(volume, tmp_path)  # the volume's own files, read outside the mount
    assert not list((tmp_path / "app").glob(".chroma.compact-*"))
