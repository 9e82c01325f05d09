"""MemkitStore (memkit/store/langgraph.py) against LangGraph's InMemoryStore as the oracle.

langgraph 1.2 ships no store conformance suite, so the same random operation
sequences run against ``InMemoryStore`` (with the same MiniLM embedder as its index)
and ``MemkitStore``, and every result is compared. Documented differences are
accounted for explicitly: InMemoryStore keeps a namespace listed after its last item
is deleted or after a mere ``get`` (pruned before comparing ``list_namespaces``); the
order of unranked results is compared as sets (InMemoryStore orders namespaces by
first touch, including reads). Everything else -- values, keys, namespaces, scores,
ranking, filters, prefixes, limit/offset, reads-before-writes inside one batch,
last-put-wins -- must match.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from memkit.store.langgraph import MemkitStore, item_chunk_id, namespace_key
from memkit.store.tiered import Chunk, TieredMemoryStore

# Labels that look like wildcards or separators are literal in a search prefix.
NAMESPACES = [("a",), ("a", "x"), ("a", "y"), ("b",), ("b", "x", "z"), ("*",), ("*", "x"), ("_",),
              ("\u00fc", "\u5b57")]
PREFIXES = [(), ("a",), ("a", "x"), ("b",), ("b", "x"), ("c",), ("*",), ("*", "x"), ("_",),
            ("\u00fc",)]
SENTENCES = [
    "I adopted a grey cat named Pixel last spring.",
    "My favourite food is spicy ramen with extra garlic.",
    "We are planning a hiking trip to the Dolomites.",
    "The quarterly tax report is due next Friday.",
    "Python is my main programming language at work.",
    "My sister plays the cello in a string quartet.",
]
QUERIES = ["what pet do I have?", "tell me about programming", "travel plans", "music"]
FILTERS = [
    None,
    {"tag": "red"},
    {"n": {"$gte": 3}},
    {"meta": {"lang": "en"}},
    {"n": {"$ne": 2}, "tag": "blue"},
    {"n": {"$gt": 1, "$lte": 4}},
    {"missing": 1},                       # a field no item has
    {"meta": {"lang": "fr"}},             # a field only some items have
    {"missing": {"$ne": 1}},
]


def _ident(item) -> tuple:
    return (tuple(item.namespace), item.key, json.dumps(item.value, sort_keys=True))


@pytest.fixture(scope="module")
def pair_factory(embedder):
    made: list[MemkitStore] = []

    def make() -> tuple[InMemoryStore, MemkitStore]:
        oracle = InMemoryStore(index={"dims": 384, "embed": embedder, "fields": ["text"]})
        store = MemkitStore(TieredMemoryStore(embedder=embedder), index={"fields": ["text"], "dims": 384})
        made.append(store)
        return oracle, store

    yield make
    for s in made:
        s.close()


# --------------------------------------------------------------------------- random ops


@st.composite
def value_for(draw, ns: tuple[str, ...], key: str) -> dict:
    value = {
        "text": f"{draw(st.sampled_from(SENTENCES))} [{'/'.join(ns)}:{key}]",
        "n": draw(st.integers(0, 5)),
        "tag": draw(st.sampled_from(["red", "blue"])),
    }
    if draw(st.booleans()):
        value["meta"] = {"lang": draw(st.sampled_from(["en", "fr"]))}
    return value


@st.composite
def put_op(draw) -> PutOp:
    ns = draw(st.sampled_from(NAMESPACES))
    # "u1" is always written unindexed: InMemoryStore keeps an item's old vectors when
    # it is re-put with index=False (a quirk we do not mirror), so keys never switch.
    key = draw(st.sampled_from(["k1", "k2", "u1"]))
    if draw(st.integers(0, 4)) == 0:
        return PutOp(ns, key, None)
    return PutOp(ns, key, draw(value_for(ns, key)), index=False if key == "u1" else None)


@st.composite
def read_op(draw):
    kind = draw(st.sampled_from(["get", "search", "search"]))
    if kind == "get":
        return GetOp(draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from(["k1", "k2", "u1", "zz"])))
    return SearchOp(
        namespace_prefix=draw(st.sampled_from(PREFIXES)),
        filter=draw(st.sampled_from(FILTERS)),
        limit=draw(st.integers(1, 6)),
        offset=draw(st.integers(0, 3)),
        query=draw(st.one_of(st.none(), st.sampled_from(QUERIES))),
    )


@st.composite
def list_op(draw) -> ListNamespacesOp:
    conds = draw(st.sampled_from([
        (), (MatchCondition("prefix", ("a",)),), (MatchCondition("suffix", ("x",)),),
        (MatchCondition("prefix", ("*", "x")),), (MatchCondition("prefix", ("b",)), MatchCondition("suffix", ("z",))),
    ]))
    return ListNamespacesOp(
        match_conditions=conds, max_depth=draw(st.sampled_from([None, 1, 2])),
        limit=draw(st.integers(1, 10)), offset=draw(st.integers(0, 2)),
    )


batches = st.lists(
    st.one_of(
        st.lists(st.one_of(put_op(), read_op()), min_size=1, max_size=4),
        list_op().map(lambda op: [op]),
    ),
    min_size=3,
    max_size=12,
)


def _prune(oracle: InMemoryStore) -> None:
    """Drop namespaces InMemoryStore lists although they hold no item."""
    for ns in [ns for ns, items in oracle._data.items() if not items]:
        del oracle._data[ns]


def _all_candidates(oracle: InMemoryStore, op: SearchOp) -> list:
    full = oracle.batch([op._replace(limit=1000, offset=0, query=None)])[0]
    return full


def _compare(op, got, want, every_items: list | None) -> None:
    if isinstance(op, PutOp):
        assert got is None and want is None
    elif isinstance(op, GetOp):
        assert (got is None) == (want is None), op
        if got is not None:
            assert _ident(got) == _ident(want)
    elif isinstance(op, ListNamespacesOp):
        assert got == want, op
    else:
        assert len(got) == len(want), (op, [_ident(r) for r in got], [_ident(r) for r in want])
        assert every_items is not None
        every = {_ident(r) for r in every_items}
        assert {_ident(r) for r in got} <= every, op
        if op.query:
            g_scored = [r for r in got if r.score is not None]
            w_scored = [r for r in want if r.score is not None]
            assert [_ident(r) for r in g_scored] == [_ident(r) for r in w_scored], op
            np.testing.assert_allclose([r.score for r in g_scored], [r.score for r in w_scored], atol=1e-4)
            g_rest = [r for r in got if r.score is None]
            w_rest = [r for r in want if r.score is None]
            unranked = [r for r in every_items if r.key == "u1"]
            if len(unranked) <= op.limit - len(w_scored):
                assert {_ident(r) for r in g_rest} == {_ident(r) for r in w_rest}
            assert all(r.key == "u1" for r in g_rest)
        elif op.offset == 0 and op.limit >= len(every):
            assert {_ident(r) for r in got} == every
        for r in got:
            assert r.namespace[: len(op.namespace_prefix)] == tuple(op.namespace_prefix)


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches)
def test_same_results_as_in_memory_store(pair_factory, seq):
    oracle, store = pair_factory()
    for batch in seq:
        if isinstance(batch[0], ListNamespacesOp):
            _prune(oracle)
        # what each search could return: the oracle's state *before* the batch
        every = [_all_candidates(oracle, op) if isinstance(op, SearchOp) else None for op in batch]
        got = store.batch(batch)
        want = oracle.batch(batch)
        assert len(got) == len(batch)
        for op, g, w, e in zip(batch, got, want, every, strict=True):
            _compare(op, g, w, e)
    # final state: every item, same values
    final = SearchOp((), limit=1000)
    assert {_ident(r) for r in store.batch([final])[0]} == {_ident(r) for r in oracle.batch([final])[0]}


# --------------------------------------------------------------------------- fixed cases


@pytest.fixture
def store(embedder):
    s = MemkitStore(TieredMemoryStore(embedder=embedder), index={"fields": ["text"]})
    yield s
    s.close()


def test_reads_in_a_batch_see_the_state_before_its_puts(store, embedder):
    oracle = InMemoryStore(index={"dims": 384, "embed": embedder, "fields": ["text"]})
    ops = [
        PutOp(("u",), "a", {"text": "first"}),
        GetOp(("u",), "a"),
        PutOp(("u",), "a", {"text": "second"}),
        SearchOp(("u",), query="first"),
    ]
    for s in (store, oracle):
        res = s.batch(ops)
        assert res == [None, None, None, []]
        assert s.get(("u",), "a").value == {"text": "second"}  # last put wins


def test_unindexed_items_fill_a_short_ranking_as_in_memory_store(store, embedder):
    oracle = InMemoryStore(index={"dims": 384, "embed": embedder, "fields": ["text"]})
    for s in (store, oracle):
        s.put(("f",), "ranked", {"text": "my cat sleeps all day"})
        for i in range(3):
            s.put(("f",), f"plain{i}", {"text": f"unindexed {i}"}, index=False)
    for limit, offset in [(2, 0), (4, 0), (10, 0), (2, 1)]:
        got = store.search(("f",), query="cat", limit=limit, offset=offset)
        want = oracle.search(("f",), query="cat", limit=limit, offset=offset)
        assert [(r.key, r.score is None) for r in got] == [(r.key, r.score is None) for r in want]
    # by hand: one ranked item, then unindexed ones up to the limit (offset skips ranked only)
    assert [r.key for r in store.search(("f",), query="cat", limit=2)] == ["ranked", "plain0"]
    assert [r.key for r in store.search(("f",), query="cat", limit=2, offset=1)] == ["plain0", "plain1"]


def test_put_get_delete_and_timestamps(store):
    store.put(("users", "alice"), "prefs", {"text": "likes tea", "n": 1})
    item = store.get(("users", "alice"), "prefs")
    assert item.value == {"text": "likes tea", "n": 1}
    assert item.namespace == ("users", "alice") and item.key == "prefs"
    assert item.created_at == item.updated_at
    store.put(("users", "alice"), "prefs", {"text": "likes coffee", "n": 2})
    again = store.get(("users", "alice"), "prefs")
    assert again.value == {"text": "likes coffee", "n": 2}
    assert again.created_at == item.created_at and again.updated_at > item.updated_at
    store.delete(("users", "alice"), "prefs")
    assert store.get(("users", "alice"), "prefs") is None
    assert store.list_namespaces() == []


def test_chunk_layout_tiers_and_index_fields(embedder):
    ts = TieredMemoryStore(embedder=embedder)
    s = MemkitStore(ts, index={"fields": ["content"]}, tiers={("memories", "*", "facts"): "summary"})
    s.put(("memories", "alice"), "t1", {"content": "I live in Lyon.", "date": "2023/05/01"})
    s.put(("memories", "alice", "facts"), "f1", {"content": "The user lives in Lyon."})
    s.put(("memories", "alice"), "t2", {"content": "ignored", "other": 1}, index=["other"])
    s.put(("memories", "alice"), "t3", {"content": "not embedded"}, index=False)
    by_key = {c.extra["lg_key"]: c for c in ts.chunks()}
    assert by_key["t1"].namespace == "memories.alice" and by_key["t1"].tier == "raw"
    assert by_key["t1"].text == "I live in Lyon."
    assert by_key["t1"].id == item_chunk_id(("memories", "alice"), "t1")
    assert json.loads(by_key["t1"].extra["lg_value"]) == {"content": "I live in Lyon.", "date": "2023/05/01"}
    assert by_key["f1"].tier == "summary" and by_key["f1"].namespace == "memories.alice.facts"
    assert by_key["t2"].text == "1"  # the per-put index override: field "other"
    assert by_key["t3"].text == '{"content": "not embedded"}' and by_key["t3"].extra["lg_indexed"] is False
    # stored vector is the MiniLM embedding of the chunk text
    vec = ts.embeddings_of([by_key["t1"].id])[0]
    np.testing.assert_allclose(vec, embedder.encode(["I live in Lyon."])[0], atol=1e-5)
    # ranked items first (by cosine), then the unindexed one with score None
    res = s.search(("memories", "alice"), query="Where do I live?", limit=10)
    assert [r.key for r in res][-1] == "t3" and res[-1].score is None
    scored = [r for r in res if r.score is not None]
    texts = {"t1": "I live in Lyon.", "f1": "The user lives in Lyon.", "t2": "1"}
    q = embedder.encode(["Where do I live?"])[0]
    expect = sorted(texts, key=lambda k: -float(embedder.encode([texts[k]])[0] @ q))
    assert [r.key for r in scored] == expect
    s.close()


def test_restrict_tiers_limits_get_and_search(embedder):
    s = MemkitStore(TieredMemoryStore(embedder=embedder), index={"fields": ["content"]},
                    tiers={("m", "*", "facts"): "summary"})
    s.put(("m", "u"), "raw1", {"content": "my token is AB1-RUBY-1234"})
    s.put(("m", "u", "facts"), "fact1", {"content": "the user's token is AB1-RUBY-1234"})
    with s.restrict_tiers(("summary",)):
        assert [r.key for r in s.search(("m",), query="token")] == ["fact1"]
        assert s.get(("m", "u"), "raw1") is None
    with s.restrict_tiers(("raw",)):
        assert [r.key for r in s.search(("m",), query="token")] == ["raw1"]
    assert {r.key for r in s.search(("m",), query="token")} == {"raw1", "fact1"}
    assert s.read_tiers == ("raw", "summary")
    with pytest.raises(ValueError, match="tiers must be"):
        with s.restrict_tiers(("archive",)):
            pass
    s.close()


def test_prefix_search_is_label_wise_not_string_prefix(store):
    store.put(("memories", "alice"), "a", {"text": "alice's secret"})
    store.put(("memories", "alice2"), "b", {"text": "alice2's secret"})
    store.put(("memories", "alice", "deep"), "c", {"text": "deeper"})
    assert {r.key for r in store.search(("memories", "alice"), query="secret")} == {"a", "c"}
    assert {r.key for r in store.search(("memories", "alice"))} == {"a", "c"}
    assert store.list_namespaces(prefix=("memories", "alice")) == [("memories", "alice"), ("memories", "alice", "deep")]


def test_pagination_without_query_partitions_the_results(store):
    for i in range(7):
        store.put(("p", str(i % 2)), f"k{i}", {"text": f"item {i}", "i": i})
    full = store.search(("p",), limit=100)
    assert len(full) == 7
    pages = [r for off in range(0, 7, 3) for r in store.search(("p",), limit=3, offset=off)]
    assert [r.key for r in pages] == [r.key for r in full]
    # insertion order: namespace of the oldest item first, then creation order
    assert [r.key for r in full] == ["k0", "k2", "k4", "k6", "k1", "k3", "k5"]
    assert [r.key for r in store.search(("p",), filter={"i": {"$lt": 3}})] == ["k0", "k2", "k1"]


def test_ignores_memkit_chunks_that_are_not_items(embedder):
    ts = TieredMemoryStore(embedder=embedder)
    ts.add([Chunk(id="raw-x", text="a raw turn written by write_session", tier="raw",
                  namespace="q1", session_id="s1", turn_index=0)])
    s = MemkitStore(ts)
    s.put(("n",), "k", {"text": "an item"})
    assert s.list_namespaces() == [("n",)]
    assert [r.key for r in s.search((), query="raw turn")] == ["k"]
    s.close()


def test_persistent_store_survives_reopen(tmp_path, embedder):
    s = MemkitStore(TieredMemoryStore(tmp_path / "db", embedder=embedder))
    s.put(("users", "bob"), "k", {"text": "bob likes jazz", "n": 3})
    s.close()
    s2 = MemkitStore(TieredMemoryStore(tmp_path / "db", embedder=embedder))
    assert s2.get(("users", "bob"), "k").value == {"text": "bob likes jazz", "n": 3}
    assert s2.search(("users",), query="music")[0].key == "k"
    s2.close()


def test_async_methods(store):
    async def go():
        await store.aput(("a",), "k", {"text": "async value"})
        item = await store.aget(("a",), "k")
        found = await store.asearch(("a",), query="async")
        names = await store.alist_namespaces()
        await store.adelete(("a",), "k")
        return item, found, names, await store.aget(("a",), "k")

    item, found, names, gone = asyncio.run(go())
    assert item.value == {"text": "async value"}
    assert [r.key for r in found] == ["k"] and found[0].score > 0.3
    assert names == [("a",)] and gone is None


def test_bad_input_raises_clear_errors(store, embedder):
    with pytest.raises(InvalidNamespaceError, match="periods"):
        store.put(("a.b",), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError, match="empty"):
        store.batch([PutOp((), "k", {"text": "x"})])
    with pytest.raises(TypeError, match=r"value must be a dict"):
        store.batch([PutOp(("a",), "k", ["not", "a", "dict"])])
    with pytest.raises(TypeError, match="JSON-serializable"):
        store.put(("a",), "k", {"when": object()})
    with pytest.raises(ValueError, match="Unsupported operator"):
        store.search(("a",), filter={"n": {"$regex": "x"}})
    with pytest.raises(ValueError, match="Unknown operation"):
        store.batch(["get a"])
    with pytest.raises(ValueError, match="embed"):
        MemkitStore(index={"embed": embedder})
    with pytest.raises(ValueError, match="tier"):
        MemkitStore(tiers={("a",): "archive"})
    with pytest.raises(ValueError, match="dims=10"):
        MemkitStore(TieredMemoryStore(embedder=embedder), index={"dims": 10}).put(("a",), "k", {"x": 1})
    with pytest.raises(NotImplementedError):
        store.put(("a",), "k", {"text": "x"}, ttl=5)
    assert namespace_key(("memories", "alice")) == "memories.alice"


def test_a_langgraph_graph_compiled_with_the_store(store):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    class S(TypedDict):
        text: str
        found: list[str]

    def remember(state: S, runtime: Runtime) -> dict:
        runtime.store.put(("mem", "u1"), "m1", {"text": state["text"]})
        return {}

    def recall(state: S, runtime: Runtime) -> dict:
        return {"found": [i.value["text"] for i in runtime.store.search(("mem", "u1"), query="pet")]}

    g = StateGraph(S)
    g.add_node("remember", remember)
    g.add_node("recall", recall)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    out = g.compile(store=store).invoke({"text": "I have a parrot called Kiwi."})
    assert out["found"] == ["I have a parrot called Kiwi."]
    assert [c.namespace for c in store.tiered.chunks()] == ["mem.u1"]


def test_a_star_user_reads_nothing_of_other_users(embedder):
    """Namespaces are literal: a user whose id is "*" must not read every user's
    memories (InMemoryStore returns only that user's own items)."""
    from memkit.store.tiered import TieredMemoryStore

    store = MemkitStore(TieredMemoryStore(embedder=embedder), index={"fields": ["text"]})
    oracle = InMemoryStore(index={"dims": 384, "embed": embedder, "fields": ["text"]})
    for s in (store, oracle):
        s.put(("memories", "alice"), "m1", {"text": "my token is XQ7-VIOLET-3829"})
        s.put(("memories", "*"), "m1", {"text": "I like tea"})
    for query in (None, "token"):
        mine = store.search(("memories", "*"), query=query)
        assert [i.value for i in mine] == [{"text": "I like tea"}]
        assert [i.value for i in oracle.search(("memories", "*"), query=query)] == [{"text": "I like tea"}]
    # Wildcards still work where LangGraph defines them: list_namespaces match conditions.
    assert sorted(store.list_namespaces(prefix=("memories", "*"))) == sorted(
        oracle.list_namespaces(prefix=("memories", "*")))
    for label in ("", "a.b", "x\x00"):  # labels LangGraph refuses: both refuse alike
        ns = ("memories", label)
        errors = []
        for s in (store, oracle):
            try:
                s.put(ns, "k", {"text": "x"})
                errors.append(None)
            except Exception as exc:  # noqa: BLE001 - compare what each raises
                errors.append(type(exc).__name__)
        assert errors[0] == errors[1], errors
    store.close()
