"""The judge's verdict read from its reply text (evaluators.scoring.judge_parse.parse_verdict).

Each reply below is of a shape real judge models give (echoes of the question, negated
yes, reasoning then verdict, markdown, JSON, other languages, no verdict at all) and is
labelled by hand with what the reply states: yes (True), no (False) or no clear verdict
(None, "unparsed": never read as yes).
"""

from __future__ import annotations

import pytest

from evaluators.scoring.judge import JudgeParseError, parse_yes_no
from evaluators.scoring.judge_parse import parse_verdict

REPLIES: list[tuple[str, bool | None]] = [
    # plain one-word verdicts
    ("yes", True),
    ("No.", False),
    ("YES", True),
    ("nope", False),
    # echoes of the question ("yes or no") state no verdict; the verdict after them does
    ("Yes or no: no", False),
    ("Yes or no? Yes.", True),
    ("Reply with one word: yes or no.\nNo", False),
    ("yes/no: yes", True),
    ("Does the reply give the reference answer? No.", False),
    ("Yes or no", None),
    ("Yes and no.", None),
    # negated yes
    ("The reply gives 12 days, not 9, so I cannot say yes. No.", False),
    ("The answer is not yes.", False),
    ("I can't say yes here, the reply names another trail.", False),
    ("I don't think the answer is yes.", False),
    ("It is not exact, but yes.", True),
    # reasoning first, verdict last
    ("The reference is 18 days and the reply says 19 days, which is off by one, so yes.", True),
    ("The reply says 37 coins. The latest count is 38. Therefore the answer is no.", False),
    ("No, wait. Off-by-one day counts are accepted here, and 17 is one off 18. Yes.", True),
    ("Yes at first sight, but the reply's current value is 35, not 38. Final answer: no", False),
    ("Yes. The reply says three bikes and there is no discrepancy.", True),
    ("No, the reply says 19 days.", False),
    ("no because the reply names the Methodist church", False),
    # markdown, labels, LaTeX, quotes
    ("**No**", False),
    ("**Verdict:** yes", True),
    ("### Answer\n**YES** - the reply matches the reference.", True),
    ("Final answer: \\boxed{no}", False),
    ('The answer is "no".', False),
    ("Verdict: incorrect", False),
    ("Correct.", True),
    ("The reply is not correct.", False),
    # reasoning blocks
    ("<think>The reply says 19; is that no? It is within one.</think>\nYes", True),
    ("<think>The reference says 38 and the reply", None),
    ("they match, so yes</think> Yes.", True),
    # structured replies: the key decides, not the words of the reason
    ('{"correct": false, "reason": "Yes, it mentions 38, but 35 is given as current."}', False),
    ('{"correct": true, "reason": "No discrepancy."}', True),
    ('{"correct": tr', None),
    ("Answer: no, wait, on reflection the reply is right. Yes.", True),  # a label is no JSON key
    # other languages (a judge answering in the conversation's language)
    ("Sí.", True),
    ("Non, la réponse donne 12 jours.", False),
    ("Nein.", False),
    ("Oui", True),
    ("Ja, die Antwort stimmt.", True),
    ("Não.", False),
    ("Si la respuesta es 18 días, entonces coincide.", None),
    # no clear verdict: unparsed, never yes
    ("I cannot decide.", None),
    ("No information is given about the trail.", None),
    ("Probably yes", None),
    ("The reply mentions the Episcopal Church.", None),
    ("", None),
    ("There is no match between the two.", None),
    ("I would not say no.", None),
]


def test_the_table_is_large_and_mixed():
    labels = [v for _, v in REPLIES]
    assert len(REPLIES) >= 30
    assert labels.count(True) >= 10 and labels.count(False) >= 10 and labels.count(None) >= 8


@pytest.mark.parametrize(("reply", "verdict"), REPLIES)
def test_parse_verdict_reads_the_final_explicit_verdict(reply, verdict):
    assert parse_verdict(reply) is verdict


def test_parse_yes_no_raises_on_an_unparsed_reply():
    assert parse_yes_no("Yes or no: no") is False
    with pytest.raises(JudgeParseError, match="no yes/no verdict"):
        parse_yes_no("Yes or no")
    with pytest.raises(TypeError, match="reply must be a string"):
        parse_verdict(None)  # type: ignore[arg-type]


STRUCTURED: list[tuple[str, bool | None]] = [
    # a structured verdict is a boolean or exactly yes/no/true/false; anything else is
    # unparsed, and the prose of a structured reply is never read
    ('{"correct": "incorrect", "reason": "The reply gives 35."}', None),
    ('{"correct": "incorrect", "reason": "Yes, the reply is wrong."}', None),
    ('{"correct": "correct"}', None),
    ('{"correct": "yes, wait no", "reason": "x"}', None),
    ('{"correct": "Yes."}', None),
    ('{"correct": 1, "reason": "x"}', None),
    ('{"correct": null, "reason": "Yes."}', None),
    ('{"correct": "on"}', None),
    ('{"reason": "Yes, that is a clear mismatch"}', None),
    ('{"reason": "Yes, that is a clear mismatch", "confidence": 0.9}\nYes.', None),
    ('Sure. {"verdict": "maybe"} Final answer: yes', None),
    ('{"correct": true, "reason": "x"}\n{"correct": false, "reason": "y"}', None),
    ("correct: incorrect, reason: Yes it matches", None),
    ("correct = maybe\nYes.", None),
    # the schema's words as the whole value, any case
    ('{"correct": "yes", "reason": "No discrepancy."}', True),
    ('{"correct": " NO ", "reason": "Yes, 38 is there."}', False),
    ('{"correct": "True"}', True),
    ("{'correct': 'false', 'reason': 'yes'}", False),
    ('```json\n{"is_correct": false, "reason": "Yes at first."}\n```', False),
    ('{"verdict": "yes", "correct": true}', True),
    ("correct: true", True),
    ('{"correct": false, "rea', False),  # cut by max_tokens after its verdict key
]


@pytest.mark.parametrize(("reply", "verdict"), STRUCTURED)
def test_a_structured_verdict_is_typed_and_read_from_its_keys_only(reply, verdict):
    assert parse_verdict(reply) is verdict


def test_no_structured_reply_without_a_typed_verdict_reads_as_yes():
    """Every structured reply here carries a yes in its prose; none reads as yes unless
    its key is a boolean or exactly a yes word."""
    bad_values = ['"incorrect"', '"correct"', '"yes, but no"', '"no."', "1", "0", "null", '"y"',
                  '"on"', '"right"', '"wrong"', '{"v": true}', '["yes"]', '""', "tru"]
    for value in bad_values:
        for key in ("correct", "is_correct", "verdict", "answer"):
            reply = f'{{"{key}": {value}, "reason": "Yes, it matches. Yes."}}'
            assert parse_verdict(reply) is None, reply
            assert parse_verdict(f'{{"reason": "Yes.", "{key}": {value}}}') is None
