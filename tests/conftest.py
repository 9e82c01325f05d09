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


DATA = REPO / "tests" / "data"
"""Data the tests read: committed in the repository (see tests/data/README.md)."""


@pytest.fixture(scope="session")
def sample_path() -> Path:
    """Path of the 8-instance real LongMemEval oracle sample committed under tests/data/."""
    return DATA / "longmemeval_oracle_sample.json"


_LLAMA_VERDICT: list[str | None] = []


def _llamacpp_verdict() -> str | None:
    """``None`` if llama.cpp generates a token on this machine, else why not.

    Checked once per test session in a subprocess (:func:`memkit.models.check_llamacpp`),
    so a llama.cpp build that dies with SIGILL on this CPU fails the tests that use
    it, with the reason, instead of killing the whole test run.
    """
    if not _LLAMA_VERDICT:
        import importlib.util

        if importlib.util.find_spec("llama_cpp") is None:
            _LLAMA_VERDICT.append("llama-cpp-python is not installed (the `llamacpp` extra)")
        else:
            from memkit.models import ModelSpecError, check_llamacpp, resolve_gguf

            try:
                check_llamacpp(resolve_gguf("gemma3-270m"))
                _LLAMA_VERDICT.append(None)
            except ModelSpecError as exc:
                _LLAMA_VERDICT.append(str(exc))
    return _LLAMA_VERDICT[0]


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``llm`` fail with the reason when llama.cpp cannot run here."""
    if item.get_closest_marker("llm") is not None:
        verdict = _llamacpp_verdict()
        if verdict is not None:
            pytest.fail(f"llama.cpp cannot run on this machine: {verdict}", pytrace=False)


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
def free_port():
    """A function returning a free TCP port on 127.0.0.1 (for the real servers tests start)."""
    return _free_port


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
