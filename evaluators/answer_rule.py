"""PR's default answer rule, ``rule="lme"``: a rule that agrees with LongMemEval's judge.

The study's rule (``rule="study"``, :func:`evaluators.metrics.score_answers`) counts an
answer correct when cosine(answer, reference) > 0.50 or every content word of the
reference is a token of the answer. Checked against LongMemEval's official judging
semantics (``evaluate_qa.py`` of the LongMemEval repository: a yes/no judge per
question type), it is wrong in whole classes of cases: number words are stop words,
a negated mention counts, a confident made-up answer to an abstention question counts,
and a different answer of the same kind passes the cosine. This module holds the
text side of the rule that fixes these classes; :func:`evaluators.metrics.score_answers`
embeds the texts and calls :func:`lme_verdict` with the cosine.

The ``lme`` rule, in order (each step is a function below):

1. **Abstention** (:func:`abstains`): for a question id ending ``_abs`` the answer is
   correct iff it abstains (says the information is not available, was not mentioned,
   or that it does not know); any specific answer is wrong. For other questions an
   abstaining answer is never rescued by the cosine.
2. **Numbers** (:func:`normalize_numbers`): on both sides number words become digits
   (``text2num``'s ``alpha2digit``, threshold 0, so ``"one"`` → ``1``), ordinals lose
   their suffix (``21st`` → ``21``), ``$1,200`` → ``1200 dollars``, ``42%`` → ``42
   percent``, digit groups are joined (``1,000`` → ``1000``) and numbers compare by value
   (``38.0`` equals ``38``). When the reference holds numbers, the answer is correct iff
   every one of them occurs in a non-negated clause of the answer, so do the
   reference's key words (step 4: ``GR`` of ``GR-90``), and a time unit
   that follows the number in the reference (second … year) is not replaced by another
   time unit in the answer; the cosine never decides. For ``temporal-reasoning``
   questions a count of days may be off by one (LongMemEval's judge tolerates it).
3. **Negation** (:func:`affirmed_tokens`): the answer is split into clauses (at ``. ;
   : ! ?``, commas, and ``but``/``however``/``although``/``though``/``whereas``); inside a
   clause every token after a negation cue (``not``, ``no``, ``never``, ``n't`` forms,
   ``without``, ``neither``, ``nor``) is negated and does not count as a match.
4. **Content words** (:func:`key_words`): tokens of the reference minus a stop list
   that keeps answer-bearing words (scikit-learn's list without its number words and
   nouns such as ``bill``, ``fire``, ``name``, ``system``, ``first``, ``last``), compared
   as Snowball (Porter2) stems. All present → correct. Otherwise, the same kind but a
   different entity must not pass: the answer is correct only when the reference is
   not a list (no comma, semicolon, ``&``, ``and``, ``or``: every item of a list
   counts), has at least three content words, at most a third of them are missing, none of the
   missing ones is a *key* word (written with a capital letter or a digit in the
   reference: a name, brand, code), and the cosine exceeds the threshold.
5. **Preference rubrics** (``single-session-preference``, a reference of the form "The
   user would prefer …"): the rubric's own words (content words of its non-negated
   "prefer" sentences, minus the question's words and the rubric's boilerplate) are the
   evidence; the answer is correct iff it uses at least one of them and does not
   abstain (LongMemEval's rubric: the reply need not reflect every point, only recall
   and use the user's information correctly).
6. A reference without content words or numbers falls back to the cosine alone.

Source: issue 13 and LongMemEval's official judging semantics (Wu et al., ICLR 2025,
``src/evaluation/evaluate_qa.py``); the agreement set ``tests/data/pr_agreement.csv``
and ``benchmarks/bench_pr_agreement.py`` measure the agreement.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
from text_to_num import alpha2digit

__all__ = [
    "ANSWER_BEARING",
    "LmeVerdict",
    "STOP_WORDS",
    "abstains",
    "affirmed_tokens",
    "key_words",
    "lme_verdict",
    "normalize_numbers",
    "number_values",
]

ANSWER_BEARING = frozenset(
    {
        # number words (digits after normalisation, but kept if a parser leaves one)
        "one", "two", "three", "four", "five", "six", "eight", "nine", "ten", "eleven",
        "twelve", "fifteen", "twenty", "forty", "fifty", "sixty", "hundred", "first",
        "third", "last", "next", "few", "several", "none", "half",
        # nouns and adjectives that answer questions
        "bill", "fire", "system", "name", "front", "back", "top", "bottom", "full",
        "empty", "side", "interest", "detail", "amount", "thick", "thin", "mill", "part",
        "call", "move", "serious", "whole",
    }
)
"""Words in scikit-learn's ``ENGLISH_STOP_WORDS`` that can carry an answer; the
``lme`` rule keeps them as content words."""

STOP_WORDS = frozenset(ENGLISH_STOP_WORDS - ANSWER_BEARING)
"""The ``lme`` rule's stop list: scikit-learn's minus :data:`ANSWER_BEARING`."""

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+")
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b")
_APOSTROPHE = re.compile(r"(?<=\w)['’](?=\w)")
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+$")
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.IGNORECASE)
_MONEY = re.compile(r"([$€£])\s?(\d[\d,]*(?:\.\d+)?)")
_CURRENCY = {"$": "dollars", "€": "euros", "£": "pounds"}
_PERCENT = re.compile(r"(\d)\s?%")
_CLAUSE = re.compile(
    r"[.;:!?\n]+(?:\s|$)|,\s|\s[-–—]\s|\b(?:but|however|although|though|whereas|instead)\b",
    re.IGNORECASE,
)
_NEGATION_CUES = frozenset(
    {
        "not", "no", "never", "without", "neither", "nor", "nothing", "none", "nobody",
        "cannot", "cant", "dont", "doesnt", "didnt", "isnt", "wasnt", "arent", "werent",
        "havent", "hasnt", "hadnt", "wont", "wouldnt", "couldnt", "shouldnt", "aint",
    }
)
_TIME_UNITS = frozenset({"second", "minut", "hour", "day", "week", "month", "year", "decad"})
_PREFERENCE = re.compile(r"\bprefer", re.IGNORECASE)
_RUBRIC_BOILERPLATE = frozenset(
    {
        "user", "prefer", "suggest", "suggestion", "response", "recommend", "recommendation",
        "like", "especi", "specif", "particular", "util", "use", "incorpor", "highlight",
        "showcas", "emphas", "emphasi", "focus", "relat", "relev", "includ", "mention",
        "previous", "past", "tailor", "align", "consid", "option", "idea", "tip", "element",
        "experi", "interest", "their", "might", "would", "also", "ingredi", "thing",
        "advic", "approach", "provid", "general", "generic", "recip", "dish", "meal",
    }
)
_ABSTAIN = re.compile(
    r"\b(?:"
    r"(?:do|did|does)\s*n[o']?t\s+(?:know|have|recall|remember|see|find|mention|tell|say|share|specify|"
    r"provide|state|contain|include|appear)"
    r"|(?:don|didn|doesn)['’]?t\s+(?:know|have|recall|remember|see|find|mention|tell|say|share|specify|"
    r"provide|state|contain|include|appear)"
    r"|(?:have|has|had)\s*n[o']?t\s+(?:been\s+)?(?:mentioned|told|shared|said|specified|provided|stated|given|"
    r"discussed|talked)"
    r"|(?:haven|hasn|hadn)['’]?t\s+(?:been\s+)?(?:mentioned|told|shared|said|specified|provided|stated|"
    r"given|discussed|talked)"
    r"|(?:never|not)\s+(?:been\s+)?(?:mentioned|told|shared|said|specified|provided|stated|given|"
    r"discussed|talked|recorded|available)"
    r"|no\s+(?:information|record|records|mention|details?|data|memory|memories|way\s+to\s+know|"
    r"indication|evidence)"
    r"|not\s+(?:enough|sure|certain|able)|unable\s+to|can(?:no|['’])t\s+(?:determine|tell|find|say|"
    r"know|answer|recall|confirm)|cannot\s+(?:determine|tell|find|say|know|answer|recall|confirm)"
    r"|(?:is|are|was)\s*n[o']?t\s+(?:mentioned|available|specified|provided|known|recorded|stated|clear)"
    r"|(?:isn|aren|wasn)['’]?t\s+(?:mentioned|available|specified|provided|known|recorded|stated|clear)"
    r"|unknown|insufficient|unclear\s+from|no\s+idea|not\s+have\s+(?:that|this|any|enough)"
    r"|(?:but|and)\s+not\s+(?:how|what|when|where|which|who|whether|the\s+(?:number|amount|exact))"
    r"|(?:was|were|is|are)\s*n[o']?t\s+(?:shared|given|told)|(?:wasn|weren|isn|aren)'t\s+(?:shared|given|told)"
    r")\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=1)
def _stemmer() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("english")


def normalize_numbers(text: str) -> str:
    """``text`` with numbers in one form (module doc, step 2): number words → digits
    (``text2num.alpha2digit``, English, threshold 0), ``21st`` → ``21``, ``$1,200`` →
    ``1200 dollars`` (``€`` euros, ``£`` pounds), ``42%`` → ``42 percent``,
    ``1,000`` → ``1000``.

    Args:
        text: any text.

    Returns:
        The normalised text (NFKC).
    """
    text = unicodedata.normalize("NFKC", text)
    text = alpha2digit(text, "en", threshold=0)
    text = _MONEY.sub(lambda m: f"{m.group(2).replace(',', '')} {_CURRENCY[m.group(1)]}", text)
    text = _PERCENT.sub(r"\1 percent", text)
    return _ORDINAL.sub(r"\1", text)


def _raw_tokens(text: str) -> list[str]:
    """Tokens with their case: possessive ``'s`` dropped, inner apostrophes removed,
    ``1,000`` joined."""
    text = _POSSESSIVE.sub("", text)
    text = _APOSTROPHE.sub("", text)
    return [t.replace(",", "") if _THOUSANDS.match(t) else t for t in _TOKEN.findall(text)]


def _stem(token: str) -> str:
    token = token.lower()
    if _NUMBER.match(token):
        return _number_key(token)
    return _stemmer().stemWord(token)


def _number_key(token: str) -> str:
    """A number token by value: ``38.0`` and ``38`` → ``"38"``; ``2.50`` → ``"2.5"``."""
    value = float(token)
    return str(int(value)) if value.is_integer() else repr(value)


def number_values(text: str) -> list[str]:
    """The numbers of ``text`` after :func:`normalize_numbers`, as value keys in order
    (``"I have four, not 38.0"`` → ``["4", "38"]``)."""
    return [_number_key(t) for t in _raw_tokens(normalize_numbers(text)) if _NUMBER.match(t)]


def affirmed_tokens(text: str) -> list[str]:
    """Stemmed tokens of ``text`` (after :func:`normalize_numbers`) outside negated
    scope (module doc, step 3), in order.

    ``"I don't think you told me about the Ferrari"`` → ``["i"]``;
    ``"Not the Porsche, the Ferrari"`` → ``["ferrari"]`` and stop words are kept.
    """
    out: list[str] = []
    for clause in _CLAUSE.split(normalize_numbers(text)):
        negated = False
        for tok in _raw_tokens(clause):
            low = tok.lower()
            if low in _NEGATION_CUES:
                negated = True
                continue
            if not negated:
                out.append(_stem(tok))
    return out


def key_words(reference: str) -> tuple[set[str], set[str]]:
    """Content words of a reference (module doc, step 4) as stems, and the *key* ones
    among them (written with a capital or a digit: names, brands, codes).

    The first token of the reference counts as key only when it is not a stop word and
    is capitalised beyond its first letter or holds a digit (``GR-90``), so a plain
    sentence-initial capital does not make a word key.

    Returns:
        ``(content, key)``, ``key ⊆ content``.
    """
    content: set[str] = set()
    key: set[str] = set()
    for i, tok in enumerate(_raw_tokens(normalize_numbers(reference))):
        if tok.lower() in STOP_WORDS:
            continue
        stem = _stem(tok)
        content.add(stem)
        has_digit = any(c.isdigit() for c in tok)
        capital = tok[:1].isupper() and (i > 0 or any(c.isupper() for c in tok[1:]))
        if has_digit or capital:
            key.add(stem)
    return content, key


def abstains(text: str) -> bool:
    """Whether an answer abstains: says it does not know, that the information was not
    mentioned / is not available / is not enough, or that it cannot determine or find
    it (``_ABSTAIN``: "I don't know", "You didn't mention …", "There is no information
    …", "not enough information", "I'm not sure", "I can't determine …", "unknown").

    LongMemEval counts such an answer correct for an abstention (``_abs``) question,
    including one that names what *was* mentioned instead; any specific answer without
    such a statement is wrong.
    """
    return bool(_ABSTAIN.search(unicodedata.normalize("NFKC", text).replace("’", "'")))


@dataclass(frozen=True)
class LmeVerdict:
    """One answer under the ``lme`` rule.

    Attributes:
        correct: the verdict.
        content_match: every content word and number of the reference occurs,
            non-negated, in the answer (for abstention questions: the answer abstains).
        missing: reference stems / numbers not found (sorted).
        reason: which step decided (``abstention``, ``numbers``, ``words``,
            ``partial``, ``preference``, ``cosine``, ``abstained``, ``missing``).
    """

    correct: bool
    content_match: bool
    missing: tuple[str, ...]
    reason: str


def _units_after(tokens: list[str], value: str) -> set[str]:
    """Time-unit stems directly after each occurrence of number ``value``."""
    out = set()
    for i, t in enumerate(tokens[:-1]):
        if _NUMBER.match(t) and _number_key(t) == value and tokens[i + 1] in _TIME_UNITS:
            out.add(tokens[i + 1])
    return out


def lme_verdict(
    answer: str,
    reference: str,
    cosine: float,
    *,
    question_id: str | None = None,
    question_type: str | None = None,
    question: str | None = None,
    threshold: float = 0.50,
) -> LmeVerdict:
    """Score one answer under the ``lme`` rule (module doc, steps 1–6).

    Args:
        answer: the model's answer.
        reference: the reference answer as text (``"38"``, never ``"38.0"``, though
            numbers compare by value anyway).
        cosine: cosine(answer, reference) of the PR embedder, in [-1, 1].
        question_id: LongMemEval id; a ``_abs`` suffix makes it an abstention question.
        question_type: LongMemEval question type (``temporal-reasoning`` tolerates a
            day count off by one; ``single-session-preference`` scores a rubric).
        question: the question text (its words are not rubric evidence).
        threshold: cosine threshold of the partial-match and fallback steps (strict ``>``).

    Returns:
        An :class:`LmeVerdict`.
    """
    abst = abstains(answer)
    if question_id is not None and question_id.endswith("_abs"):
        return LmeVerdict(abst, abst, () if abst else ("<abstention>",), "abstention")
    have = affirmed_tokens(answer)
    have_set = set(have)

    if question_type == "single-session-preference" and _PREFERENCE.search(reference):
        q_words = {_stem(t) for t in _raw_tokens(normalize_numbers(question or ""))}
        evidence: set[str] = set()
        for sentence in re.split(r"(?<=[.!?])\s+", reference):
            if not _PREFERENCE.search(sentence) or re.search(r"\bnot\s+prefer", sentence, re.I):
                continue
            content, _ = key_words(sentence)
            evidence |= content - q_words - _RUBRIC_BOILERPLATE
        if evidence:
            used = evidence & have_set
            ok = bool(used) and not abst
            return LmeVerdict(ok, len(used) == len(evidence), tuple(sorted(evidence - used)), "preference")

    ref_numbers = number_values(reference)
    if ref_numbers:
        ans_numbers = {t for t in have if _NUMBER.match(t)}
        ref_tokens = [_stem(t) for t in _raw_tokens(normalize_numbers(reference))]
        off_by_one = question_type == "temporal-reasoning" and (
            "day" in ref_tokens or re.search(r"\bdays?\b", question or "", re.I) is not None
        )
        missing = []
        for value in dict.fromkeys(ref_numbers):
            found = value in ans_numbers
            if not found and off_by_one:
                v = float(value)
                found = any(abs(float(a) - v) <= 1 for a in ans_numbers)
            ref_units = _units_after(ref_tokens, value)
            if found and ref_units:
                ans_units = _units_after(have, value)
                if ans_units and not (ans_units & ref_units):
                    found = False
            if not found:
                missing.append(value)
        # the reference's names and codes beside its numbers (``GR`` of ``GR-90``)
        content, key = key_words(reference)
        missing += sorted((key - set(ref_numbers)) - have_set)
        ok = not missing
        return LmeVerdict(ok, ok, tuple(sorted(missing)), "numbers")

    content, key = key_words(reference)
    if not content:
        ok = cosine > threshold and not abst
        return LmeVerdict(ok, False, (), "cosine")
    missing_words = content - have_set
    if not missing_words:
        return LmeVerdict(True, True, (), "words")
    is_list = re.search(r",|;|&|\b(?:and|or)\b", reference, re.IGNORECASE) is not None
    if (
        not is_list
        and len(content) >= 3
        and 3 * len(missing_words) <= len(content)
        and not (missing_words & key)
        and cosine > threshold
        and not abst
    ):
        return LmeVerdict(True, False, tuple(sorted(missing_words)), "partial")
    return LmeVerdict(False, False, tuple(sorted(missing_words)), "abstained" if abst else "missing")
