"""Runs everywhere: a portable llama.cpp build, native crashes that become
errors naming their cause, and runs that never leave a mess behind."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluators.sweep import SweepConfig, load_instances, load_records
from memkit.models.chat import ModelSpecError, check_llamacpp

REPO = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    return {**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _memkit(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluators.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=_env(), cwd=REPO)


# --------------------------------------------------------------------------- portable build


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="needs the llamacpp extra")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump")
@pytest.mark.skipif(os.environ.get("MEMKIT_LLAMA_NATIVE") == "1", reason="a native build was asked for")
def test_llama_cpp_build_uses_no_amx_or_avx512_instructions():
    """setup.sh builds llama.cpp for a portable baseline: the native libraries hold no
    AMX (tile*) and no AVX-512 (zmm registers) instructions, which a CPU or VM
    without them cannot run (SIGILL)."""
    root = Path(importlib.util.find_spec("llama_cpp").submodule_search_locations[0])
    libs = [p for p in root.rglob("*.so*") if p.is_file()]
    assert any("ggml" in p.name for p in libs), libs
    for lib in libs:
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True,
                             text=True, check=True).stdout
        assert asm.count("tilezero") == 0 and asm.count("tileloadd") == 0, lib
        assert asm.count("%zmm") == 0, lib
        if "ggml-cpu" in lib.name:
            assert asm.count("%ymm") > 0, f"{lib} has no AVX2 code: the baseline flags were lost"


# --------------------------------------------------------------------------- crashes become errors


@pytest.fixture
def crashing_llama(tmp_path, monkeypatch):
    """A stand-in ``llama_cpp`` package (named as such) whose model load kills its own
    process with SIGILL, as a build for another CPU does; the check must turn that
    into a ModelSpecError instead of dying."""
    pkg = tmp_path / "fake" / "llama_cpp"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import os, signal\n"
        "class Llama:\n"
        "    def __init__(self, *a, **k):\n"
        "        os.kill(os.getpid(), signal.SIGILL)\n"
    )
    (pkg / "libggml-cpu.so").write_bytes(b"stand-in")
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MEMKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    importlib.invalidate_caches()
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    return model


def test_llama_crash_becomes_a_model_spec_error(crashing_llama):
    with pytest.raises(ModelSpecError) as info:
        check_llamacpp(crashing_llama)
    msg = str(info.value)
    assert "SIGILL" in msg and "illegal instruction" in msg
    assert "scripts/setup.sh" in msg and "CMAKE_ARGS" in msg and "--no-cache-dir" in msg


def test_llama_check_runs_once_per_installation(crashing_llama, tmp_path):
    """A passing check is remembered per installation; a rebuilt library is checked again."""
    pkg = tmp_path / "fake" / "llama_cpp"
    (pkg / "__init__.py").write_text(
        "class Llama:\n"
        "    def __init__(self, *a, **k): pass\n"
        "    def create_completion(self, *a, **k): return {}\n"
    )
    check_llamacpp(crashing_llama)
    assert len(list((tmp_path / "cache" / "llamacpp-ok").iterdir())) == 1
    (pkg / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    check_llamacpp(crashing_llama)  # same installation: not run again, so no crash
    (pkg / "libggml-cpu.so").write_bytes(b"rebuilt library")
    with pytest.raises(ModelSpecError, match="SIGILL"):
        check_llamacpp(crashing_llama)


def test_sweep_refuses_a_crashing_llama_before_writing(crashing_llama, tmp_path):
    out = tmp_path / "out"
    proc = _memkit("sweep", "--model", f"llamacpp:{crashing_llama}", "--n", "1", "--out", str(out), "--quiet")
    assert proc.returncode == 2, proc.stderr
    assert "SIGILL" in proc.stderr and "--model" in proc.stderr
    assert not out.exists()


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _is_worker(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return "multiprocessing" in cmd and "resource_tracker" not in cmd


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGILL, signal.SIGKILL])
def test_killed_worker_is_named_and_resume_completes(tmp_path, sig):
    """A worker killed by a signal mid-sweep: the sweep names the unit and the signal,
    exits non-zero, keeps the units already written, and --resume completes them."""
    out = tmp_path / "run"
    args = ["sweep", "--n", "4", "--summary-levels", "0,1", "--k", "1,3", "--workers", "2",
            "--deletion-modes", "none", "--n-resamples", "50", "--out", str(out), "--quiet"]
    proc = subprocess.Popen([sys.executable, "-m", "evaluators.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), cwd=REPO)
    results = out / "results.jsonl"
    deadline = time.time() + 300
    victim = None
    while time.time() < deadline and proc.poll() is None:
        if results.exists() and b'"unit_done"' in results.read_bytes():
            workers = [p for p in _children(proc.pid) if _is_worker(p)]
            if workers:
                victim = workers[0]
                os.kill(victim, sig)
                break
        time.sleep(0.05)
    assert victim is not None, "no worker to kill before the sweep ended"
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err
    assert f"killed by {sig.name}" in err
    assert "--resume" in err
    if "while running" in err:
        assert "::S" in err.split("while running", 1)[1]
    _, done, bad = load_records(results)
    assert done and not bad and len(done) < 8
    again = _memkit(*args, "--resume")
    assert again.returncode == 0, again.stderr
    _, done, _ = load_records(results)
    assert len(done) == 8
    assert json.loads((out / "metrics.json").read_text())["totals"]["units"] == 8


# --------------------------------------------------------------------------- runs leave no mess


def test_bad_data_leaves_nothing_behind(tmp_path):
    out = tmp_path / "runs" / "sweep"
    proc = _memkit("sweep", "--data", str(REPO / "README.md"), "--out", str(out), "--quiet")
    assert proc.returncode == 2
    assert "README.md" in proc.stderr
    assert proc.stderr.count("--data:") == 1
    assert not out.exists() and not out.parent.exists()


def test_bad_model_leaves_nothing_behind(tmp_path):
    out = tmp_path / "run"
    proc = _memkit("sweep", "--model", "nosuch", "--out", str(out), "--quiet")
    assert proc.returncode == 2 and "--model" in proc.stderr
    assert not out.exists()


def test_a_run_that_failed_before_any_unit_does_not_block_the_next(tmp_path):
    """An --out holding a config but no completed unit (a run that died at once) takes
    the next configuration instead of refusing it."""
    out = tmp_path / "run"
    out.mkdir()
    (out / ".memkit-run").write_text('{"kind": "sweep"}\n')  # memkit marks --out before any write
    (out / "config.json").write_text(json.dumps({"data": "something else"}))
    (out / "results.jsonl").write_text('{"type": "canary", "unit": "x::S0"}\n')
    proc = _memkit("sweep", "--n", "1", "--summary-levels", "0", "--k", "1", "--deletion-modes", "",
                   "--n-resamples", "20", "--out", str(out), "--quiet", "--resume")
    assert proc.returncode == 0, proc.stderr


def test_refused_resume_says_how_to_go_on(tmp_path):
    out = tmp_path / "run"
    base = ["sweep", "--n", "1", "--summary-levels", "0", "--k", "1", "--deletion-modes", "",
            "--n-resamples", "20", "--out", str(out), "--quiet"]
    assert _memkit(*base).returncode == 0
    again = _memkit(*base)
    assert again.returncode == 2 and "--resume" in again.stderr and "new --out" in again.stderr
    other = _memkit(*base[:-1], "--seed", "1", "--resume", "--quiet")
    assert other.returncode == 2
    assert "seed" in other.stderr and "new --out" in other.stderr and f"remove {out}" in other.stderr


def test_n_larger_than_the_file_takes_every_instance(sample_path):
    with pytest.warns(UserWarning, match="taking all 8"):
        instances = load_instances(SweepConfig(data=str(sample_path), n=20))
    assert len(instances) == 8
    assert [x.question_id for x in load_instances(SweepConfig(data=str(sample_path), n=None))] == [
        x.question_id for x in instances
    ]
    with pytest.raises(ValueError, match="--n all needs --data"):
        load_instances(SweepConfig(n=None))


def test_openai_error_names_what_a_command_line_user_has(tmp_path):
    env_less = {k: v for k, v in _env().items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    proc = subprocess.run([sys.executable, "-m", "evaluators.cli", "sweep", "--model", "openai:gpt-4o-mini",
                           "--out", str(tmp_path / "o"), "--quiet"], capture_output=True, text=True,
                          env=env_less, cwd=REPO, timeout=300)
    assert proc.returncode == 2
    for name in ("OPENAI_API_KEY", "--api-key-env", "OPENAI_BASE_URL", "--base-url"):
        assert name in proc.stderr
    assert not (tmp_path / "o").exists()


def test_keep_stores_gives_a_store_memkit_residue_can_scan(tmp_path):
    """`memkit sweep --keep-stores` keeps each mode's forgotten store; `memkit residue`
    finds the canary in the `none` store and nothing in the `full_purge` one."""
    out = tmp_path / "run"
    proc = _memkit("sweep", "--n", "1", "--summary-levels", "0", "--k", "1", "--deletion-modes",
                   "none,full_purge", "--n-resamples", "20", "--out", str(out), "--quiet", "--keep-stores")
    assert proc.returncode == 0, proc.stderr
    assert "forgotten stores" in proc.stdout
    canary = next(r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())
                  if r["type"] == "canary")
    base = out / "stores" / canary["question_id"] / "S0"
    for mode, rc in (("none", 1), ("full_purge", 0)):
        res = _memkit("residue", str(base / mode / "chroma"), canary["value"], "--cache",
                      str(base / mode / "llm_cache.sqlite"), "--json")
        assert res.returncode == rc, (mode, res.stdout[-2000:])
