"""The memory graphs on the chat-model backends memkit names (docs/design.md, "Models"):

* ``llamacpp:gemma3-270m`` in process (llama-cpp-python);
* ``openai:<alias>`` against llama-cpp-python's OpenAI-compatible server, started here
  as a subprocess on 127.0.0.1;
* ``ollama:<model>`` against :class:`FakeOllamaServer`, a small HTTP server speaking
  Ollama's ``/api/tags`` and ``/api/chat`` (no Ollama binary can be installed here) that
  answers with memkit's extractive chat model, so its results are known exactly.

At 270M parameters the model's outputs are poor (it mostly echoes the prompt): these
tests assert the pipeline (prompts sent, outputs parsed into stored chunks with valid
provenance, a response, the LLM cache), not the quality. One short session (two user
turns), small ``max_tokens`` and ``n_ctx`` keep each test well under a minute.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from graphs.memory import build_read_graph, write_session
from graphs.nodes import ChatResponder, ChatSummarizer, make_responder, make_summarizer
from memkit.models.extractive import FACTS_MARKER, RESPOND_MARKER, SUMMARY_MARKER
from memkit.store.cache import LLMCache
from memkit.store.tiered import TieredMemoryStore
from tests.fakes import FakeOllamaServer

QUESTION = "How many bikes do I own?"
LLM_KW = {"max_tokens": 32, "temperature": 0.0}


@pytest.fixture(scope="module")
def short_session(sample_path) -> tuple[str, str, list[dict]]:
    """Instance 6b168ec8's session cut to its first two user turns (and one reply)."""
    data = json.loads(sample_path.read_text())
    inst = next(x for x in data if x["question_id"] == "6b168ec8")
    turns = inst["haystack_sessions"][0]
    return inst["haystack_session_ids"][0], inst["haystack_dates"][0], [turns[0], turns[1], turns[2]]


def _pipeline(summarizer: ChatSummarizer, responder: ChatResponder, cache: LLMCache,
              session: tuple[str, str, list[dict]]) -> dict[str, Any]:
    """Write the session at S=1 and S=2, read at S=2; check what the pipeline must guarantee.

    LLM calls: one summarizer call per session and level (2), one responder call (1).
    """
    sid, date, turns = session
    store = TieredMemoryStore(collection=f"b{uuid.uuid4().hex[:10]}")
    out: dict[str, Any] = {"store": store}
    for S in (1, 2):
        ids = write_session(store, f"n{S}", sid, date, turns, S, summarizer)
        raw_ids = ids["raw_ids"]
        assert [c.turn_index for c in store.get(raw_ids)] == [0, 2]
        summaries = store.get(ids["summary_ids"])
        for c in summaries:
            assert c.text.strip() and c.tier == "summary"
            if S == 1:
                assert len(c.source_ids) >= 1 and set(c.source_ids) <= set(raw_ids)
            else:
                assert c.source_ids == raw_ids
        if S == 2:
            assert len(summaries) <= 1
        out[S] = summaries
    assert summarizer.calls == 2
    state = build_read_graph(store, responder=responder).invoke(
        {"query": QUESTION, "k": 2, "namespace": "n2", "S": 2})
    assert isinstance(state["response"], str)
    assert responder.calls == 1
    out["response"] = state["response"]
    # three distinct prompts were sent once each; the same write again is answered by the cache
    assert (cache.misses, cache.hits, len(cache)) == (3, 0, 3)
    write_session(store, "again", sid, date, turns, 2, summarizer)
    assert (cache.misses, cache.hits) == (3, 1)
    return out


# --------------------------------------------------------------------------- llama.cpp in process


@pytest.mark.llm
def test_llamacpp_gemma_pipeline(tmp_path, short_session) -> None:
    pytest.importorskip("llama_cpp")
    from memkit.models.chat import chat_model

    cache = LLMCache(tmp_path / "llm.sqlite")
    model = chat_model("llamacpp:gemma3-270m", n_ctx=2048, n_batch=512, verbose=False, **LLM_KW)
    summarizer, responder = make_summarizer(model, cache=cache), make_responder(model, cache=cache)
    out = _pipeline(summarizer, responder, cache, short_session)
    assert len(out[2]) == 1  # the model said something, parsed into one summary sentence
    assert out["response"]


# --------------------------------------------------------------------------- OpenAI-compatible server


# The llama_server fixture (a real llama_cpp.server on 127.0.0.1) is conftest.py's.


@pytest.mark.llm
def test_openai_client_against_llama_cpp_server(tmp_path, short_session, llama_server) -> None:
    from memkit.models.chat import chat_model

    cache = LLMCache(tmp_path / "llm.sqlite")
    # langchain-openai sends max_tokens as "max_completion_tokens", which llama-cpp-python's
    # server (0.3.x) ignores -- it then generates up to n_ctx; extra_body sends the old name.
    model = chat_model("openai:gemma", base_url=llama_server, api_key="not-needed",
                       extra_body={"max_tokens": LLM_KW["max_tokens"]}, **LLM_KW)
    assert type(model).__name__ == "ChatOpenAI"
    summarizer, responder = make_summarizer(model, cache=cache), make_responder(model, cache=cache)
    out = _pipeline(summarizer, responder, cache, short_session)
    assert len(out[2]) == 1 and out["response"]


# --------------------------------------------------------------------------- fake Ollama
# FakeOllamaServer: tests/fakes.py.


def test_ollama_against_fake_server(tmp_path, short_session) -> None:
    from memkit.models.chat import chat_model

    cache = LLMCache(tmp_path / "llm.sqlite")
    with FakeOllamaServer() as server:
        model = chat_model("ollama:fake-model", base_url=server.base_url)
        assert type(model).__name__ == "ChatOllama"
        summarizer, responder = make_summarizer(model, cache=cache), make_responder(model, cache=cache)
        out = _pipeline(summarizer, responder, cache, short_session)
        # one HTTP request per prompt: the cached repeat never reached the server
        assert len(server.requests) == 3
        systems = [next(m["content"] for m in r["messages"] if m["role"] == "system")
                   for r in server.requests]
        assert [s.split()[0] for s in systems] == [FACTS_MARKER, SUMMARY_MARKER, RESPOND_MARKER]

    # the fake answers like the extractive backend, so the Ollama route must reproduce it
    sid, date, turns = short_session
    reference = TieredMemoryStore(collection=f"r{uuid.uuid4().hex[:10]}")
    for S in (1, 2):
        ids = write_session(reference, "ref", sid, date, turns, S, make_summarizer("extractive"))
        assert [c.text for c in out[S]] == [c.text for c in reference.get(ids["summary_ids"])]
    chunks = out["store"].search(QUESTION, 2, tiers=("summary",), namespace="n2")
    assert out["response"] == make_responder("extractive")(QUESTION, chunks)


def test_fake_ollama_unknown_model_is_an_error(short_session) -> None:
    from memkit.models.chat import chat_model

    with FakeOllamaServer() as server:
        model = chat_model("ollama:other-model", base_url=server.base_url)
        with pytest.raises(Exception, match="not found"):
            make_responder(model)(QUESTION, [])

