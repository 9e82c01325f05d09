"""Tests for memkit.dataset.longmemeval: loading (whole and streamed), validation errors,
sampling and the synthetic generator."""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit.dataset import longmemeval as lme
from memkit.dataset import synthetic as syn
from memkit.dataset.longmemeval import Instance, LongMemEvalError

FIELDS = (
    "question_id", "question_type", "question", "answer", "question_date",
    "haystack_session_ids", "haystack_dates", "haystack_sessions", "answer_session_ids",
)
FIRST_PERSON = re.compile(r"^(I|I'm|I've|I'll|My)\b")


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def raw_sample(sample_path: Path) -> list[dict]:
    return json.loads(sample_path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lme")


# ----------------------------------------------------------------- real sample


def test_load_real_sample(sample_path: Path) -> None:
    data = lme.load(sample_path)
    assert len(data) == 8
    assert all(isinstance(x, Instance) for x in data)
    # Values read off the file by hand.
    first = data[0]
    assert first.question_id == "2311e44b_abs" and first.is_abstention
    assert first.question_type == "multi-session"
    assert first.question == "How many pages do I have left to read in 'Sapiens'?"
    assert first.question_date == "2023/05/30 (Tue) 14:10"
    assert first.haystack_session_ids == ["answer_bf633415_abs_2", "answer_bf633415_abs_1"]
    assert first.haystack_dates == ["2023/05/23 (Tue) 09:13", "2023/05/30 (Tue) 06:57"]
    assert [len(s) for s in first.haystack_sessions] == [8, 10]
    assert first.haystack_sessions[0][0].role == "user"
    assert first.haystack_sessions[0][0].content.startswith("I've been tracking my reading habits")
    assert first.haystack_sessions[0][0].has_answer is None
    assert [x.is_abstention for x in data] == [True] + [False] * 7
    assert {x.question_type for x in data} == set(lme.QUESTION_TYPES)
    assert [x.answer for x in data[1:3]] == ["38", "43"]
    assert [len(x.haystack_sessions) for x in data] == [2, 2, 2, 1, 1, 1, 1, 2]
    assert not any(x.has_labels for x in data)
    sessions = list(data[1].sessions())
    assert [(sid, date) for sid, date, _ in sessions] == list(
        zip(data[1].haystack_session_ids, data[1].haystack_dates, strict=True)
    )
    assert [len(turns) for _, _, turns in sessions] == [12, 10]


def test_round_trip_real_sample(sample_path: Path, raw_sample: list[dict]) -> None:
    data = lme.load(sample_path)
    assert [x.to_dict() for x in data] == raw_sample
    # Key order too: the re-serialised file is byte-identical to a fresh dump of the source.
    assert json.dumps([x.to_dict() for x in data]) == json.dumps(raw_sample)
    assert [Instance.model_validate(x.to_dict()) for x in data] == data


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
def test_streaming_path_equals_whole_file(sample_path: Path, chunk: int) -> None:
    whole = lme.load(sample_path)
    streamed = lme.load(sample_path, stream_threshold=0, chunk_chars=chunk)
    assert streamed == whole
    assert [x.to_dict() for x in lme.iter_load(sample_path, stream_threshold=0)] == [
        x.to_dict() for x in whole
    ]


def test_numeric_answer_and_has_answer_labels(raw_sample: list[dict], scratch: Path) -> None:
    rec = copy.deepcopy(raw_sample[1])
    rec["answer"] = 38
    rec["haystack_sessions"][0][0]["has_answer"] = True
    rec["haystack_sessions"][0][1]["has_answer"] = False
    path = _write(scratch / "numeric.json", [rec])
    (inst,) = lme.load(path)
    assert inst.answer == 38 and isinstance(inst.answer, int)
    assert inst.answer_text == "38"
    assert inst.has_labels
    assert inst.haystack_sessions[0][0].has_answer is True
    assert inst.haystack_sessions[0][1].has_answer is False
    assert inst.haystack_sessions[0][2].has_answer is None
    out = inst.to_dict()
    assert out == rec
    assert "has_answer" not in out["haystack_sessions"][0][2]


def test_dates() -> None:
    when = lme.parse_date("2023/05/30 (Tue) 14:10")
    assert when == dt.datetime(2023, 5, 30, 14, 10)
    assert lme.format_date(dt.datetime(2024, 2, 5, 8, 25)) == "2024/02/05 (Mon) 08:25"
    with pytest.raises(LongMemEvalError, match="YYYY/MM/DD"):
        lme.parse_date("30 May 2023")
    with pytest.raises(LongMemEvalError, match="invalid"):
        lme.parse_date("2023/02/30 (Thu) 10:00")


# ----------------------------------------------------------------- errors


def test_error_names_file_record_and_field(raw_sample: list[dict], scratch: Path) -> None:
    recs = copy.deepcopy(raw_sample[:3])
    del recs[1]["question"]
    path = _write(scratch / "missing.json", recs)
    with pytest.raises(LongMemEvalError) as info:
        lme.load(path)
    msg = str(info.value)
    assert "missing.json" in msg and "instance 1" in msg and "'69fee5aa'" in msg
    assert "'question'" in msg and "missing key" in msg
    assert (info.value.index, info.value.question_id, info.value.field) == (1, "69fee5aa", "question")

    recs = copy.deepcopy(raw_sample[:3])
    recs[2]["haystack_dates"].append("2023/06/01 (Thu) 10:00")
    path = _write(scratch / "lengths.json", recs)
    with pytest.raises(LongMemEvalError, match=r"instance 2 .*haystack_sessions.*equal lengths.*got 2, 3 and 2"):
        lme.load(path)

    recs = copy.deepcopy(raw_sample[:1])
    del recs[0]["haystack_sessions"][1][3]["content"]
    path = _write(scratch / "turn.json", recs)
    with pytest.raises(LongMemEvalError) as info:
        lme.load(path)
    assert info.value.field == "haystack_sessions[1][3].content"
    assert "haystack_sessions[1][3].content" in str(info.value)

    recs = copy.deepcopy(raw_sample[:1])
    recs[0]["answer"] = ["a", "list"]
    path = _write(scratch / "answer.json", recs)
    with pytest.raises(LongMemEvalError, match=r"field 'answer': .*got list"):
        lme.load(path)

    recs = copy.deepcopy(raw_sample[:2])
    recs[1]["question_id"] = recs[0]["question_id"]
    path = _write(scratch / "dup.json", recs)
    with pytest.raises(LongMemEvalError, match="duplicate of instance 0"):
        lme.load(path)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty file"),
        ('{"question_id": "x"}', "expected a JSON array"),
        ("[1]", "expected a JSON object"),
        ("[] []", "extra data"),
    ],
)
def test_top_level_errors(scratch: Path, text: str, fragment: str) -> None:
    path = scratch / "top.json"
    path.write_text(text, encoding="utf-8")
    for threshold in (0, 10**9):
        with pytest.raises(LongMemEvalError, match=fragment):
            lme.load(path, stream_threshold=threshold, chunk_chars=3)


def test_empty_array_loads(scratch: Path) -> None:
    path = scratch / "empty.json"
    path.write_text(" [ ]\n", encoding="utf-8")
    assert lme.load(path) == []


def test_invalid_json_reports_line_and_column(scratch: Path) -> None:
    path = scratch / "bad.json"
    path.write_text('[\n {"question_id": "a",\n  "question" "b"}\n]\n', encoding="utf-8")
    for threshold in (0, 10**9):
        with pytest.raises(LongMemEvalError) as info:
            lme.load(path, stream_threshold=threshold, chunk_chars=5)
        # Line 3, column 14: the "b" that stands where the ":" should be (counted by hand).
        assert (info.value.line, info.value.column, info.value.index) == (3, 14, 0)
        assert "bad.json" in str(info.value) and "line 3, column 14" in str(info.value)


_MUTATIONS = ("drop", "wrong_type", "lengths", "turn_key", "turn_type")
_WRONG = {
    "question_id": 17, "question_type": "multiple-session", "question": None, "answer": [1],
    "question_date": 20230530, "haystack_session_ids": "s1", "haystack_dates": {"d": 1},
    "haystack_sessions": [["not a turn"]], "answer_session_ids": [3],
}


@pytest.fixture(scope="module")
def fuzz_base() -> list[dict]:
    return [x.to_dict() for x in syn.synthetic(4, 11, sessions_per_instance=(2, 3), turns_per_session=4)]


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    mutation=st.sampled_from(_MUTATIONS),
    stream=st.booleans(),
)
def test_fuzz_schema_errors(fuzz_base: list[dict], scratch: Path, data, mutation: str, stream: bool) -> None:
    recs = copy.deepcopy(fuzz_base)
    idx = data.draw(st.integers(0, len(recs) - 1), label="index")
    rec = recs[idx]
    qid = rec["question_id"]
    if mutation == "drop":
        key = data.draw(st.sampled_from(FIELDS), label="key")
        del rec[key]
        expect = key
    elif mutation == "wrong_type":
        key = data.draw(st.sampled_from(FIELDS), label="key")
        rec[key] = _WRONG[key]
        expect = key
    elif mutation == "lengths":
        key = data.draw(st.sampled_from(FIELDS[5:8]), label="key")
        if data.draw(st.booleans(), label="grow"):
            rec[key].append(copy.deepcopy(rec[key][0]))
        else:
            rec[key].pop()
        expect = "haystack_sessions"
    else:
        s = data.draw(st.integers(0, len(rec["haystack_sessions"]) - 1), label="session")
        t = data.draw(st.integers(0, len(rec["haystack_sessions"][s]) - 1), label="turn")
        key = data.draw(st.sampled_from(("role", "content")), label="turn key")
        if mutation == "turn_key":
            del rec["haystack_sessions"][s][t][key]
        else:
            rec["haystack_sessions"][s][t][key] = 5 if key == "content" else "narrator"
        expect = f"haystack_sessions[{s}][{t}].{key}"
    path = _write(scratch / "fuzz.json", recs)
    try:
        lme.load(path, stream_threshold=0 if stream else 10**9, chunk_chars=257)
    except LongMemEvalError as err:
        msg = str(err)
        assert "fuzz.json" in msg
        assert f"instance {idx}" in msg and err.index == idx
        if isinstance(rec.get("question_id"), str):
            assert repr(qid) in msg
        assert expect in msg and expect in (err.field or "")
    else:  # pragma: no cover - a failure path
        pytest.fail(f"no error for {mutation} on instance {idx}")


@settings(max_examples=40, deadline=None)
@given(data=st.data(), stream=st.booleans(), chunk=st.integers(1, 300))
def test_fuzz_invalid_json(fuzz_base: list[dict], scratch: Path, data, stream: bool, chunk: int) -> None:
    text = json.dumps(fuzz_base[:2], indent=1)
    if data.draw(st.booleans(), label="truncate"):
        cut = data.draw(st.integers(0, len(text) - 1), label="cut")
        text = text[:cut]
    else:
        at = data.draw(st.integers(0, len(text)), label="at")
        junk = data.draw(st.sampled_from(['"', "{", "}", ",", "]", "x", ":", "\\", "\n", "[", "1"]))
        text = text[:at] + junk + text[at:]
    try:
        json.loads(text)
        reference = None
    except json.JSONDecodeError as exc:
        reference = exc
    path = scratch / "fuzz_json.json"
    path.write_text(text, encoding="utf-8")
    try:
        lme.load(path, stream_threshold=0 if stream else 10**9, chunk_chars=chunk)
    except LongMemEvalError as err:
        assert "fuzz_json.json" in str(err)
        if reference is not None and err.line is not None and text.lstrip().startswith("["):
            # (A record can fail validation before the parser reaches the syntax error,
            # e.g. "[" inserted at the start makes record 0 a list: that error has no
            # line/column and names the record instead.)
            # Same position as the standard library reports for the whole text (a text
            # that is not an array at all is reported at its first character instead).
            assert (err.line, err.column) == (reference.lineno, reference.colno)
            assert f"line {reference.lineno}, column {reference.colno}" in str(err)
    else:
        assert reference is None, "invalid JSON was accepted"


# ----------------------------------------------------------------- sampling


def _population() -> list[Instance]:
    a = syn.synthetic(10, 1, question_types=["single-session-user"], turns_per_session=4,
                      sessions_per_instance=1)
    b = syn.synthetic(6, 2, question_types=["knowledge-update"], turns_per_session=4,
                      sessions_per_instance=2)
    c = syn.synthetic(4, 3, question_types=["temporal-reasoning"], turns_per_session=4,
                      sessions_per_instance=2)
    return a + b + c


def test_sample_stratified_largest_remainder() -> None:
    pop = _population()
    # n=7 of 10/6/4: quotas 3.5, 2.1, 1.4 -> floors 3, 2, 1 and the leftover slot goes
    # to the largest remainder (0.5, single-session-user).
    got = lme.sample(pop, 7, seed=5)
    counts = Counter(x.question_type for x in got)
    assert counts == {"single-session-user": 4, "knowledge-update": 2, "temporal-reasoning": 1}
    # n=5: quotas 2.5, 1.5, 1.0 -> floors 2, 1, 1 and a tie 0.5/0.5 for the last slot.
    for seed in range(6):
        counts = Counter(x.question_type for x in lme.sample(pop, 5, seed=seed))
        assert counts["temporal-reasoning"] == 1
        assert sorted([counts["single-session-user"], counts["knowledge-update"]]) in ([1, 3], [2, 2])
        assert counts["single-session-user"] + counts["knowledge-update"] == 4


def test_sample_deterministic_order_and_bounds() -> None:
    pop = _population()
    a = lme.sample(pop, 8, seed=3)
    assert a == lme.sample(pop, 8, seed=3)
    assert any(lme.sample(pop, 8, seed=s) != a for s in range(4, 10))
    positions = [pop.index(x) for x in a]
    assert positions == sorted(positions) and len(set(positions)) == 8
    plain = lme.sample(pop, 8, seed=3, stratify=False)
    assert len({x.question_id for x in plain}) == 8
    assert lme.sample(pop, len(pop), seed=0) == pop
    assert lme.sample(pop, 0, seed=0) == []
    with pytest.raises(ValueError, match="n=21 .* population of 20"):
        lme.sample(pop, 21, seed=0)
    with pytest.raises(ValueError):
        lme.sample(pop, -1, seed=0)


# ----------------------------------------------------------------- synthetic


def test_write_synthetic_s_sized_round_trip(scratch: Path) -> None:
    size = {"sessions_per_instance": 50, "turns_per_session": 10}
    path = syn.write_synthetic(scratch / "synthetic_s.json", 3, 42, **size)
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert [sorted(r) for r in raw] == [sorted(FIELDS)] * 3
    loaded = lme.load(path)
    assert loaded == syn.synthetic(3, 42, **size)
    assert lme.load(path, stream_threshold=0, chunk_chars=1000) == loaded
    assert [x.to_dict() for x in loaded] == raw
    for inst in loaded:
        assert len(inst.haystack_sessions) == 50
        assert all(len(s) == 10 for s in inst.haystack_sessions)


def test_synthetic_deterministic_and_seed_dependent() -> None:
    a = syn.synthetic(6, 7)
    assert a == syn.synthetic(6, 7)
    assert syn.synthetic(3, 7) == a[:3]
    b = syn.synthetic(6, 8)
    assert all(x.to_dict() != y.to_dict() for x, y in zip(a, b, strict=True))
    assert len({x.question_id for x in syn.synthetic(60, 1)}) == 60


def _words_in(text: str, phrase: str) -> bool:
    return re.search(r"\b" + re.escape(phrase.lower()) + r"\b", text.lower()) is not None


def test_synthetic_evidence_and_answers() -> None:
    data = syn.synthetic(36, 3, sessions_per_instance=(2, 8))
    assert Counter(x.question_type for x in data) == {t: 6 for t in lme.QUESTION_TYPES}
    for inst in data:
        evidence = [(sid, t) for sid, _, turns in inst.sessions() for t in turns if t.has_answer]
        other = [t for _, _, turns in inst.sessions() for t in turns if not t.has_answer]
        assert evidence, inst.question_id
        # The answer is verbatim in an evidence turn and in no other turn.
        assert any(inst.answer in t.content for _, t in evidence)
        assert not any(_words_in(t.content, inst.answer) for t in other)
        # Evidence user turns are first-person statements.
        for _, t in evidence:
            if t.role == "user":
                assert FIRST_PERSON.match(t.content), t.content
        # Answer sessions are exactly the sessions holding evidence.
        assert sorted({sid for sid, _ in evidence}) == sorted(inst.answer_session_ids)
        need = 1 if inst.question_type.startswith("single-session") else 2
        assert len(inst.answer_session_ids) == need
        # Chronological sessions, question asked afterwards, user turns first.
        dates = [lme.parse_date(d) for d in inst.haystack_dates]
        assert dates == sorted(dates) and len(set(dates)) == len(dates)
        assert lme.parse_date(inst.question_date) > dates[-1]
        for turns in inst.haystack_sessions:
            assert [t.role for t in turns] == ["user", "assistant"] * (len(turns) // 2)
    ku = [x for x in data if x.question_type == "knowledge-update"]
    for inst in ku:  # the answer is in the later of the two evidence sessions
        later = inst.haystack_session_ids.index(inst.answer_session_ids[1])
        assert any(inst.answer in t.content for t in inst.haystack_sessions[later] if t.has_answer)
    tr = [x for x in data if x.question_type == "temporal-reasoning"]
    for inst in tr:  # the answer is the earlier event
        earlier = inst.haystack_session_ids.index(inst.answer_session_ids[0])
        assert any(inst.answer in t.content for t in inst.haystack_sessions[earlier] if t.has_answer)


def test_synthetic_small_talk_is_varied() -> None:
    data = syn.synthetic(4, 9, sessions_per_instance=50, turns_per_session=10)
    user = [t.content for x in data for _, _, turns in x.sessions() for t in turns
            if t.role == "user" and not t.has_answer]
    assert len(user) >= 4 * 50 * 4
    assert len(set(user)) > 0.6 * len(user)
    first_person = [u for u in user if FIRST_PERSON.match(u)]
    assert len(first_person) > 0.2 * len(user)


def test_synthetic_sizes_and_abstention() -> None:
    one = syn.synthetic(5, 1, sessions_per_instance=1, turns_per_session=4,
                        question_types=["single-session-user", "single-session-preference"])
    assert all(len(x.haystack_sessions) == 1 and len(x.haystack_sessions[0]) == 4 for x in one)
    with pytest.raises(ValueError, match="multi-session"):
        syn.synthetic(2, 1, sessions_per_instance=1)
    with pytest.raises(ValueError, match="turns_per_session"):
        syn.synthetic(2, 1, turns_per_session=2)
    with pytest.raises(ValueError, match="unknown question types"):
        syn.synthetic(2, 1, question_types=["trivia"])
    ranged = syn.synthetic(30, 2, sessions_per_instance=(1, 6))
    for x in ranged:
        lo = 1 if x.question_type.startswith("single-session") else 2
        assert lo <= len(x.haystack_sessions) <= 6
    abstain = syn.synthetic(12, 4, abstention_rate=1.0)
    assert all(x.is_abstention and x.question_id.endswith("_abs") for x in abstain)
    assert not any(x.has_labels for x in abstain)
    assert all(x.answer.startswith("The information provided is not enough") for x in abstain)
