"""PR's default answer rule ("lme", evaluators.answer_rule) against the study's rule.

Every expected verdict below is derived by hand from the rule's definition (module
doc of evaluators.answer_rule) and LongMemEval's judging semantics; the cosine passed
to ``lme_verdict`` is chosen to show it cannot decide, and the end-to-end tests use
the real all-MiniLM-L6-v2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators.answer_rule import (
    STOP_WORDS,
    abstains,
    affirmed_tokens,
    key_words,
    lme_verdict,
    normalize_numbers,
    number_values,
)
from evaluators.metrics import DEFAULT_PR_RULE, PR_RULES, answer_correct, score_answers
from memkit.longmemeval import Instance

DATA = Path(__file__).parent / "data"

# --------------------------------------------------------------------------- numbers


def test_number_normalisation_by_hand():
    assert normalize_numbers("I have four of them.") == "I have 4 of them."
    assert normalize_numbers("the twenty-first") == "the 21"
    assert normalize_numbers("It cost $1,200.") == "It cost 1200 dollars."
    assert normalize_numbers("42% of it") == "42 percent of it"
    assert number_values("I have four, not 38.0") == ["4", "38"]
    assert number_values("one or two") == ["1", "2"]
    assert number_values("1,000 steps and 2.50 dollars") == ["1000", "2.5"]


def test_number_words_are_never_stop_words():
    for w in ("one", "two", "three", "four", "hundred", "first", "last", "name", "bill"):
        assert w not in STOP_WORDS
    assert "the" in STOP_WORDS and "of" in STOP_WORDS


@pytest.mark.parametrize(
    ("answer", "reference", "cosine", "verdict"),
    [
        # "four" is an sklearn stop word: the study rule had only the cosine (0.49)
        ("I have four of them.", "four", 0.0, True),
        ("You have 38 coins.", "38.0", 0.0, True),  # by value: 38.0 == 38
        ("You have 38 coins.", "38", 0.0, True),
        ("You have 380 coins.", "38", 0.99, False),  # 380 is another number
        ("two", "three", 0.99, False),  # a near cosine cannot pick a number
        ("6", "5", 0.99, False),
        ("You completed 5 projects; earlier it was 3.", "5", 0.0, True),  # latest value present
        ("You don't have 3 bikes.", "three", 0.99, False),  # negated number
        ("It took 18 weeks.", "18 days", 0.99, False),  # another time unit
        ("It took 18 days.", "18 days", 0.0, True),
        ("It cost $400,000.", "$400,000", 0.0, True),
    ],
)
def test_numbers(answer, reference, cosine, verdict):
    v = lme_verdict(answer, reference, cosine)
    assert v.correct is verdict, v
    assert v.reason == "numbers"


def test_temporal_day_counts_tolerate_off_by_one():
    q = "How many days passed between my two trips?"
    for answer, verdict in (("19 days", True), ("17 days", True), ("20 days", False), ("18", True)):
        v = lme_verdict(answer, "18 days", 0.0, question_type="temporal-reasoning", question=q)
        assert v.correct is verdict, answer
    # other question types get no tolerance
    assert lme_verdict("19 days", "18 days", 0.99, question_type="multi-session").correct is False


# --------------------------------------------------------------------------- abstention


@pytest.mark.parametrize(
    "text",
    [
        "I don't know.",
        "You didn't mention how many pages you have left.",
        "There is no information about that in our conversations.",
        "I'm not sure; you never mentioned the price.",
        "I can't determine that from what you told me.",
        "You haven't told me about a Ferrari.",
    ],
)
def test_abstention_detector_accepts(text):
    assert abstains(text)


@pytest.mark.parametrize("text", ["You have 50 pages left.", "The GR-90 trail.", "It is not red, it's blue."])
def test_abstention_detector_rejects(text):
    assert not abstains(text)


def test_abstention_questions():
    ref = "The information provided is not enough. You did not mention how many pages."
    # a confident specific answer is wrong even with a high cosine
    assert lme_verdict("You have 50 pages left.", ref, 0.99, question_id="2311e44b_abs").correct is False
    v = lme_verdict("You didn't mention how many pages are left.", ref, 0.0, question_id="2311e44b_abs")
    assert v.correct is True and v.reason == "abstention"
    # for an ordinary question an abstaining answer is not rescued by the cosine
    assert lme_verdict("I don't know which one.", "yes", 0.99).correct is False


# --------------------------------------------------------------------------- negation


def test_negated_clauses_do_not_count():
    assert "ferrari" not in affirmed_tokens("I don't think you ever told me about the Ferrari")
    assert "ferrari" in affirmed_tokens("Not the Porsche, the Ferrari")
    assert "porsch" not in affirmed_tokens("Not the Porsche, the Ferrari")
    assert lme_verdict("I don't think you ever told me about the Ferrari", "the Ferrari", 0.68).correct is False
    assert lme_verdict("It's not the Porsche but the Ferrari.", "the Ferrari", 0.0).correct is True
    assert lme_verdict("You never went to the Episcopal Church.", "the Episcopal Church", 0.9).correct is False


# --------------------------------------------------------------------------- same kind, wrong entity


def test_key_words():
    content, key = key_words("The GR-90 trail.")
    assert content == {"gr", "90", "trail"} and key == {"gr", "90"}
    content, key = key_words("the Episcopal Church")
    assert content == {"episcop", "church"} and key == {"episcop", "church"}
    content, key = key_words("a red car")
    assert content == {"red", "car"} and key == set()


def test_same_kind_wrong_entity_is_wrong():
    # a different brand / church / trail number: the cosine is high, a key word is missing
    assert lme_verdict("You drive a Porsche.", "the Ferrari", 0.9).correct is False
    assert lme_verdict("You went to St. Mary's Catholic Church", "the Episcopal Church", 0.9).correct is False
    assert lme_verdict("The GR-70 trail", "The GR-90 trail.", 0.9).correct is False
    # a list answer needs every item
    assert lme_verdict("tennis and yoga", "tennis, yoga and swimming", 0.9).correct is False
    assert lme_verdict("swimming, yoga and tennis", "tennis, yoga and swimming", 0.0).correct is True
    # a missing generic word (not key) among >= 3 content words passes only with the cosine
    ref = "a vegetarian lasagna recipe"
    assert lme_verdict("a vegetarian lasagna", ref, 0.8).correct is True
    assert lme_verdict("a vegetarian lasagna", ref, 0.4).correct is False
    assert lme_verdict("The GR-90", "The GR-90 trail.", 0.0).correct is True  # numbers step


def test_plurals_and_stems_match():
    assert lme_verdict("You own mountain bikes", "a mountain bike", 0.0).correct is True


# --------------------------------------------------------------------------- preference rubric


RUBRIC = (
    "The user would prefer dinner suggestions that incorporate their homegrown cherry tomatoes "
    "and herbs like basil and mint, highlighting recipes that showcase their garden produce. "
    "They might not prefer suggestions that do not utilize these specific ingredients or do "
    "not emphasize the use of homegrown elements."
)
QUESTION = "What should I serve for dinner this weekend with my homegrown ingredients?"


def test_preference_rubric():
    kw = {"question_type": "single-session-preference", "question": QUESTION}
    good = "How about a caprese salad with your cherry tomatoes and fresh basil?"
    assert lme_verdict(good, RUBRIC, 0.0, **kw).correct is True
    assert lme_verdict("A steak with mashed potatoes.", RUBRIC, 0.99, **kw).correct is False
    # one rubric point is enough (the rubric need not be covered), a refusal is not
    assert lme_verdict("Use your fresh basil in a pesto pasta.", RUBRIC, 0.0, **kw).correct is True
    assert lme_verdict("I don't know what you grow; maybe basil?", RUBRIC, 0.99, **kw).correct is False


# --------------------------------------------------------------------------- rules, end to end


def test_rules_are_named_and_default_is_lme():
    assert PR_RULES == ("lme", "study") and DEFAULT_PR_RULE == "lme"
    with pytest.raises(ValueError, match="unknown PR rule 'judge'"):
        score_answers(["a"], ["a"], rule="judge", embeddings=object())


def test_study_and_lme_on_the_issue_traps(embedder):
    traps = [
        # (answer, reference, study verdict, lme verdict)
        ("I have four of them.", "four", False, True),
        ("two", "three", True, False),
        ("I don't think you ever told me about the Ferrari", "the Ferrari", True, False),
        ("The GR-70 trail", "The GR-90 trail.", True, False),
    ]
    study = score_answers([t[0] for t in traps], [t[1] for t in traps], embeddings=embedder, rule="study")
    lme = score_answers([t[0] for t in traps], [t[1] for t in traps], embeddings=embedder)
    for t, s, v in zip(traps, study, lme, strict=True):
        assert s.correct is t[2], (t, s)
        assert v.correct is t[3], (t, v)
        assert s.cosine == v.cosine and v.rule == "lme" and s.rule == "study"


def test_float_reference_is_rendered_as_an_integer(embedder):
    sample = json.loads((DATA / "longmemeval_oracle_sample.json").read_text())
    rec = dict(next(r for r in sample if r["question_id"] == "69fee5aa"), answer=38.0)
    inst = Instance.model_validate(rec)
    assert inst.answer_text == "38"
    for rule in PR_RULES:
        assert answer_correct("You have 38 coins.", inst.answer_text, embeddings=embedder, rule=rule, question_id=inst.question_id)


def test_length_mismatch_of_question_metadata(embedder):
    with pytest.raises(ValueError, match="question_ids has 2"):
        score_answers(["a"], ["a"], embeddings=embedder, question_ids=["x", "y"])
