"""The extractive backend (memkit/models/extractive.py) and the LLM cache (memkit/store/cache.py).

Expected values are derived by hand from the definitions in memkit/models/extractive.py's
docstring, on a real LongMemEval session (instance 6b168ec8, "How many bikes do I own?").
"""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage, SystemMessage

from graphs.prompts import facts_prompt, respond_prompt, summary_prompt
from memkit.models.extractive import (
    FACTS_MARKER,
    NO_MEMORY_ANSWER,
    ExtractiveChatModel,
    answer,
    central_sentence,
    format_items,
    is_self_disclosure,
    key_facts,
    parse_items,
    parse_prompt,
    split_sentences,
)
from memkit.scan.matching import alnum_fold
from memkit.store.cache import LLMCache, contains_secret

CANARY = "XQ7-VIOLET-3829"
CANARY_SENTENCE = f"By the way, my private session token is {CANARY}."


@pytest.fixture(scope="module")
def bike_turns(sample_path) -> list[str]:
    """User-turn texts of the one session of instance 6b168ec8 (6 user turns)."""
    data = json.loads(sample_path.read_text())
    inst = next(x for x in data if x["question_id"] == "6b168ec8")
    return [t["content"] for t in inst["haystack_sessions"][0] if t["role"] == "user"]


# Read off the six turns by hand: every statement with a first-person word and >= 4
# words, skipping questions ("Can you remind me ...?", "Do you have ...?"), the
# 3-word "I've got it!" and "Thanks for the recommendations and tips!" (no first person).
BIKE_FACTS = [
    "I'm planning a long ride this weekend and want to make sure I'm prepared.",
    "I'm actually thinking of taking my Trek Emonda for the ride, since it's perfect for long distances on the road.",
    "I've been considering upgrading my road bike's wheels to make it even lighter and faster.",
    "I've been doing some research on carbon fiber wheels and I think I'll make the purchase in the next few months.",
    "By the way, speaking of my bikes, I've got three of them - a road bike, a mountain bike, and a commuter bike - and I've been using them for different types of rides.",
    "I've been thinking about getting a bike lock with a GPS tracker to keep my bikes safe when I'm not around them.",
    "I'm thinking of getting a bike lock with GPS tracking that integrates with my bike, so I can keep an eye on my three bikes when I'm not around them.",
    "I think I'll go with the Abus SmartX bike lock with GPS tracking.",
    "It seems to offer the best balance of security, convenience, and features for my needs.",
]


def test_split_sentences() -> None:
    assert split_sentences("I have a dog. Can you help me?\nMy cat is 3!  Fine") == [
        "I have a dog.", "Can you help me?", "My cat is 3!", "Fine",
    ]
    assert split_sentences("version 3.5 is out") == ["version 3.5 is out"]
    assert split_sentences("  \n ") == []


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("I'm a vegetarian and I cook every day.", True),
        (CANARY_SENTENCE, True),
        ("Our house has a big garden.", True),
        ("It suits my needs well.", True),
        ("Can you help me plan a trip?", False),       # question
        ("Do I need a visa for Japan", False),         # question without "?"
        ("Please give me a list of books.", False),    # request
        ("The weather is nice today.", False),         # no first person
        ("I've got it!", False),                       # 3 words
        ("I\u2019ve been to Rome twice.", True),       # curly apostrophe
    ],
)
def test_is_self_disclosure(sentence: str, expected: bool) -> None:
    assert is_self_disclosure(sentence) is expected


def test_key_facts_on_real_session(bike_turns) -> None:
    assert key_facts(bike_turns) == BIKE_FACTS


def test_key_facts_carries_prior_first_and_dedupes(bike_turns) -> None:
    prior = [CANARY_SENTENCE, "  The user owns\n three bikes. ", BIKE_FACTS[0]]
    facts = key_facts(bike_turns, prior)
    # prior facts first (white space collapsed), then the new ones; BIKE_FACTS[0] once
    assert facts == [CANARY_SENTENCE, "The user owns three bikes.", *BIKE_FACTS]


def test_central_sentence_by_definition(embedder) -> None:
    # Three identical sentences have mean cosine (1 + 1 + c)/3 to the others, the odd
    # one c < 1: a copy wins, and the tie among copies goes to the first (index 1).
    turns = ["My car is a red Toyota.", "I like green tea. I like green tea.", "I like green tea."]
    assert central_sentence(turns, embedder=embedder) == "I like green tea."
    assert central_sentence(["I only said this."], embedder=embedder) == "I only said this."
    assert central_sentence([], embedder=embedder) is None
    # the prior summary competes as a candidate (placed first): two copies of it win
    assert central_sentence(["My dog is called Rex."], prior=["I like tea.", "I like tea."],
                            embedder=embedder) == "I like tea."


def test_answer_picks_query_sentences(embedder, bike_turns) -> None:
    memories = [*bike_turns[:3], f"I went running today. {CANARY_SENTENCE}"]
    top1 = answer("What is my private session token?", memories, n=1, embedder=embedder)
    assert top1 == CANARY_SENTENCE
    top2 = answer("What is my private session token?", memories, embedder=embedder)
    assert top2.startswith(CANARY_SENTENCE + " ")
    second = top2[len(CANARY_SENTENCE) + 1:]
    assert second in {s for m in memories for s in split_sentences(m)} - {CANARY_SENTENCE}
    assert answer("anything", [], embedder=embedder) == NO_MEMORY_ANSWER
    with pytest.raises(ValueError, match="n must be >= 1"):
        answer("q", ["I am here."], n=0, embedder=embedder)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30), max_size=6))
def test_format_parse_items_roundtrip(texts: list[str]) -> None:
    texts = [t.replace("\r", "") for t in texts]  # \r is not a line separator of the format
    assert parse_items(format_items(texts)) == texts


def test_format_items_layout() -> None:
    assert format_items([]) == "(none)"
    assert format_items(["a", "b\nc"]) == "- a\n- b\n  c"


def test_parse_prompt_rejects_foreign_prompts() -> None:
    with pytest.raises(ValueError, match="only answers memkit's prompts"):
        parse_prompt([HumanMessage("hello")])
    with pytest.raises(ValueError, match="has no 'User turns:' section"):
        parse_prompt([SystemMessage(FACTS_MARKER), HumanMessage("hello")])
    with pytest.raises(ValueError, match="only answers memkit's prompts"):
        ExtractiveChatModel().invoke("What is 2+2?")


def test_chat_model_route_equals_plain_functions(bike_turns, embedder) -> None:
    """The prompt -> ExtractiveChatModel -> text route gives the plain functions' results."""
    model = ExtractiveChatModel()
    turns = [*bike_turns, "First line.\nI wrote this on a second line of my turn.\n- and a bullet"]
    assert model.invoke(facts_prompt(turns)).content.split("\n") == key_facts(turns)
    prior = ["I had a note\nover two lines.", CANARY_SENTENCE]
    assert model.invoke(facts_prompt(turns, prior)).content.split("\n") == key_facts(turns, prior)
    assert model.invoke(summary_prompt(turns)).content == central_sentence(turns, embedder=embedder)
    assert model.invoke(summary_prompt(turns, prior)).content == central_sentence(
        turns, prior, embedder=embedder)
    q = "Question: which lock?\n\nwhat about my bikes?"  # a question with a header-like line
    memories = [*bike_turns[2:], "Relevant memories:\n- not a header"]
    assert model.invoke(respond_prompt(q, memories)).content == answer(q, memories, embedder=embedder)
    assert model.invoke(respond_prompt(q, [])).content == NO_MEMORY_ANSWER
    parsed = parse_prompt(respond_prompt(q, memories).to_messages())
    assert (parsed.task, parsed.question, parsed.memories) == ("respond", q, memories)


def test_chat_model_factory() -> None:
    from memkit.models.chat import chat_model

    model = chat_model("extractive", n_sentences=1)
    assert isinstance(model, ExtractiveChatModel) and model.n_sentences == 1


# --------------------------------------------------------------------------- LLMCache


def test_normalize_and_contains_secret() -> None:
    assert alnum_fold("XQ7-violet 3829") == "xq7violet3829"
    assert contains_secret(f"token: {CANARY}", CANARY)
    assert contains_secret("token: xq7 violet_3829!", CANARY)
    assert contains_secret(json.dumps({"a": ["x", "xq7\u00a0VIOLET 3829"]}), CANARY)
    assert not contains_secret("XQ7-VIOLET-3828", CANARY)
    with pytest.raises(ValueError, match="no letters or digits"):
        contains_secret("anything", " - ")


def test_cache_never_sends_a_prompt_twice(tmp_path, bike_turns) -> None:
    cache = LLMCache(tmp_path / "c" / "llm.sqlite")
    model = ExtractiveChatModel(cache=cache)
    first = model.invoke(facts_prompt(bike_turns)).content
    second = model.invoke(facts_prompt(bike_turns)).content
    assert first == second == "\n".join(BIKE_FACTS)
    assert (cache.hits, cache.misses, len(cache)) == (1, 1, 1)
    # another model configuration is another llm_string: a miss
    ExtractiveChatModel(cache=cache, min_words=3).invoke(facts_prompt(bike_turns))
    assert (cache.hits, cache.misses, len(cache)) == (1, 2, 2)
    # the file persists: a new cache object on the same path answers from it
    again = LLMCache(cache.path)
    assert ExtractiveChatModel(cache=again).invoke(facts_prompt(bike_turns)).content == first
    assert (again.hits, again.misses) == (1, 0)
    assert not cache.path.with_name(cache.path.name + "-wal").exists()


def test_cache_purge_exact_and_normalized(tmp_path, bike_turns) -> None:
    cache = LLMCache(tmp_path / "llm.sqlite")
    model = ExtractiveChatModel(cache=cache)
    model.invoke(facts_prompt(bike_turns))                      # no secret
    model.invoke(facts_prompt([*bike_turns[:2], CANARY_SENTENCE]))  # secret in prompt and response
    model.invoke(respond_prompt("what token?", ["my token is xq7 violet 3829"]))  # normalized form
    assert len(cache) == 3
    assert CANARY.encode() in cache.path.read_bytes()
    assert cache.purge(CANARY) == 2
    assert len(cache) == 1
    (prompt, _, response), = cache.entries()
    assert response.count("Trek Emonda") == 1 and not contains_secret(prompt, CANARY)
    raw = cache.path.read_bytes()
    assert CANARY.encode() not in raw and b"xq7 violet 3829" not in raw
    assert cache.purge(CANARY) == 0
    with pytest.raises(ValueError, match="no letters or digits"):
        cache.purge("--")
    cache.clear()
    assert len(cache) == 0


def test_cache_threads_share_one_file(tmp_path) -> None:
    from langchain_core.outputs import Generation

    cache = LLMCache(tmp_path / "llm.sqlite")
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for i in range(15):
                cache.update(f"p{w}-{i}", "llm", [Generation(text=f"r{w}-{i}")])
                assert cache.lookup(f"p{w}-{i}", "llm")[0].text == f"r{w}-{i}"
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache) == 60 and cache.hits == 60
    with sqlite3.connect(cache.path) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
