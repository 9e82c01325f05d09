"""Fake model servers on 127.0.0.1 (threads), standing for services that cannot run here.

They are fakes, named as such: tests and benchmarks cannot reach OpenAI, a hosted
provider or an Ollama binary. Each answers with
:class:`memkit.models.extractive.ExtractiveChatModel` on the received messages, so the reply
to a prompt is known and deterministic, and keeps every request body.

:class:`FakeOpenAIServer` speaks the two endpoints ``langchain-openai`` uses --
``GET /v1/models`` and ``POST /v1/chat/completions`` (non-streamed). It reports
``usage`` as the provider does: ``prompt_tokens`` = whitespace-separated words of all
message contents, ``completion_tokens`` = words of the reply (a definition a test can
recompute). Options: ``latency`` (seconds each request sleeps, concurrently: a
threading server), ``reply`` (a fixed reply instead of the extractive one: no CPU work
per request, for benchmarks), ``fail_first`` (the first that many requests get
``status`` -- 429 or 5xx -- to exercise retries). Counters: :attr:`requests` (bodies
received, failures included), :attr:`max_in_flight` (most requests handled at once).

:class:`FakeOllamaServer` speaks the two endpoints ``langchain-ollama`` uses.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from memkit.models.extractive import ExtractiveChatModel

__all__ = ["FakeOllamaServer", "FakeOpenAIServer", "words"]


def words(text: str) -> int:
    """Token count the fake reports: whitespace-separated words."""
    return len(text.split())


class _JSONHandler(BaseHTTPRequestHandler):
    """Request handler base: quiet, and :meth:`_json` writes one JSON (or raw) body."""

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _json(self, code: int, payload: Any, content_type: str = "application/json") -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _ThreadedFake:
    """A threading HTTP server on 127.0.0.1:<free port>; a context manager."""

    def _listen(self, handler: type[BaseHTTPRequestHandler]) -> None:
        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self._httpd = Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


class FakeOpenAIServer(_ThreadedFake):
    """A fake OpenAI-compatible server (see the module doc); a context manager.

    Args:
        model: the model id it serves.
        latency: seconds each chat request waits before answering.
        fail_first: how many first chat requests fail with ``status``.
        status: HTTP status of those failures (429: rate limit; 500/503: server error).
        reply: answer every request with this text (``None``: the extractive reply).
    """

    def __init__(self, model: str = "fake-gpt", *, latency: float = 0.0, fail_first: int = 0,
                 status: int = 429, reply: str | None = None) -> None:
        self.model = model
        self.latency = latency
        self.fail_first = fail_first
        self.status = status
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._brain = ExtractiveChatModel()
        server = self

        class Handler(_JSONHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if self.path.rstrip("/") == "/v1/models":
                    self._json(200, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "created": 0, "owned_by": "fake"}]})
                else:
                    self._json(404, {"error": {"message": f"not found: {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if self.path != "/v1/chat/completions":
                    self._json(404, {"error": {"message": f"not found: {self.path}"}})
                    return
                with server._lock:
                    server.requests.append(body)
                    nth = len(server.requests)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.latency:
                        time.sleep(server.latency)
                    if nth <= server.fail_first:
                        self._json(server.status, {"error": {"message": "fake failure",
                                                             "type": "rate_limit_error"}})
                        return
                    messages = _to_messages(body["messages"])
                    try:
                        text = server.reply if server.reply is not None else str(
                            server._brain.invoke(messages).content)
                    except ValueError as exc:  # not one of memkit's prompts
                        self._json(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
                        return
                    prompt_tokens = sum(words(str(m.content)) for m in messages)
                    self._json(200, {
                        "id": f"chatcmpl-{nth}", "object": "chat.completion", "created": 0,
                        "model": server.model,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": words(text),
                                  "total_tokens": prompt_tokens + words(text)},
                    })
                finally:
                    with server._lock:
                        server.in_flight -= 1

        self._listen(Handler)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def chat_requests(self) -> int:
        """Chat requests received so far (failures included)."""
        return len(self.requests)



def _to_messages(raw: list[dict[str, Any]]) -> list[BaseMessage]:
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m["role"]](m.get("content") or "") for m in raw]


class FakeOllamaServer(_ThreadedFake):
    """A fake Ollama server on 127.0.0.1 (a thread), for tests without an Ollama binary.

    It speaks the two endpoints langchain-ollama uses: ``GET /api/tags`` (lists
    ``model``) and ``POST /api/chat`` (streamed NDJSON chunks, or one JSON object when
    ``"stream": false``). Replies come from :class:`memkit.models.extractive.ExtractiveChatModel`
    on the received messages, so a test knows the exact expected output. Every request
    body is kept in :attr:`requests`.
    """

    def __init__(self, model: str = "fake-model") -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._brain = ExtractiveChatModel()
        server = self

        class Handler(_JSONHandler):

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if self.path.rstrip("/") == "/api/tags":
                    self._json(200, {"models": [{
                        "name": f"{server.model}:latest", "model": f"{server.model}:latest",
                        "modified_at": "2025-01-01T00:00:00Z", "size": 1, "digest": "0" * 64,
                        "details": {"format": "gguf", "family": "fake"}}]})
                else:
                    self._json(404, {"error": f"not found: {self.path}"})

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if self.path != "/api/chat":
                    self._json(404, {"error": f"not found: {self.path}"})
                    return
                server.requests.append(body)
                if body.get("model", "").split(":")[0] != server.model:
                    self._json(404, {"error": f"model '{body.get('model')}' not found"})
                    return
                text = server._brain.invoke(_to_messages(body["messages"])).content
                now = "2025-01-01T00:00:00Z"
                done = {"model": body["model"], "created_at": now,
                        "message": {"role": "assistant", "content": ""}, "done": True,
                        "done_reason": "stop", "total_duration": 1, "prompt_eval_count": 1,
                        "eval_count": max(1, len(text.split()))}
                if body.get("stream", True):
                    part = {"model": body["model"], "created_at": now,
                            "message": {"role": "assistant", "content": text}, "done": False}
                    lines = (json.dumps(part) + "\n" + json.dumps(done) + "\n").encode()
                    self._json(200, lines, "application/x-ndjson")
                else:
                    self._json(200, {**done, "message": {"role": "assistant", "content": text}})

        self._listen(Handler)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

