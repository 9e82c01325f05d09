"""memkit.residue.values: many values at once (:func:`scan_values`) against one at a time
(:func:`scan_value`), and :func:`json_strings` against :func:`strings_in`."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit.residue.report import ResidueReport
from memkit.residue.values import json_strings, scan_value, scan_values, strings_in
from memkit.scan.matching import matcher
from memkit.scan.multi import MultiMatcher

SECRETS = ["XQ7-VIOLET-3829", "Gießen-Nord", "5551234", "Giessen-Ost"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_json_strings_are_the_strings_strings_in_yields(value):
    assert json_strings(value) == [text for _, text in strings_in(value, "")]


def test_json_strings_stop_where_strings_in_stops():
    deep: object = "at the bottom"
    for k in range(60):
        deep = [deep, str(k)] if k % 2 else {"k": deep, str(k): 1.5}
    assert json_strings(deep) == [text for _, text in strings_in(deep, "")]
    assert "at the bottom" not in json_strings(deep)


def _doc(rng: random.Random, k: int) -> str:
    """A row as memory layers write them: JSON with escapes, a copy (or none) somewhere."""
    filler = " ".join(rng.choice(["cat", "window", "\u201cquoted\u201d", "line\nbreak", "tab\there"]) for _ in range(8))
    where = k % 9
    body: dict = {"document": filler, "metadata": {"user": f"u{k}"}}
    if where == 1:
        body["document"] += " XQ7-VIOLET-3829"
    elif where == 2:  # only an escape spells it
        return json.dumps({"document": filler + " XQ7-VIOLET-3829"}).replace("VIOLET", "VIO\\u004cET")
    elif where == 3:  # JSON inside JSON inside JSON: only the third decoding reads "ß" (folded: "ss")
        body["metadata"]["raw"] = json.dumps({"inner": json.dumps({"deep": "Gießen-Ost"})})
    elif where == 4:  # a character that folds to two
        body["document"] += " giessen nord"
    elif where == 5:
        body["metadata"]["Gießen-Nord"] = "as a key"
    elif where == 6:  # a number the decoder writes otherwise (5.551234e6 -> 5551234.0)
        body["metadata"]["n"] = 5.551234e6
        return json.dumps(body).replace("5551234.0", "5.551234e6")
    elif where == 7:  # the copy split by an escape only a decoder reads as a separator
        body["document"] += " XQ7\\nVIOLET\\t3829"
    return json.dumps(body, ensure_ascii=k % 2 == 0)


@pytest.mark.parametrize("many", [False, True])
def test_many_values_at_once_have_the_hits_of_one_at_a_time(many):
    rng = random.Random(3)
    items: list[tuple[str, object]] = [(f"row{k}", _doc(rng, k)) for k in range(90)]
    items += [("blob", b"\x00XQ7-VIOLET-3829\x00"), ("list", ["nothing", '{"a": "5551234"}']),
              ("broken", '{"document": "XQ7-VIOLET-3829'), ("plain", "x")]
    for m in ([MultiMatcher(SECRETS)] if many else [matcher(s) for s in SECRETS]):
        one = ResidueReport(target="t")
        for location, value in items:
            scan_value(one, "disk_sqlite", location, value, m)
        at_once = ResidueReport(target="t")
        scan_values(at_once, "disk_sqlite", items, m)
        assert at_once.to_dict() == one.to_dict()
        assert one.total >= 5  # the planted copies are there to be found
    assert any(".deep" in h.location for hits in one.surfaces.values() for h in hits)  # the third decoding


@pytest.mark.parametrize("text", [
    "XQ7<!--" + "\u00e9" * 300 + "-->VIOLET-3829",
    "XQ7<b " + "\u00e9" * 300 + ">VIOLET-3829",
    '{"note": "XQ7<i title=' + "\u4e00" * 200 + '>VIOLET-3829"}',
    "XQ7<i title=" + "\U0001d400" * 480 + ">VIOLET-3829",
])
def test_a_tag_of_500_characters_is_one_separator_in_bytes_too(text):
    """A tag or comment body is bounded in characters, in text and in bytes alike: a copy
    split by one of up to 500 characters of several bytes each is found by every reader
    (the byte pattern, the prefilter of many values, many secrets at once, the UTF-16
    reading), not by the text pattern alone."""
    from memkit.scan.encodings import wide_spans
    from memkit.scan.multi import may_hold

    one, many = matcher(SECRETS[0]), MultiMatcher(SECRETS)
    assert one.spans(text) and may_hold(one, [text]) == [True] and may_hold(many, [text]) == [True]
    assert [(s, e, i) for s, e, _, i in many.spans(text)] == [(s, e, 0) for s, e, _ in one.spans(text)]
    assert one.byte_spans(text.encode()) and many.byte_spans(text.encode())
    for m in (one, many):
        at_once, alone = ResidueReport(target="t"), ResidueReport(target="t")
        scan_values(at_once, "disk_sqlite", [("row", text)], m)
        scan_value(alone, "disk_sqlite", "row", text, m)
        assert at_once.to_dict() == alone.to_dict() and alone.total == 1
    assert wide_spans(b"\x00" * 8 + text.encode("utf-16-le"), one)
