"""Shared fixtures. Tests run with outbound network blocked except loopback
(pytest-socket, configured in pyproject.toml), so an accidental download fails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """The read-only ``shared/`` folder beside the checkout (or ``$MEMKIT_SHARED``)."""
    env = os.environ.get("MEMKIT_SHARED")
    if env:
        return Path(env)
    for cand in (REPO.parent / "shared", REPO / "shared", Path("/work/shared")):
        if (cand / "data").is_dir():
            return cand
    return REPO.parent / "shared"


@pytest.fixture(scope="session")
def sample_path() -> Path:
    """Path of the 8-instance real LongMemEval oracle sample."""
    path = shared_dir() / "data" / "longmemeval_oracle_sample.json"
    if not path.exists():
        pytest.fail(f"LongMemEval sample not found at {path}; set MEMKIT_SHARED")
    return path


@pytest.fixture(scope="session")
def embedder():
    """The real all-MiniLM-L6-v2 embedder, shared by the whole session."""
    from memkit.models import embeddings

    return embeddings()


@pytest.fixture(autouse=True, scope="session")
def _memkit_cache_dir(tmp_path_factory):
    """Keep memkit's caches inside the test run unless the caller set a directory."""
    if "MEMKIT_CACHE_DIR" not in os.environ:
        os.environ["MEMKIT_CACHE_DIR"] = str(Path.home() / ".cache" / "memkit")
    yield


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def llama_server():
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1 serving gemma3-270m.

    Yields the ``base_url`` (``http://127.0.0.1:PORT/v1``); the model alias is ``gemma``.
    The server is a real subprocess, started once per session and stopped at the end.
    """
    import subprocess
    import sys
    import time
    import urllib.request

    from memkit.models import resolve_gguf

    port = _free_port()
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(resolve_gguf("gemma3-270m")),
        "--model_alias", "gemma", "--chat_format", "gemma",
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--seed", "0", "--verbose", "False",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            pytest.fail(f"llama_cpp.server exited early: {err[-2000:]}")
        try:
            urllib.request.urlopen(base + "/models", timeout=2).close()
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("llama_cpp.server did not start within 120 s")
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
