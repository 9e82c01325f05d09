"""Tests for memkit.dataset.canaries: the grammar's size and uniformity, secret kinds, and
planting (placement rules, determinism, no mutation)."""

from __future__ import annotations

import copy
import dataclasses
import re
import string
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from memkit.dataset import canaries as C
from memkit.dataset import longmemeval as lme
from memkit.dataset import synthetic as syn
from memkit.dataset.longmemeval import Instance, Turn

TOKEN = re.compile(r"^([A-Z0-9])([A-Z0-9])([A-Z0-9])-([A-Z]+)-([0-9])([0-9])([0-9])([0-9])$")


def luhn_ok(number: str) -> bool:
    """Independent Luhn test: double every second digit from the right, add digit sums."""
    digits = [int(c) for c in number if c.isdigit()]
    total = 0
    for pos, d in enumerate(reversed(digits), start=1):
        if pos % 2 == 0:
            q, r = divmod(2 * d, 10)
            total += q + r
        else:
            total += d
    return total % 10 == 0


def _no_answer_words(text: str, answer: str) -> bool:
    phrase = answer.strip().rstrip(".!?").lower()
    return re.search(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", text.lower()) is None


@pytest.fixture(scope="module")
def real(sample_path: Path) -> list[Instance]:
    return lme.load(sample_path)


@pytest.fixture(scope="module")
def draws() -> list[str]:
    rng = np.random.default_rng(20250101)
    return [C.draw(rng) for _ in range(100_000)]


# ----------------------------------------------------------------- grammar


def test_grammar_size_constant() -> None:
    # 36 alphanumerics ** 3 * 32 words * 10 ** 4 digits, multiplied out by hand.
    assert C.GRAMMAR_SIZE == 14_929_920_000
    assert C.GRAMMAR_SIZE >= 5.6e9  # at least the study's grammar
    assert "14,929,920,000" in C.__doc__
    assert len(set(C.WORDS)) == len(C.WORDS) == 32


def test_draw_shape_and_determinism(draws: list[str]) -> None:
    assert all(TOKEN.match(v) for v in draws[:1000])
    assert all(C.TOKEN_RE.fullmatch(v) for v in draws[:1000])
    a = [C.draw(np.random.default_rng(3)) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    assert C.draw(np.random.default_rng(3)) != C.draw(np.random.default_rng(4))


def test_collision_rate_matches_grammar_size(draws: list[str]) -> None:
    n = len(draws)
    counts = Counter(draws)
    colliding_pairs = sum(c * (c - 1) // 2 for c in counts.values())
    expected = n * (n - 1) / 2 / C.GRAMMAR_SIZE  # ~0.335 pairs
    assert colliding_pairs <= stats.poisson.ppf(1 - 1e-6, expected)
    # A grammar 100x smaller would give ~33 expected pairs: far outside this bound.
    assert stats.poisson.ppf(1 - 1e-6, expected) < stats.poisson.ppf(1e-6, 100 * expected)


def test_components_cover_alphabets_uniformly(draws: list[str]) -> None:
    parts = [TOKEN.match(v).groups() for v in draws]  # type: ignore[union-attr]
    alphabets = [set(col) for col in zip(*parts, strict=True)]
    alnum = set(string.ascii_uppercase + string.digits)
    assert alphabets[0] == alphabets[1] == alphabets[2] == alnum
    assert all(a == set(string.digits) for a in alphabets[4:])
    assert alphabets[3] == set(C.WORDS)
    observed_size = 1
    for a in alphabets:
        observed_size *= len(a)
    assert observed_size == C.GRAMMAR_SIZE
    # Each component is uniform over its alphabet (chi-square goodness of fit).
    for col in (0, 2, 3, 4, 7):
        observed = np.array(list(Counter(p[col] for p in parts).values()))
        assert stats.chisquare(observed).pvalue > 1e-4, col
    # Joint check of two components: prefix char and word are independent.
    table = Counter((p[0], p[3]) for p in parts)
    matrix = np.array([[table[(a, w)] for w in C.WORDS] for a in sorted(alnum)])
    assert stats.chi2_contingency(matrix).pvalue > 1e-4


# ----------------------------------------------------------------- other kinds


def test_secret_kinds_shapes_and_luhn() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        card = C.draw_secret(rng, "card")
        assert re.fullmatch(r"4\d{3} \d{4} \d{4} \d{4}", card)
        assert luhn_ok(card)
        assert not luhn_ok(card[:-1] + str((int(card[-1]) + 1) % 10))
    assert C.luhn_check_digit("7992739871") == "3"  # textbook example 79927398713
    assert luhn_ok("4539 1488 0343 6467")
    email = C.draw_secret(rng, "email")
    assert re.fullmatch(r"[a-z]+\.[a-z0-9]{3}\d{4}@(example\.(com|net|org)|mail\.example)", email)
    assert re.fullmatch(r"\+1-[2-9]\d\d-[2-9]\d\d-\d{4}", C.draw_secret(rng, "phone"))
    assert re.fullmatch(r"sk-[A-Za-z0-9]{32}", C.draw_secret(rng, "api_key"))
    with pytest.raises(C.CanaryError, match="unknown canary kind"):
        C.draw_secret(rng, "password")


# ----------------------------------------------------------------- planting


def _check_planted(before: dict, planted: Instance, record: C.Canary) -> str:
    """Common invariants; returns the original content of the planted turn."""
    after = planted.to_dict()
    s, t = record.session_index, record.turn_index
    assert record.session_id == before["haystack_session_ids"][s]
    original = before["haystack_sessions"][s][t]
    new = after["haystack_sessions"][s][t]
    assert original["role"] == new["role"] == "user"
    assert new["content"][record.offset :].startswith(record.sentence)
    assert record.value in record.sentence
    assert C.SENTENCES[record.kind].format(value=record.value) in new["content"]
    rebuilt = new["content"].replace(record.sentence, "")
    assert " ".join(rebuilt.split()) == " ".join(original["content"].split())
    # Every other turn, and every other field, is untouched.
    new_sessions = after.pop("haystack_sessions")
    old_sessions = copy.deepcopy(before)
    old_turns = old_sessions.pop("haystack_sessions")
    assert after == old_sessions
    for i, (a, b) in enumerate(zip(old_turns, new_sessions, strict=True)):
        for j, (x, y) in enumerate(zip(a, b, strict=True)):
            if (i, j) != (s, t):
                assert x == y
    return original["content"]


def test_plant_real_sample(real: list[Instance]) -> None:
    for inst in real:
        before = copy.deepcopy(inst.to_dict())
        planted, rec = C.plant(inst, seed=7)
        assert inst.to_dict() == before  # input not mutated
        assert rec.question_id == inst.question_id and rec.kind == "token"
        assert rec.sentence == f"By the way, my private session token is {rec.value}."
        assert TOKEN.match(rec.value)
        content = _check_planted(before, planted, rec)
        assert _no_answer_words(content, inst.answer_text)
        with pytest.raises(dataclasses.FrozenInstanceError):
            rec.value = "x"  # type: ignore[misc]
        # Deterministic per seed.
        again, rec2 = C.plant(inst, seed=7)
        assert rec2 == rec and again == planted


def test_plant_differs_across_seeds(real: list[Instance]) -> None:
    by_seed = {seed: [C.plant(x, seed)[1] for x in real] for seed in range(5)}
    for a in range(5):
        for b in range(a + 1, 5):
            assert all(x.value != y.value for x, y in zip(by_seed[a], by_seed[b], strict=True))
    places = {(r.question_id, r.session_index, r.turn_index) for recs in by_seed.values() for r in recs}
    assert len(places) > len(real)
    # Same seed, same instance: the planted turn does not depend on the kind.
    for inst in real:
        assert C.plant(inst, 3, kind="email")[1].turn_index == C.plant(inst, 3)[1].turn_index


def test_unlabelled_avoids_answer_sessions(real: list[Instance]) -> None:
    """The real sample has no has_answer labels and only answer sessions; add a
    non-answer session and the canary must land there."""
    for k, inst in enumerate(real):
        donor = real[(k + 1) % len(real)]
        extra = copy.deepcopy(donor.haystack_sessions[0])
        rec_dict = inst.to_dict()
        rec_dict["haystack_session_ids"].insert(1, "distractor_session")
        rec_dict["haystack_dates"].insert(1, "2023/01/01 (Sun) 10:00")
        rec_dict["haystack_sessions"].insert(1, [t.to_dict() for t in extra])
        widened = Instance.model_validate(rec_dict)
        assert not widened.has_labels
        for seed in range(10):
            planted, rec = C.plant(widened, seed)
            assert rec.session_id == "distractor_session"
            assert rec.session_id not in widened.answer_session_ids
            _check_planted(rec_dict, planted, rec)


def test_labelled_synthetic_never_evidence() -> None:
    data = syn.synthetic(30, 5, sessions_per_instance=(2, 5))
    for seed in range(15):
        for inst in data:
            planted, rec = C.plant(inst, seed)
            turn = inst.haystack_sessions[rec.session_index][rec.turn_index]
            assert turn.role == "user" and turn.has_answer is not True
            assert _no_answer_words(turn.content, inst.answer_text)
            assert planted.haystack_sessions[rec.session_index][rec.turn_index].has_answer is None


def test_unlabelled_synthetic_abstention_avoids_answer_sessions() -> None:
    data = syn.synthetic(12, 6, abstention_rate=1.0, sessions_per_instance=(3, 5))
    for inst in data:
        assert not inst.has_labels
        for seed in range(10):
            _, rec = C.plant(inst, seed)
            assert rec.session_id not in inst.answer_session_ids


@pytest.mark.parametrize(
    ("kind", "phrase"),
    [("token", "session token"), ("email", "email"), ("phone", "phone number"),
     ("card", "card number"), ("api_key", "API key")],
)
def test_plant_kinds(real: list[Instance], kind: str, phrase: str) -> None:
    for inst in real[:4]:
        planted, rec = C.plant(inst, 1, kind=kind)
        assert rec.kind == kind
        assert f"my private {phrase} is {rec.value}" in rec.sentence
        content = planted.haystack_sessions[rec.session_index][rec.turn_index].content
        assert rec.sentence in content
        if kind == "card":
            assert luhn_ok(rec.value)


def test_plant_errors() -> None:
    only_evidence = Instance(
        question_id="q1", question_type="single-session-user", question="What is my dog's name?",
        answer="Rex", question_date="2023/05/30 (Tue) 14:10",
        haystack_session_ids=["s1"], haystack_dates=["2023/05/29 (Mon) 10:00"],
        haystack_sessions=[[
            Turn(role="user", content="My dog is called Rex.", has_answer=True),
            Turn(role="assistant", content="Nice name!"),
            Turn(role="user", content="Rex loves the park."),
        ]],
        answer_session_ids=["s1"],
    )
    with pytest.raises(C.CanaryError, match="no eligible user turn"):
        C.plant(only_evidence, 0)
    with pytest.raises(C.CanaryError, match="unknown canary kind"):
        C.plant(only_evidence, 0, kind="ssn")
    with pytest.raises(C.CanaryError, match="non-negative"):
        C.instance_rng(-1, "q1")


def test_plant_all_and_token_regex(real: list[Instance]) -> None:
    planted, records = C.plant_all(real, 2)
    assert [r.question_id for r in records] == [x.question_id for x in real]
    for inst, rec in zip(planted, records, strict=True):
        found = [m.group(0) for _, _, turns in inst.sessions() for t in turns
                 for m in C.TOKEN_RE.finditer(t.content)]
        assert found == [rec.value]
