"""Benchmark: model calls per second with ``--concurrency``, and memkit's
overhead over a real model server.

Part 1 (always): a fake OpenAI-compatible HTTP server on 127.0.0.1 (``tests/fakes.py``;
a fake, named as such, standing for a remote API) answers every request after a fixed
``--latency`` (default 200 ms), serving requests concurrently with a fixed reply (no work per request). memkit's
:func:`memkit.models.chat.answer_many` sends ``--calls`` distinct responder prompts at
concurrency 1, 4 and 16; the benchmark prints calls/s and the speed-up over
concurrency 1 (target: >= 0.8 x N).

Part 2 (``--llamacpp``): llama-cpp-python's own OpenAI-compatible server with the
``gemma3-270m`` GGUF on 127.0.0.1. Each prompt is sent once through memkit
(``answer_many``, ``ChatOpenAI``, retries) and once as a bare HTTP request with
``urllib`` (the server's own time plus a socket); which goes first alternates
per prompt, so the server's prompt cache favours neither. Prints memkit's overhead
over the bare requests (target: <= 10%).

Run: ``python benchmarks/bench_concurrency.py [--calls 32] [--latency 0.2] [--llamacpp]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphs.prompts import respond_prompt  # noqa: E402
from memkit.models.chat import answer_many, chat_model  # noqa: E402
from tests.fakes import FakeOpenAIServer  # noqa: E402


def _prompts(n: int, tag: str = "") -> list:
    return [respond_prompt(f"What is my dog's name{tag}?", [f"My dog is called Rex{i}.", f"I moved to town {i}."])
            for i in range(n)]


def fake_server(calls: int, latency: float, levels: list[int]) -> None:
    with FakeOpenAIServer(latency=latency, reply="Your dog is called Rex.") as server:
        model = chat_model(f"openai:{server.model}", base_url=server.base_url, max_retries=0)
        answer_many(model, _prompts(1, " (warm-up)"))  # the openai client's first-call setup
        print(f"fake OpenAI-compatible server, {latency * 1000:.0f} ms per request, {calls} distinct calls")
        base = None
        for c in levels:
            prompts = _prompts(calls, f" (c={c})")
            t0 = time.perf_counter()
            answer_many(model, prompts, concurrency=c)
            rate = calls / (time.perf_counter() - t0)
            base = base or rate
            print(f"  concurrency {c:3d}: {rate:7.2f} calls/s  speed-up {rate / base:5.2f}x "
                  f"({rate / base / c:.2f} of {c}x; target >= 0.80)  max in flight {server.max_in_flight}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def llamacpp_overhead(calls: int, max_tokens: int) -> None:
    from memkit.models.chat import resolve_gguf

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(resolve_gguf("gemma3-270m")),
         "--host", "127.0.0.1", "--port", str(port), "--model_alias", "gemma", "--n_ctx", "2048",
         "--n_batch", "512", "--verbose", "False"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/models", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("llama_cpp.server did not start") from None
                time.sleep(0.5)
        model = chat_model("openai:gemma", base_url=base, max_tokens=max_tokens, check=False)

        def bare(prompt) -> float:
            messages = [{"role": {"human": "user", "ai": "assistant"}.get(m.type, m.type), "content": m.content}
                        for m in prompt.to_messages()]
            body = json.dumps({"model": "gemma", "messages": messages, "max_tokens": max_tokens,
                               "temperature": 0.0}).encode()
            req = urllib.request.Request(base + "/chat/completions", body, {"Content-Type": "application/json"})
            t0 = time.perf_counter()
            with urllib.request.urlopen(req, timeout=600) as r:
                r.read()
            return time.perf_counter() - t0

        answer_many(model, _prompts(1, " (warm-up)"))
        bare(_prompts(1, " (warm-up 2)")[0])
        t_memkit = t_bare = 0.0
        for i, prompt in enumerate(_prompts(calls, " (llama)")):
            if i % 2 == 0:
                t_bare += bare(prompt)
                t_memkit += answer_many(model, [prompt])[0][1]
            else:
                t_memkit += answer_many(model, [prompt])[0][1]
                t_bare += bare(prompt)
        print(f"llama-cpp-python server (gemma3-270m, max_tokens={max_tokens}), {calls} calls:")
        print(f"  bare HTTP {t_bare:.2f} s, through memkit {t_memkit:.2f} s: "
              f"overhead {100 * (t_memkit / t_bare - 1):+.1f}% (target <= 10%)")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=32, help="distinct calls per concurrency level")
    ap.add_argument("--latency", type=float, default=0.2, help="fake server latency, seconds")
    ap.add_argument("--levels", default="1,4,16", help="concurrency levels, comma-separated")
    ap.add_argument("--llamacpp", action="store_true", help="also measure overhead over llama_cpp.server")
    ap.add_argument("--llama-calls", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    fake_server(args.calls, args.latency, [int(x) for x in args.levels.split(",")])
    if args.llamacpp:
        llamacpp_overhead(args.llama_calls, args.max_tokens)


if __name__ == "__main__":
    main()
