"""The memory graphs (graphs/memory.py, graphs/nodes.py, graphs/prompts.py) on real parts:
a real chromadb store, real all-MiniLM-L6-v2, a real LongMemEval instance (6b168ec8,
"How many bikes do I own?" -> "three"; one session of 12 turns, user turns at the
even positions 0, 2, ..., 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from graphs.memory import (
    build_read_graph,
    build_write_graph,
    respond,
    retrieve,
    write_session,
    write_sessions,
)
from graphs.nodes import (
    ChatResponder,
    ChatSummarizer,
    ExtractiveResponder,
    ExtractiveSummarizer,
    SummaryItem,
    attribute_sources,
    make_responder,
    make_summarizer,
    tiers_for,
    user_turn_chunks,
)
from graphs.prompts import parse_fact_lines, parse_summary
from memkit.models.extractive import ExtractiveChatModel, split_sentences
from memkit.store.tiered import Chunk, TieredMemoryStore

REPO = Path(__file__).resolve().parents[1]
QUESTION = "How many bikes do I own?"
THREE_BIKES = (
    "By the way, speaking of my bikes, I've got three of them - a road bike, a mountain bike, "
    "and a commuter bike - and I've been using them for different types of rides."
)


@pytest.fixture(scope="module")
def instance(sample_path):
    """Instance 6b168ec8, through memkit.dataset.longmemeval.load when it exists, else plain json."""
    try:
        from memkit.dataset.longmemeval import load
    except ImportError:
        data = json.loads(sample_path.read_text())
        return next(x for x in data if x["question_id"] == "6b168ec8")
    return next(x for x in load(sample_path) if x.question_id == "6b168ec8").to_dict()


@pytest.fixture(scope="module")
def session(instance):
    return (instance["haystack_session_ids"][0], instance["haystack_dates"][0],
            instance["haystack_sessions"][0])


@pytest.fixture()
def store() -> TieredMemoryStore:
    return TieredMemoryStore(collection=f"t{uuid.uuid4().hex[:12]}")


def _user_texts(turns) -> list[str]:
    return [t["content"] for t in turns if t["role"] == "user"]


# --------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("S", [0, 1, 2])
def test_write_read_extractive_end_to_end(store, session, S) -> None:
    sid, date, turns = session
    users = _user_texts(turns)
    out = write_session(store, "u1", sid, date, turns, S, make_summarizer("extractive"))
    raw = store.get(out["raw_ids"])
    assert [c.text for c in raw] == users
    assert [c.turn_index for c in raw] == [0, 2, 4, 6, 8, 10]
    assert {(c.tier, c.namespace, c.session_id, c.date) for c in raw} == {("raw", "u1", sid, date)}
    summaries = store.get(out["summary_ids"])
    if S == 0:
        assert summaries == []
    elif S == 1:
        # 9 self-disclosing sentences (listed by hand in tests/test_extractive.py)
        assert len(summaries) == 9
        three = next(c for c in summaries if c.text == THREE_BIKES)
        assert three.source_ids == [raw[2].id]  # the third user turn says it
        for c in summaries:  # every fact is a sentence of the turns it cites
            assert c.source_ids and all(c.text in store.get([s])[0].text for s in c.source_ids)
    else:
        assert len(summaries) == 1
        assert summaries[0].text in {s for u in users for s in split_sentences(u)}
        assert summaries[0].source_ids == [c.id for c in raw]
    assert all(c.tier == "summary" and c.turn_index == -1 for c in summaries)

    state = build_read_graph(store).invoke({"query": QUESTION, "k": 3, "namespace": "u1", "S": S})
    got = state["chunks"]
    assert 1 <= len(got) <= 3
    assert {c.tier for c in got} == set(tiers_for(S))
    assert [c.score for c in got] == sorted((c.score for c in got), reverse=True)
    if S < 2:  # the answer ("three") is exposed at S=0 and S=1
        assert "three" in state["response"].lower()
    else:  # S=2 keeps one sentence: the response is drawn from it
        assert set(split_sentences(state["response"])) <= set(split_sentences(got[0].text))


def test_graphs_equal_plain_functions(store, session) -> None:
    sid, date, turns = session
    plain = write_session(store, "plain", sid, date, turns, 1, make_summarizer("extractive"))
    graph = build_write_graph(store).invoke(
        {"namespace": "graph", "session_id": sid, "date": date, "turns": turns, "S": 1})
    for key in ("raw_ids", "summary_ids"):
        a, b = store.get(plain[key]), store.get(graph[key])
        assert [c.text for c in a] == [c.text for c in b]
        assert [len(c.source_ids) for c in a] == [len(c.source_ids) for c in b]

    state = build_read_graph(store).invoke({"query": QUESTION, "k": 3, "namespace": "plain", "S": 1})
    chunks = retrieve(store, QUESTION, 3, ("summary",), "plain")
    assert [c.id for c in state["chunks"]] == [c.id for c in chunks]
    assert state["response"] == respond(ExtractiveResponder(), QUESTION, chunks)

    # the sweep retrieves once at the largest k and responds on k-prefixes
    wide = retrieve(store, QUESTION, 6, ("summary",), "plain")
    assert [c.id for c in wide[:3]] == [c.id for c in chunks]
    assert respond(make_responder("extractive"), QUESTION, wide[:3]) == state["response"]


def test_chat_route_equals_direct_extractive(store, session) -> None:
    """ExtractiveChatModel through the prompts == the direct extractive nodes (S=1, S=2, respond)."""
    sid, date, turns = session
    model = ExtractiveChatModel()
    for S in (1, 2):
        direct = write_session(store, f"direct{S}", sid, date, turns, S, make_summarizer("extractive"))
        chat_summarizer = make_summarizer(model)
        assert isinstance(chat_summarizer, ChatSummarizer)
        chat = write_session(store, f"chat{S}", sid, date, turns, S, chat_summarizer)
        assert chat_summarizer.calls == 1  # one LLM call per session
        a, b = store.get(direct["summary_ids"]), store.get(chat["summary_ids"])
        assert [c.text for c in a] == [c.text for c in b]
        assert [[store.get([s])[0].turn_index for s in c.source_ids] for c in a] == \
               [[store.get([s])[0].turn_index for s in c.source_ids] for c in b]
    chunks = retrieve(store, QUESTION, 4, ("raw",), "direct1")
    chat_responder = make_responder(model)
    assert isinstance(chat_responder, ChatResponder)
    assert chat_responder(QUESTION, chunks) == ExtractiveResponder()(QUESTION, chunks)
    assert chat_responder.calls == 1


# --------------------------------------------------------------------------- swapping nodes


def test_user_written_summarizer_retriever_responder(store, session) -> None:
    sid, date, turns = session

    def shout(chunks: list[Chunk], S: int, prior: list[str] | None) -> list[SummaryItem]:
        """A user's summarizer: the first 5 words of each turn mentioning a lock, upper-cased."""
        return [SummaryItem(" ".join(c.text.split()[:5]).upper(), [c.id])
                for c in chunks if "lock" in c.text]

    out = build_write_graph(store, summarizer=shout).invoke(
        {"namespace": "me", "session_id": sid, "date": date, "turns": turns, "S": 1})
    stored = store.chunks(namespace="me", tiers=["summary"])
    # by hand: user turns 4, 5 and 6 mention a lock (turn indices 6, 8, 10)
    assert sorted(c.text for c in stored) == sorted([
        "I'VE BEEN THINKING ABOUT GETTING", "I'M THINKING OF GETTING A", "I'VE GOT IT! I THINK"])
    assert sorted(out["summary_ids"]) == sorted(c.id for c in stored)
    raw_by_id = {c.id: c for c in store.chunks(namespace="me", tiers=["raw"])}
    assert sorted(raw_by_id[c.source_ids[0]].turn_index for c in stored) == [6, 8, 10]
    derived = store.derived_from([c.source_ids[0] for c in stored], namespace="me")
    assert sorted(c.id for c in derived) == sorted(out["summary_ids"])

    seen: list[tuple] = []

    def my_retriever(query, k, tiers, namespace):
        seen.append((query, k, tuple(tiers), namespace))
        return stored[:k]

    state = build_read_graph(store, retriever=my_retriever,
                             responder=lambda q, cs: f"{q} | " + " / ".join(c.text for c in cs)).invoke(
        {"query": "locks?", "k": 2, "namespace": "me", "S": 1})
    assert seen == [("locks?", 2, ("summary",), "me")]
    assert state["response"] == "locks? | " + " / ".join(c.text for c in stored[:2])


def test_bad_inputs_raise_clear_errors(store, session) -> None:
    sid, date, turns = session
    with pytest.raises(ValueError, match="summary level S must be one of"):
        write_session(store, "x", sid, date, turns, 3)
    with pytest.raises(ValueError, match="cites source ids"):
        write_session(store, "x", sid, date, turns, 1, lambda c, S, p: [SummaryItem("fact", ["nope"])])
    with pytest.raises(ValueError, match="turn 1: needs string 'role' and 'content'"):
        user_turn_chunks("x", sid, date, [{"role": "user", "content": "hi"}, {"role": "user"}])
    with pytest.raises(ValueError, match="missing 'query'"):
        build_read_graph(store).invoke({"k": 1})
    with pytest.raises(ValueError, match="tiers must be a non-empty subset"):
        retrieve(store, "q", 1, ("archive",), None)
    with pytest.raises(TypeError, match="spec string or a LangChain BaseChatModel"):
        make_summarizer(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- parts


def test_attribute_sources_by_containment_then_embedding(embedder) -> None:
    chunks = [
        Chunk(id="a", text="I adopted a golden retriever puppy named Max last week.", tier="raw",
              namespace="n", session_id="s", turn_index=0),
        Chunk(id="b", text="My sister lives in Toronto and works as a nurse. I visit her.", tier="raw",
              namespace="n", session_id="s", turn_index=2),
        Chunk(id="c", text="I'm learning to play the cello. I visit her.", tier="raw",
              namespace="n", session_id="s", turn_index=4),
    ]
    facts = ["The user has a dog called Max.", "the user's sister is a nurse in Toronto.",
             "i visit  HER.", "The user is learning the cello."]
    assert attribute_sources(facts, chunks, embedder=embedder) == [["a"], ["b"], ["b", "c"], ["c"]]
    assert attribute_sources(facts, [], embedder=embedder) == [[], [], [], []]


def test_parse_llm_outputs() -> None:
    text = ("Here are the key facts about the user:\n1. The user has three bikes.\n"
            "2) **Owns a Trek Emonda.**\n- Likes long rides\n* Likes long rides\n"
            "\u2022 Plans to buy wheels.\n(3) Was born in 1990.\n\nNONE\n10. Lives in Oslo.")
    assert parse_fact_lines(text) == [
        "The user has three bikes.", "Owns a Trek Emonda.", "Likes long rides",
        "Plans to buy wheels.", "Was born in 1990.", "Lives in Oslo."]
    assert parse_fact_lines("NONE") == [] and parse_fact_lines("No personal facts.") == []
    assert parse_fact_lines("3.5 hours of sleep is my usual.") == ["3.5 hours of sleep is my usual."]
    assert parse_summary("Summary:\n\n- The user owns three bikes and plans a ride.\n") == \
        "The user owns three bikes and plans a ride."
    assert parse_summary("") is None


def test_extractive_summarizer_levels(session) -> None:
    sid, date, turns = session
    raw = user_turn_chunks("n", sid, date, turns)
    summarize = ExtractiveSummarizer()
    assert summarize(raw, 0, None) == []
    assert summarize([], 1, None) == []
    # rolling: with a prior and no raw turns left the prior facts are carried
    assert summarize([], 1, ["I keep my bike in the garage."]) == [
        SummaryItem("I keep my bike in the garage.", [])]


def test_langgraph_json_factories(tmp_path) -> None:
    """langgraph.json points at module-level async factories (LangGraph servers await them
    on their event loop); importing the modules creates no file and loads no model; each
    factory returns a compiled graph over a persistent store."""
    config = json.loads((REPO / "langgraph.json").read_text())
    assert set(config["graphs"]) == {"memory_write", "memory_read", "forget"}
    specs = {name: spec.removeprefix("./").split(":") for name, spec in config["graphs"].items()}
    code = f"""
import importlib, os, sys
from pathlib import Path
root = Path(os.environ["MEMKIT_CACHE_DIR"]).parent
specs = {specs!r}
mods = {{n: importlib.import_module(p[:-3].replace("/", ".")) for n, (p, _) in specs.items()}}
import memkit.models.chat
assert memkit.models.chat.embeddings.cache_info().currsize == 0, "a model was loaded at import"
assert sorted(p.name for p in root.iterdir()) == [], "import created files"
import asyncio, inspect
factories = {{n: getattr(mods[n], a) for n, (_, a) in specs.items()}}
assert all(inspect.iscoroutinefunction(f) for f in factories.values()), "factories must be async"
async def build():
    return {{n: await f() for n, f in factories.items()}}
graphs = asyncio.run(build())
for n, g in graphs.items():
    print(n, type(g).__name__, sorted(g.get_graph().nodes))
print(sorted(p.name for p in root.iterdir()))
"""
    root = tmp_path / "root"
    root.mkdir()
    env = {**os.environ, "MEMKIT_CACHE_DIR": str(root / "cache"),
           "MEMKIT_STORE_DIR": str(root / "store"), "MEMKIT_LLM_CACHE": str(root / "llm.sqlite")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("memory_write CompiledStateGraph") and "'summarize'" in lines[0]
    assert lines[1].startswith("memory_read CompiledStateGraph") and "'respond'" in lines[1]
    assert lines[2].startswith("forget CompiledStateGraph") and "'tombstone'" in lines[2]
    assert "'llm.sqlite'" in lines[3] and "'store'" in lines[3]


def test_turn_objects_from_the_loader(sample_path, session) -> None:
    """memkit.dataset.longmemeval.Turn objects give the same raw chunks as the JSON dicts."""
    from memkit.dataset.longmemeval import load

    inst = next(x for x in load(sample_path) if x.question_id == "6b168ec8")
    sid, date, turns = session
    from_objects = user_turn_chunks("n", sid, date, inst.haystack_sessions[0])
    from_dicts = user_turn_chunks("n", sid, date, turns)
    assert [(c.id, c.text, c.turn_index) for c in from_objects] == \
        [(c.id, c.text, c.turn_index) for c in from_dicts]
    assert len(from_objects) == 6


# --------------------------------------------------------------------------- batched writes


@pytest.mark.parametrize("S", [0, 1, 2])
def test_write_sessions_equals_one_invoke_per_session(sample_path, S) -> None:
    """write_sessions (one invocation with every session: one embedding batch, one
    upsert) stores what invoking the graph once per session stores, and the embedder
    sees every user turn in one call."""
    from memkit.dataset.longmemeval import load
    from memkit.models.chat import MiniLMEmbeddings

    inst = next(x for x in load(sample_path) if x.question_id == "06db6396")  # 2 sessions of 12 turns
    sessions = list(inst.sessions())
    users = [t.content for _, _, turns in sessions for t in turns if t.role == "user" and t.content.strip()]
    assert len(sessions) == 2 and len(users) == 12

    emb = MiniLMEmbeddings()
    batches: list[list[str]] = []
    encode = emb.model.encode
    emb.model.encode = lambda texts, **kw: (batches.append(list(texts)), encode(texts, **kw))[1]
    batched = TieredMemoryStore(collection=f"t{uuid.uuid4().hex[:12]}", embedder=emb)
    one_by_one = TieredMemoryStore(collection=f"t{uuid.uuid4().hex[:12]}")
    try:
        outs = write_sessions(build_write_graph(batched), "u", sessions, S)
        assert sorted(batches[0]) == sorted(set(users))  # every user turn in the first call
        assert not set(users) & {t for b in batches[1:] for t in b}  # and never again
        graph = build_write_graph(one_by_one)
        refs = [graph.invoke({"namespace": "u", "session_id": sid, "date": date,
                              "turns": [t.to_dict() for t in turns], "S": S}) for sid, date, turns in sessions]
        assert [o["session_id"] for o in outs] == [sid for sid, _, _ in sessions]
        for out, ref in zip(outs, refs, strict=True):
            assert out["raw_ids"] == ref["raw_ids"]  # ids hash namespace, session, turn and text
            assert len(out["raw_ids"]) == 6 and (len(out["summary_ids"]) > 0) == (S > 0)
            for key in ("raw_ids", "summary_ids"):
                a, b = batched.get(out[key]), one_by_one.get(ref[key])
                assert [(c.tier, c.text, c.source_ids, c.date) for c in a] == [(c.tier, c.text, c.source_ids, c.date) for c in b], key
        assert batched.count() == one_by_one.count() == 12 + sum(len(o["summary_ids"]) for o in outs)
        for tiers in (("raw",), ("summary",)):
            hits = batched.search(QUESTION, k=5, tiers=tiers, namespace="u")
            ref_hits = one_by_one.search(QUESTION, k=5, tiers=tiers, namespace="u")
            assert [(c.id, c.score) for c in hits] == [(c.id, c.score) for c in ref_hits]
    finally:
        batched.close()
        one_by_one.close()


def test_batched_write_input_errors_and_repeats(store, session) -> None:
    """A repeated session keeps one copy of each chunk (as two invocations would); a
    malformed batch names the session; sessions and a single session together are refused."""
    sid, date, turns = session
    graph = build_write_graph(store)
    out = graph.invoke({"namespace": "u", "S": 0, "sessions": [{"session_id": sid, "date": date, "turns": turns}] * 2})
    assert out["by_session"][0]["raw_ids"] == out["by_session"][1]["raw_ids"]
    assert store.count() == 6
    with pytest.raises(ValueError, match=r"sessions\[1\] needs 'session_id' and 'turns'"):
        graph.invoke({"namespace": "u", "S": 0, "sessions": [{"session_id": sid, "turns": turns}, {"date": date}]})
    with pytest.raises(ValueError, match="not both"):
        graph.invoke({"namespace": "u", "S": 0, "session_id": sid, "turns": turns, "sessions": []})
    with pytest.raises(ValueError, match=r"session 'b' turn 0"):
        graph.invoke({"namespace": "u", "S": 0, "sessions": [{"session_id": "b", "turns": [{"role": "user"}]}]})
    assert write_sessions(graph, "u", [], 0) == []
