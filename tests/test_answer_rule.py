"""PR's default answer rule ("lme", evaluators.scoring.answer_rule) against the study's rule.

Every expected verdict below is derived by hand from the rule's definition (module
doc of evaluators.scoring.answer_rule) and LongMemEval's judging semantics; the cosine passed
to ``lme_verdict`` is chosen to show it cannot decide, and the end-to-end tests use
the real all-MiniLM-L6-v2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators.scoring.answer_rule import (
    STOP_WORDS,
    abstains,
    affirmed_tokens,
    key_words,
    lme_verdict,
    normalize_numbers,
    number_values,
    offers_alternatives,
    stale_value,
)
from evaluators.scoring.metrics import DEFAULT_PR_RULE, PR_RULES, answer_correct, score_answers
from memkit.dataset.longmemeval import Instance

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


# --------------------------------------------------------------------------- adversarial classes
# Labels follow LongMemEval's judge (yes/no per question type); each is derived by hand
# from the class's definition in the module doc. The cosine (0.9) is high enough that a
# wrong pass through the cosine would show.


@pytest.mark.parametrize(
    ("answer", "reference", "verdict"),
    [
        # class 1: hedging over several candidates of the reference's kind is no answer
        ("It could be 35, 36, 37, 38, 39 or 40.", "38", False),
        ("Toyota, Honda, Ford, BMW, Tesla, Kia, Mazda, or Subaru.", "Toyota", False),
        ("It might be Tokyo or Osaka.", "Tokyo", False),
        ("Between 38 and 45 coins.", "38", False),
        ("You could try yoga or pilates.", "yoga", False),
        # ... but the reference's own alternatives, and a plain list around it, pass
        ("3 or 4 hours.", "3-4 hours", True),
        ("Maybe Tokyo.", "Tokyo", True),
        ("You've been to Paris, London, Tokyo, Rome, Berlin and Oslo.", "Tokyo", False),
        ("Not 40 coins, you have 38.", "38", True),
        ("On Monday, March 15, 2023.", "March 15, 2023", True),
    ],
)
def test_offering_alternatives_is_wrong(answer, reference, verdict):
    assert lme_verdict(answer, reference, 0.9).correct is verdict


def test_offers_alternatives_by_hand():
    assert offers_alternatives("Tokyo or Osaka", "Tokyo")
    assert not offers_alternatives("Tokyo, not Osaka or Kyoto", "Tokyo")  # negated items
    assert not offers_alternatives("Your grandma is 75 and you are 32, so she is 43 years older.", "43")


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        # class 2: rejections after the word or by another cue
        ("You went to Osaka instead of Tokyo.", False),
        ("You went to Osaka rather than Tokyo.", False),
        ("Tokyo was not where you went; it was Osaka.", False),
        ("Tokyo? No, Osaka.", False),
        ("Tokyo is wrong, it was Osaka.", False),
        ("You went everywhere except Tokyo.", False),
        # class 3: negation words that do not negate the answer
        ("No, it was Tokyo.", True),
        ("No it was Tokyo.", True),
        ("There's no doubt it was Tokyo.", True),
        ("No wonder you loved Tokyo.", True),
        ("None other than Tokyo.", True),
        ("You didn't just visit Tokyo, you lived there.", True),
        ("You never went to Tokyo, you went to Osaka.", False),
    ],
)
def test_negation_scope(answer, verdict):
    assert lme_verdict(answer, "Tokyo", 0.9).correct is verdict


def test_negation_scope_ends_and_idioms():
    assert lme_verdict("Not only Tokyo but also Kyoto.", "Tokyo and Kyoto", 0.9).correct
    assert lme_verdict("You no longer live in Boston and now live in Chicago.", "Chicago", 0.9).correct
    assert not lme_verdict("You no longer live in Chicago.", "Chicago", 0.9).correct
    assert lme_verdict("Nobody other than Sarah.", "Sarah", 0.9).correct
    # the answer's own "none" is the answer, not a cue
    assert lme_verdict("You have none.", "none", 0.9).correct
    assert lme_verdict("You have none.", "0", 0.9).correct
    assert affirmed_tokens("None of them.") == ["none"]
    assert lme_verdict("Chanel No 5", "Chanel No. 5", 0.9).correct


@pytest.mark.parametrize(
    ("answer", "reference", "verdict"),
    [
        # class 4: sign, meridiem, unit / currency / counted noun, pairing, extra parts
        ("It was 5°C.", "-5°C", False),
        ("minus five degrees", "-5 degrees", True),
        ("At 2:30 am.", "2:30 pm", False),
        ("At 14:30.", "2:30 pm", True),
        ("5 am", "5 pm", False),
        ("5 kilometers", "5 miles", False),
        ("3 tablespoons", "3 cups", False),
        ("1,200 euros", "$1,200", False),
        ("$50", "€50", False),
        ("You have 2 dogs.", "2 cats", False),
        ("You have 38 gold coins.", "38 coins", True),
        ("1 cat and 2 dogs", "2 cats and 1 dog", False),
        ("2 hours and 30 minutes", "2 hours", False),
        ("2 hours", "2 hours", True),
        # forms normalised
        ("It was $1.2k.", "$1,200", True),
        ("You have 10k followers.", "10", False),
        ("$1,200,000", "$1.2 million", True),
        ("A dozen.", "12", True),
        ("Two and a half hours.", "2.5 hours", True),
        ("It was .5 of a cup.", "0.5", True),
        ("Super Bowl 57", "Super Bowl LVII", True),
        ("Super Bowl LVIII", "Super Bowl LVII", False),
        ("World War 2", "World War II", True),
        ("March 15, 2023", "2023-03-15", True),
        ("The GR90.", "GR-90", True),
        ("I think it was the gr-90 route.", "The GR-90 trail.", True),
        # number words as pronouns
        ("The blue sweater.", "the blue one", True),
        # exact values of any length
        ("9" * 400, "9" * 400, True),
        ("order 12345678901234568", "order 12345678901234567", False),
    ],
)
def test_number_forms_signs_and_units(answer, reference, verdict):
    assert lme_verdict(answer, reference, 0.9).correct is verdict


def test_number_normalisation_forms_by_hand():
    assert normalize_numbers("2:30 pm") == "14:30"
    assert normalize_numbers("5 AM") == "5:00"
    assert normalize_numbers("2023-03-15") == "March 15, 2023"
    assert normalize_numbers("World War II") == "World War 2"
    assert normalize_numbers("$1.2 million") == "1200000 dollars"
    assert normalize_numbers("e-mail") == "email"
    assert number_values("-5°C and 3-4") == ["-5", "3", "4"]


def test_long_number_word_runs_are_converted_piecewise():
    text = "one two three " * 2000  # 6000 number words: alpha2digit in pieces
    assert set(number_values(text)) == {"1", "2", "3"}


def test_temporal_tolerance_only_for_day_counts():
    tr = "temporal-reasoning"
    q = "How many weeks had passed since I started the 30-day challenge?"
    assert not lme_verdict("4 weeks.", "3 weeks", 0.9, question_type=tr, question=q).correct
    assert not lme_verdict("2020", "2019", 0.9, question_type=tr, question="Which year, given 300 days?").correct
    qd = "How many days until the concert, and on what date was it?"
    assert not lme_verdict("17 days, on March 22", "18 days, on March 21", 0.9, question_type=tr, question=qd).correct
    assert lme_verdict("17 days, on March 21", "18 days, on March 21", 0.9, question_type=tr, question=qd).correct
    assert lme_verdict("19", "18", 0.9, question_type=tr, question="How many days passed?").correct


@pytest.mark.parametrize(
    "text",
    [
        "That's not something you've shared with me.",
        "Nothing in our chats mentions that.",
        "I couldn't find that anywhere in our conversations.",
        "Our conversations don't cover your page count.",
        "It's impossible to tell from what you've said.",
        "You mentioned Sapiens but not your progress.",
        "I have no knowledge of that.",
    ],
)
def test_abstention_detector_accepts_more_forms(text):
    assert abstains(text)


@pytest.mark.parametrize(
    "text",
    [
        "You have 120 pages left, not enough to finish tonight.",
        "You have 120 pages left, though I don't know your reading speed.",
        "It's 120 pages; the edition is unknown.",
        "You have 120 pages left. I'm not sure you'll like the ending.",
    ],
)
def test_specific_answer_with_a_doubt_is_no_abstention(text):
    assert not abstains(text)


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("a weekly pilates class at the community center", "a weekly yoga class at the community center"),
        ("a dark red mountain bike", "a dark blue mountain bike"),
        ("She is a doctor at the children's hospital", "She is a nurse at the children's hospital"),
        ("Bella the golden retriever", "Luna the golden retriever"),
    ],
)
def test_partial_step_rejects_a_substituted_entity(answer, reference):
    assert not lme_verdict(answer, reference, 0.9).correct


def test_partial_step_still_accepts_a_dropped_word():
    # one of three content words dropped, none replaced: the partial step applies
    assert lme_verdict("a yoga class at the community center", "a weekly yoga class at the community center",
                       0.9).correct


def test_accents_and_hyphenated_prefixes_fold():
    assert lme_verdict("Cafe Rouge", "Café Rouge", 0.9).correct
    assert lme_verdict("Sao Paulo", "São Paulo", 0.9).correct
    assert lme_verdict("by email", "e-mail", 0.9).correct


@pytest.mark.parametrize(
    ("answer", "reference", "verdict"),
    [("Yes.", "No", False), ("Neither.", "Both", False), ("None of them.", "All of them", False),
     ("Everything.", "Nothing", False), ("Yes, you did.", "Yes", True), ("Both of them.", "Both", True)],
)
def test_stop_word_references_need_their_polar_word(answer, reference, verdict):
    assert lme_verdict(answer, reference, 0.9).correct is verdict


def test_non_string_input_is_a_clear_error():
    with pytest.raises(TypeError, match="answer must be a string, got NoneType"):
        lme_verdict(None, "Tokyo", 0.9)
    with pytest.raises(TypeError, match="reference must be a string"):
        lme_verdict("Tokyo", None, 0.9)


def test_bare_number_reference_takes_the_questions_counted_noun():
    q = "How many bikes do I own?"
    assert not lme_verdict("You own three cars.", "three", 0.9, question=q).correct
    assert lme_verdict("You own three bikes.", "three", 0.9, question=q).correct
    assert lme_verdict("Three.", "three", 0.9, question=q).correct
    q2 = "How many pre-1920 American coins do I have in my collection?"
    assert lme_verdict("You have 38 pre-1920 American coins.", "38", 0.9, question=q2).correct
    assert lme_verdict("You have 38 coins.", "38", 0.9, question=q2).correct


# --------------------------------------------------------------------------- hedged abstentions

CAT_Q = "What is the name of my cat?"
CAT_REF = "The information provided is not enough. You mentioned having a cat but not its name."


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        # an abstention cue, then a value offered anyway: no abstention (wrong)
        ("I don't remember exactly, but maybe your cat is called Miso.", False),  # guess + stating verb
        ("I don't remember exactly, but your cat is Miso.", False),  # a name, no guess cue
        ("I'm not sure. Maybe Miso?", False),  # a name in a guessing sentence
        ("Miso, maybe? I'm not sure.", False),  # the name opens a guessing sentence
        ("I'm not sure, but I think it's Luna.", False),
        ("I don't know your cat's name, but I'd guess something like Whiskers.", False),
        ("I'm not certain, probably the grey one.", False),  # guess + noun phrase, no name
        # declining to give the fact: abstention (correct)
        ("You never told me your cat's name.", True),
        ("I don't know your cat's name; you only told me about your dog, Rex.", True),  # what was said instead
        ("I don't know. Perhaps you could remind me?", True),  # a guess cue offering no value
        ("I don't know; maybe it's in your notes?", True),  # where to look is no value
        ("I have no record of your cat's name. Maybe check your adoption papers?", True),
        ("I can't recall a name for your cat. You mentioned adopting her in March, though.", True),
    ],
)
def test_a_hedge_that_offers_a_value_is_no_abstention(answer, verdict):
    assert abstains(answer, CAT_Q) is verdict
    v = lme_verdict(answer, CAT_REF, 0.99, question_id="written_cat_abs", question=CAT_Q)
    assert (v.correct, v.reason) == (verdict, "abstention")


def test_hedged_abstention_variants_on_the_sample_question():
    q = "How many pages do I have left to read in 'Sapiens'?"
    assert not abstains("I don't remember exactly, but maybe you have about 100 pages left.", q)
    assert not abstains("I'm not sure, but I think you're on the last chapter.", q)
    assert not abstains("I don't know how many pages are left. Probably around half the book.", q)
    # the question's own words are no offered value ("Sapiens"), nor a reported fact
    assert abstains("I don't know how many pages of Sapiens you have left.", q)
    assert abstains("I don't have your page count; you only told me you bought Sapiens last month.", q)
    assert abstains("I can't tell how many pages you have left. Maybe you could check your bookmark?", q)


# --------------------------------------------------------------------------- stale values

CAR_Q = "What car do I drive now?"


@pytest.mark.parametrize(
    ("answer", "reference", "question", "verdict"),
    [
        # another value in a current clause ("these days", "now"), the reference in a past one
        ("These days you drive a Honda Civic; the Toyota Corolla was your old car.", "Toyota Corolla", CAR_Q, False),
        ("Now you drive a Toyota Camry; the Corolla was before.", "Toyota Corolla", CAR_Q, False),
        ("You had 38 coins but you sold some, so you have 35 now.", "38", "How many coins do I have?", False),
        ("You had 38 and now 35.", "38", "How many coins do I have?", False),
        # another value in a plain clause outranks the reference in a past clause ("before")
        ("You have 35 coins; you had 38 before selling 3.", "38", "How many coins do I have?", False),
        ("You used to do yoga, but now you're into pilates.", "yoga", "What exercise do I do?", False),
        # the reference is what is given as current; older values may be mentioned
        ("You used to drive a Honda Civic, but now you drive a Toyota Corolla.", "Toyota Corolla", CAR_Q, True),
        ("You drive a Toyota Corolla now; your old car was a Honda Civic.", "Toyota Corolla", CAR_Q, True),
        ("You used to have 37, but now you have 38.", "38", "How many coins do I have?", True),
        ("Five so far, up from the four you mentioned earlier.", "5", "How many projects have I completed?", True),
        # a part ("5 of them") and a year are not another count
        ("You have 38 coins now, and 5 of them are from 1900.", "38", "How many coins do I have?", True),
        ("You love yoga; these days you do it 3 times a week.", "yoga", "What exercise do I do?", True),
    ],
)
def test_knowledge_update_answer_giving_another_value_as_current_is_wrong(answer, reference, question, verdict):
    v = lme_verdict(answer, reference, 0.99, question_type="knowledge-update", question=question)
    assert v.correct is verdict, v
    assert stale_value(answer, reference, question) is (not verdict)
    if not verdict:
        assert v.reason == "stale"


def test_stale_values_only_for_knowledge_update_questions():
    answer = "These days you drive a Honda Civic; the Toyota Corolla was your old car."
    # other question types ask about any time ("Which car did I drive before?")
    assert lme_verdict(answer, "Toyota Corolla", 0.0, question_type="multi-session", question=CAR_Q).correct
    # a reference the answer does not state whole is left to the other steps
    assert stale_value("Now you drive a Honda Civic.", "Toyota Corolla", CAR_Q) is False
