"""Shared fixtures. Tests run with outbound network blocked except loopback
(pytest-socket, configured in pyproject.toml), so an accidental download fails."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]

# A real PostgreSQL server for the tests that need one (tests/pg_fixtures.py).
pytest_plugins = ["pg_fixtures"]


DATA = REPO / "tests" / "data"
"""Data the tests read: committed in the repository (see tests/data/README.md)."""


@pytest.fixture(scope="session")
def sample_path() -> Path:
    """Path of the 8-instance real LongMemEval oracle sample committed under tests/data/."""
    return DATA / "longmemeval_oracle_sample.json"


_LLAMA_VERDICT: list[str | None] = []


def _llamacpp_verdict() -> str | None:
    """``None`` if llama.cpp generates a token on this machine, else why not.

    Checked once per test session in a subprocess (:func:`memkit.models.chat.check_llamacpp`),
    so a llama.cpp build that dies with SIGILL on this CPU fails the tests that use
    it, with the reason, instead of killing the whole test run.
    """
    if not _LLAMA_VERDICT:
        import importlib.util

        if importlib.util.find_spec("llama_cpp") is None:
            _LLAMA_VERDICT.append("llama-cpp-python is not installed (the `llamacpp` extra)")
        else:
            from memkit.models.chat import ModelSpecError, check_llamacpp, resolve_gguf

            try:
                check_llamacpp(resolve_gguf("gemma3-270m"))
                _LLAMA_VERDICT.append(None)
            except ModelSpecError as exc:
                _LLAMA_VERDICT.append(str(exc))
    return _LLAMA_VERDICT[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``pytest -n N --dist loadgroup`` (scripts/test.sh), the tests of a module
    that share a module-scoped fixture (a sweep, a server) run on one worker, so the
    fixture is built once; every other test goes to whichever worker is free."""
    for item in items:
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if any(d and d[-1].scope == "module" for d in defs.values()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``llm`` fail with the reason when llama.cpp cannot run here."""
    if item.get_closest_marker("llm") is not None:
        verdict = _llamacpp_verdict()
        if verdict is not None:
            pytest.fail(f"llama.cpp cannot run on this machine: {verdict}", pytrace=False)


@pytest.fixture(scope="session")
def embedder():
    """The real all-MiniLM-L6-v2 embedder, shared by the whole session."""
    from memkit.models.chat import embeddings

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


@contextlib.contextmanager
def _serve(cmd: list[str], ready: str | int, *, what: str, timeout: float = 120,
           log: Path | None = None, **popen: object):
    """Run a real server process until the block ends.

    Args:
        cmd: the command line; ``popen`` goes to ``subprocess.Popen`` (env, cwd).
        ready: a URL that must answer an HTTP GET, or a port on 127.0.0.1 that must
            accept a TCP connection, before the block starts.
        what: the server's name in failure messages.
        timeout: seconds to wait for ``ready``.
        log: file for the server's stdout and stderr (its tail goes into failures).

    Yields the ``Popen``; fails the test when the process exits or is not ready in time.
    """
    import socket
    import subprocess
    import time
    import urllib.request

    out = log.open("wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, **popen)

    def tail() -> str:
        return log.read_text(errors="replace")[-3000:] if log else ""

    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{what} exited with {proc.returncode}: {tail()}")
            try:
                if isinstance(ready, int):
                    socket.create_connection(("127.0.0.1", ready), timeout=1).close()
                else:
                    urllib.request.urlopen(ready, timeout=2).close()
                break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{what} was not ready within {timeout:.0f} s: {tail()}")
            time.sleep(0.5)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log:
            out.close()


@pytest.fixture(scope="session")
def serve():
    """:func:`_serve`: a context manager that runs a real server process for a block."""
    return _serve


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1 serving gemma3-270m.

    Yields the ``base_url`` (``http://127.0.0.1:PORT/v1``); the model alias is ``gemma``.
    The server is a real subprocess, started once per session and stopped at the end.
    """
    import sys

    from memkit.models.chat import resolve_gguf

    port = _free_port()
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(resolve_gguf("gemma3-270m")),
        "--model_alias", "gemma", "--chat_format", "gemma",
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--seed", "0", "--verbose", "False",
    ]
    base = f"http://127.0.0.1:{port}/v1"
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    with _serve(cmd, base + "/models", what="llama_cpp.server", log=log):
        yield base
