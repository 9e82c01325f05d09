"""PR's default answer rule, ``rule="lme"``: a rule that agrees with LongMemEval's judge.

The study's rule (``rule="study"``, :func:`evaluators.scoring.metrics.score_answers`) counts an
answer correct when cosine(answer, reference) > 0.50 or every content word of the
reference is a token of the answer. Checked against LongMemEval's official judging
semantics (``evaluate_qa.py`` of the LongMemEval repository: a yes/no judge per
question type), it is wrong in whole classes of cases: number words are stop words,
a negated mention counts, a confident made-up answer to an abstention question counts,
and a different answer of the same kind passes the cosine. This module holds the
text side of the rule that fixes these classes; :func:`evaluators.scoring.metrics.score_answers`
embeds the texts and calls :func:`lme_verdict` with the cosine.

The ``lme`` rule, in order (each step is a function below; docs/metrics.md spells
out every form and cue):

1. **Abstention** (:func:`abstains`): for a question id ending ``_abs`` the answer is
   correct iff it abstains (says the information is not available, was not mentioned,
   was not shared, cannot be found, or that it does not know) and declines to give
   the fact; any specific answer is wrong, and so is a doubt beside a specific value:
   a number, a name, or a guess ("I don't remember exactly, but maybe your cat is
   called Miso."). For other questions an abstaining answer is never rescued by the
   cosine.
2. **Numbers** (:func:`normalize_numbers`): on both sides number words become digits
   (``text2num``'s ``alpha2digit``, threshold 0, piecewise on long texts), ordinals,
   money, percent, ``k``/``million``, ``and a half``, ``a dozen``, signs, clock times
   (24 h), ISO dates, Roman numerals after a capitalised word and ``No. 5`` are put in
   one form, and numbers compare by exact value (``Decimal``). When the reference holds
   numbers, the answer is correct iff every one of them occurs in a non-negated clause
   of the answer *with the reference's unit* (:func:`_number_found`: the word after the
   number, or the noun a "How many …" question counts, is not replaced by another; a
   duration has no extra part), so do the reference's key words (step 4: ``GR`` of
   ``GR-90``); the cosine never decides. For ``temporal-reasoning`` questions a count
   of days may be off by one (LongMemEval's judge tolerates it); other numbers are exact.
3. **Negation** (:func:`affirmed_tokens`): the answer is split into clauses (at ``. ;
   : ! ?``, commas, ``but``/``however``/``although``/``though``/``whereas``/``instead``/
   ``yet`` and ``and now|then|…``); inside a clause every token after a negation cue
   (``not``, ``no``, ``never``, ``n't`` forms, ``without``, ``neither``, ``nor``, and the
   rejections ``instead of``/``rather than``/``except``/``other than``) is negated and
   does not count as a match; a clause ``X was not …``/``X is wrong``/``X? No`` is
   negated whole; idioms (``no doubt``, ``none other than``, ``not only``) and an
   answering ``No,`` do not negate; a cue followed only by stop words is the answer.
4. **Content words** (:func:`key_words`): tokens of the reference minus a stop list
   that keeps answer-bearing words (scikit-learn's list without its number words and
   nouns such as ``bill``, ``fire``, ``name``, ``system``, ``first``, ``last``), compared
   as accent-folded Snowball (Porter2) stems. All present → correct. Otherwise, the same
   kind but a different entity must not pass: the answer is correct only when the
   reference is not a list (no comma, semicolon, ``&``, ``and``, ``or``: every item of a
   list counts), has at least three content words, at most a third of them are
   missing, none of the missing ones is a *key* word (written with a capital letter or
   a digit in the reference: a name, brand, code) or replaced by another content word
   (:func:`_substituted`), and the cosine exceeds the threshold.
5. **Alternatives** (:func:`offers_alternatives`): an answer that steps 2 or 4 would
   accept is wrong when it hedges over several candidates of the reference's kind.
6. **Preference rubrics** (``single-session-preference``, a reference of the form "The
   user would prefer …"): the rubric's own words (content words of its non-negated
   "prefer" sentences, minus the question's words and the rubric's boilerplate) are the
   evidence; the answer is correct iff it uses at least one of them and does not
   abstain (LongMemEval's rubric: the reply need not reflect every point, only recall
   and use the user's information correctly).
7. A reference without content words or numbers: its polar/quantifier word (``yes``,
   ``no``, ``both``, ``none`` …) must be in the answer; then the cosine alone decides.
8. **Knowledge updates** (:func:`stale_value`, checked whenever steps 2 or 4 would say
   correct for a ``knowledge-update`` question): the latest value is the answer, so an
   answer that gives another value as current is wrong even when it mentions the
   reference ("These days you drive a Honda Civic; the Toyota Corolla was your old
   car." for "Toyota Corolla"): a clause with another value of the reference's kind
   outranks (current > plain > past, by cues such as "now"/"these days" and "used
   to"/"your old") every clause that holds the reference.

Source: issues 13 and 26 and LongMemEval's official judging semantics (Wu et al., ICLR 2025,
``src/evaluation/evaluate_qa.py``); the agreement set ``tests/data/pr_agreement.csv``
and ``benchmarks/bench_pr_agreement.py`` measure the agreement.

Why this module is long: the rule is one ordered algorithm whose steps share one
tokenizer, one clause splitter and one negation scope (a number counts only in an
affirmed clause, an abstention only where no value is offered, a stale value only by
its clause's rank). Split into files, each step would import the others' private
patterns; kept together, each step reads next to the helpers it relies on.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

from evaluators.scoring.answer_abstain import (
    ANSWER_BEARING,
    CLAUSE,
    NOT_A_VALUE,
    SENTENCE,
    STOP_WORDS,
    abstains,
)
from evaluators.scoring.answer_numbers import (
    NUMBER,
    normalize_numbers,
    number_key,
    number_values,
    raw_tokens,
    stem_of,
)

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
    "offers_alternatives",
    "stale_value",
]


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


_NOT_NEGATING = re.compile(
    r"\b(?:no\s+(?:doubt|wonder|question)|without\s+(?:a\s+)?(?:doubt|question)"
    r"|(?:none|nobody|no\s+one|nothing)\s+(?:other|else)\s+than|not\s+(?:only|just|merely|to\s+mention)"
    r"|(?:do|does|did|is|was|are|were)(?:n['’]?t|\s+not)\s+(?:only|just|merely))\b",
    re.IGNORECASE,
)
"""Idioms whose negation word does not negate what follows ("no doubt it was Tokyo",
"none other than Tokyo", "not only Tokyo but also Kyoto"): removed before scoping."""
_REJECT_BEFORE = re.compile(r"\b(?:instead\s+of|rather\s+than|except(?:\s+for)?|excluding|other\s+than)\b", re.I)
"""Cues that reject the phrase after them ("Osaka instead of Tokyo"): become ``not``."""
_REJECT_QUESTION = re.compile(r"(?:^|(?<=[.!?;\n]))([^.!?;\n]+)\?\s*(?:no|nope)\b", re.IGNORECASE)
"""A phrase questioned and then denied ("Tokyo? No, Osaka."): the phrase is negated."""
_INTERJECTION_NO = re.compile(
    r"(^|[.!?;]\s+)(?:no|nope)\b(?=\s*,|\s+(?:it|you|that|this|they|we|i|he|she)\b)", re.IGNORECASE
)
"""A clause-initial "No" answering a premise ("No, it was Tokyo."): not a cue."""
_REJECT_AFTER = re.compile(
    r"\b(?:(?:is|was|are|were)\s+(?:not|wrong|incorrect|mistaken)|(?:isn|wasn|aren|weren)['’]?t)\b",
    re.IGNORECASE,
)
"""A copula negated after its subject ("Tokyo was not where you went", "Tokyo is
wrong"): the whole clause is negated."""


def affirmed_tokens(text: str) -> list[str]:
    """Stemmed tokens of ``text`` (after :func:`normalize_numbers`) outside negated
    scope (module doc, step 3), in order.

    A clause is cut at ``. ; : ! ?``, commas, dashes, ``but``/``however``/``although``/
    ``though``/``whereas``/``instead``/``yet`` and ``and now|then|later|currently|also``.
    Inside a clause every token after a negation cue is negated; a cue followed only by
    stop words ("You have none.", "None of them") is itself the affirmed answer.
    Rejections before the word ("instead of", "rather than", "except", "other than"),
    after it ("Tokyo was not …", "Tokyo is wrong", "Tokyo? No, …") negate it; idioms
    (:data:`_NOT_NEGATING`) and an answering "No," / "No it was …" do not negate.

    ``"I don't think you told me about the Ferrari"`` → ``["i"]``;
    ``"Not the Porsche, the Ferrari"`` → ``["ferrari"]`` and stop words are kept.
    """
    return [stem for clause in _scoped_clauses(text) for _, stem, affirmed in clause if affirmed]


def _scoped_clauses(text: str) -> list[list[tuple[str, str, bool]]]:
    """:func:`affirmed_tokens` clause by clause: per clause, ``(token, stem, affirmed)``
    for every token (``token`` with its case, after :func:`normalize_numbers`)."""
    text = normalize_numbers(text)
    text = _NOT_NEGATING.sub(" ", text)
    text = _REJECT_QUESTION.sub(lambda m: f"not {m.group(1)}. ", text)
    text = _INTERJECTION_NO.sub(r"\1", text)
    text = _REJECT_BEFORE.sub(" not ", text)
    out: list[list[tuple[str, str, bool]]] = []
    for clause in CLAUSE.split(text):
        if clause is None:
            continue
        negated = bool(_REJECT_AFTER.search(clause))
        tokens = raw_tokens(clause)
        scoped = []
        for i, tok in enumerate(tokens):
            low = tok.lower()
            if low in _NEGATION_CUES:
                # a cue followed only by stop words is the answer ("You have none.")
                scoped.append((tok, stem_of(tok), all(t.lower() in STOP_WORDS for t in tokens[i + 1 :])))
                negated = True
                continue
            scoped.append((tok, stem_of(tok), not negated))
        out.append(scoped)
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
    for i, tok in enumerate(raw_tokens(normalize_numbers(reference))):
        if tok.lower() in STOP_WORDS:
            continue
        stem = stem_of(tok)
        content.add(stem)
        has_digit = any(c.isdigit() for c in tok)
        capital = tok[:1].isupper() and (i > 0 or any(c.isupper() for c in tok[1:]))
        if has_digit or capital:
            key.add(stem)
    return content, key


@dataclass(frozen=True)
class LmeVerdict:
    """One answer under the ``lme`` rule.

    Attributes:
        correct: the verdict.
        content_match: every content word and number of the reference occurs,
            non-negated, in the answer (for abstention questions: the answer abstains).
        missing: reference stems / numbers not found (sorted).
        reason: which step decided (``abstention``, ``numbers``, ``words``,
            ``partial``, ``preference``, ``cosine``, ``abstained``, ``missing``,
            ``alternatives``, ``stale``).
    """

    correct: bool
    content_match: bool
    missing: tuple[str, ...]
    reason: str


@lru_cache(maxsize=1)
def _stop_stems() -> frozenset[str]:
    return frozenset(stem_of(w) for w in STOP_WORDS)


def _unit_after(tokens: list[str], i: int) -> str | None:
    """The word (stem) right after the number at ``tokens[i]`` when it is a content
    word (a unit, currency or counted noun: ``miles``, ``dollars``, ``cats``), else None."""
    if i + 1 >= len(tokens):
        return None
    nxt = tokens[i + 1]
    if NUMBER.match(nxt) or nxt in _stop_stems():
        return None
    return nxt


def _number_found(
    have: list[str],
    ref_tokens: list[str],
    value: str,
    ref_values: set[str],
    tolerance: int,
    counted: frozenset[str] = frozenset(),
) -> bool:
    """Whether the answer's affirmed stems ``have`` state ``value`` as the reference does.

    An answer number equal to ``value`` (within ``tolerance``) counts when the word after
    it in the answer is not a different unit/noun than the reference's word after
    ``value`` (the reference's word within the answer's next three tokens also counts),
    and, for a time unit, no further ``[and] N <time unit>`` part the reference lacks
    follows ("2 hours and 30 minutes" does not state "2 hours"). A reference number
    without a word after it takes the question's counted noun (``counted``: the words
    after "How many", e.g. ``bike`` for "How many bikes do I own?").
    """
    ref_units = {u for i, t in enumerate(ref_tokens)
                 if NUMBER.match(t) and number_key(t) == value and (u := _unit_after(ref_tokens, i))}
    ref_units = ref_units or set(counted)
    target = Decimal(value)
    for i, t in enumerate(have):
        if not NUMBER.match(t) or abs(Decimal(number_key(t)) - target) > tolerance:
            continue
        if not ref_units:
            return True
        nxt = have[i + 1 : i + 4]
        hit = next((j for j, w in enumerate(nxt) if w in ref_units), None)
        if hit is None:
            if _unit_after(have, i) is None:
                return True
            continue
        unit = nxt[hit]
        if unit in _TIME_UNITS:
            rest = have[i + 2 + hit : i + 5 + hit]
            if rest and rest[0] == "and":
                rest = rest[1:]
            if len(rest) >= 2 and NUMBER.match(rest[0]) and rest[1] in _TIME_UNITS \
                    and number_key(rest[0]) not in ref_values:
                continue
        return True
    return False


_HOW_MANY = re.compile(r"\bhow\s+many\s+([^?.!;,]*)", re.IGNORECASE)


def _counted_noun(question: str) -> frozenset[str]:
    """Stems of the words a "How many …" question counts, up to the first stop word
    (``"How many pre-1920 American coins do I have?"`` → pre, 1920, american, coin);
    empty for other questions."""
    m = _HOW_MANY.search(normalize_numbers(question))
    if not m:
        return frozenset()
    out = []
    for tok in raw_tokens(m.group(1)):
        if tok.lower() in STOP_WORDS:
            break
        out.append(stem_of(tok))
    return frozenset(out)


_DISJUNCTION = re.compile(r"\b(?:or|either|between|could\s+be|might\s+be)\b", re.IGNORECASE)
_ITEM_SPLIT = re.compile(r",|/|\b(?:or|and|either|between)\b", re.IGNORECASE)


def offers_alternatives(answer: str, reference: str) -> bool:
    """Whether ``answer`` hedges over candidates of the reference's kind (module doc,
    step 0): a sentence that holds the reference's answer also offers another candidate
    of the same kind, joined by ``or``/``either``/``between … and``/"could be"/"might
    be", or, for a single-item reference, in a list of three or more items (commas,
    ``and``) whose other items are short (≤ 2 tokens for numbers, ≤ 3 for names). The
    kind: a number for a numeric reference; a capitalised word for a reference of names
    (a capitalised content word); with a disjunction, any other content word too.
    Items from the first one holding a negation cue on are not offered.

    ``"It could be 35, 36, 37, 38, 39 or 40."`` for ``38`` → True; ``"3 or 4 hours"``
    for ``3-4 hours`` → False (every candidate is the reference's).
    """
    ref_values = set(number_values(reference))
    content, key = key_words(reference)
    ref_is_list = re.search(r",|;|&|\b(?:and|or)\b", reference, re.IGNORECASE) is not None
    # a reference of names (a key word, or a capitalised content word even in first place)
    names = bool(key) or any(t[:1].isupper() and t.lower() not in STOP_WORDS for t in raw_tokens(reference))
    for sentence in SENTENCE.split(normalize_numbers(answer)):
        items = [x for x in _ITEM_SPLIT.split(sentence) if x.strip()]
        if len(items) < 2:
            continue
        disjunction = _DISJUNCTION.search(sentence) is not None
        if not disjunction and (len(items) < 3 or ref_is_list):
            continue
        matching = other = 0
        first = True
        negated = False  # a negation cue also rules out the items after it ("not X or Y")
        for item in items:
            toks = raw_tokens(item)
            if not toks:
                continue
            negated = negated or any(t.lower() in _NEGATION_CUES for t in toks)
            if negated:
                first = False
                continue
            stems = [stem_of(t) for t in toks]
            if ref_values:
                nums = {s for s in stems if NUMBER.match(s)}
                if nums & ref_values:
                    matching += 1
                elif nums and (disjunction or len(toks) <= 2):
                    other += 1
            else:
                if content and content <= set(stems) or (ref_is_list and set(stems) & content):
                    matching += 1
                else:
                    caps = [t for j, t in enumerate(toks) if t[:1].isupper() and not (first and j == 0)
                            and t.lower() not in STOP_WORDS]
                    if names and any(stem_of(t) not in content for t in caps) and (disjunction or len(toks) <= 3):
                        other += 1
                    elif disjunction and any(s not in content and s not in _stop_stems() for s in stems):
                        other += 1
            first = False
        if matching and other:
            return True
    return False


def _substituted(have: list[str], reference: str, missing: set[str]) -> bool:
    """Whether a missing reference word was replaced by another content word in the
    answer, aligning the two content-word sequences with ``difflib.SequenceMatcher``:
    "pilates class" for "yoga class" is a different entity, not a dropped word."""
    stop = _stop_stems()
    ref_seq = [stem_of(t) for t in raw_tokens(normalize_numbers(reference)) if t.lower() not in STOP_WORDS]
    ref_set = set(ref_seq)
    ans_seq = [t for t in have if t not in stop]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ref_seq, ans_seq, autojunk=False).get_opcodes():
        if tag == "replace" and set(ref_seq[i1:i2]) & missing and set(ans_seq[j1:j2]) - ref_set:
            return True
    return False


_PAST = re.compile(
    r"\b(?:used\s+to|use\s+to|previously|formerly|before|earlier|originally|at\s+first|initially|"
    r"no\s+longer|any\s*more|back\s+then|in\s+the\s+past|up\s+from|down\s+from|ago|former|previous|prior|"
    r"last\s+(?:year|month|week|time|summer|winter|spring|fall|autumn)|until|"
    r"(?:your|the|my|his|her|their|an?)\s+old)\b",
    re.IGNORECASE,
)
"""Cues that a clause speaks of a superseded value ("used to", "previously", "your old
car", "up from", "last year")."""
_CURRENT = re.compile(
    r"\b(?i:now|currently|these\s+days|nowadays|today|at\s+the\s+moment|at\s+present|presently|latest|"
    r"most\s+recent(?:ly)?|so\s+far|to\s+date|still|current|newest|updated|up\s+to\s+date)\b"
    r"|\b(?i:your|the|a|my|his|her|their)\s+new\b"
)
"""Cues that a clause states the current value ("now", "these days", "currently", "so
far", "your new car"; ``new`` only in lower case, so "the New York office" is no cue)."""
_AND_NOW = re.compile(r"\band\s+(now|currently|these\s+days|nowadays|today)\b", re.IGNORECASE)
_MONTHS = frozenset(
    {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"}
)
_YEAR = re.compile(r"^(?:1[0-9]|2[0-9])\d\d$")
_UPDATE_CUES = frozenset(
    {"now", "currently", "nowadays", "today", "still", "current", "latest", "newest", "updated",
     "previously", "formerly", "earlier", "originally", "initially", "former", "previous", "prior", "old",
     "new", "ago", "until", "before"}
)


def _update_rank(words: list[str]) -> int:
    """2: the clause states a current value (a :data:`_CURRENT` cue and no :data:`_PAST`
    cue); 0: a superseded one (a past cue, no current cue); 1: neither or both."""
    text = " ".join(words)
    current = _CURRENT.search(text) is not None
    past = _PAST.search(text) is not None
    return 2 if current and not past else 0 if past and not current else 1


def _update_clauses(answer: str, split_and: bool) -> list[list[tuple[str, str, bool]]]:
    """The answer's clauses for :func:`stale_value`: :func:`_scoped_clauses`, with
    "and now"/"and currently" kept as the cue of the next clause, and cut at ``and``
    too when ``split_and``."""
    out: list[list[tuple[str, str, bool]]] = []
    for clause in _scoped_clauses(_AND_NOW.sub(r"; \1", answer)):
        part: list[tuple[str, str, bool]] = []
        for item in clause:
            if split_and and item[0].lower() == "and":
                out.append(part)
                part = []
            else:
                part.append(item)
        out.append(part)
    return [c for c in out if c]


def _other_number(stems: list[str], ref_values: set[str], units: set[str], skip: set[str]) -> bool:
    """Whether a clause's affirmed stems state a number of the reference's kind other
    than the reference's (:func:`stale_value`)."""
    months = {stem_of(m) for m in _MONTHS}
    year_ok = any(_YEAR.match(v) for v in ref_values)
    for i, t in enumerate(stems):
        if not NUMBER.match(t) or t in ref_values or t in skip:
            continue
        if (_YEAR.match(t) and not year_ok) or (i and stems[i - 1] in months):
            continue  # a date
        if i + 1 < len(stems) and stems[i + 1] == "of":
            continue  # a part ("2 of them")
        unit = _unit_after(stems, i)
        if unit is None or not units or unit in units:
            return True
    return False


def stale_value(answer: str, reference: str, question: str | None = None) -> bool:
    """Whether a knowledge-update answer gives another value than the reference as
    current (module doc, step 8), whether or not it also mentions the reference.

    The answer is cut into clauses (:func:`affirmed_tokens`' clauses, and at ``and``
    unless the reference is a list); a clause is *current* (rank 2) with a cue like
    "now", "these days", "currently", "still", "so far", "your new …" and no past cue,
    *past* (rank 0) with a cue like "used to", "previously", "before", "earlier", "your
    old …", "up from", "last year" and no current cue, *plain* (rank 1) otherwise. The
    reference's rank is the lowest, over its numbers (each stated with its unit,
    :func:`_number_found`) or content words, of the highest rank of a clause holding
    it non-negated. Another value of the reference's kind is, for a numeric reference,
    a number with no unit or the reference's unit, not in the question, not a year or
    a day of a month, not a part ("2 of them"); for a reference of names, a capitalised
    content word that is not the reference's or the question's (nor a month or a
    discourse word); otherwise any content word, and then only when the reference
    stands in past clauses alone. The answer is stale when a clause with another value
    outranks every clause of the reference:
    ``"These days you drive a Honda Civic; the Toyota Corolla was your old car."`` for
    ``"Toyota Corolla"`` → True; ``"You used to have 37, but now you have 38."`` for
    ``"38"`` → False.

    Args:
        answer: the model's answer.
        reference: the reference (latest) value.
        question: the question; its words and numbers are never another value.

    Returns:
        True when the answer is stale; False also when the reference is not stated
        whole in the answer (the other steps decide then).

    Source: LongMemEval's knowledge-update judge (``evaluate_qa.py``): a reply that
    mentions older values is correct as long as the answer it gives as current is the
    reference.
    """
    is_list = re.search(r",|;|&|\b(?:and|or)\b", reference, re.IGNORECASE) is not None
    clauses = _update_clauses(answer, split_and=not is_list)
    ranks = [_update_rank([t for t, _, _ in c]) for c in clauses]
    affirmed = [[st for _, st, ok in c if ok] for c in clauses]
    q_stems = {stem_of(t) for t in raw_tokens(normalize_numbers(question or ""))}
    ref_numbers = number_values(reference)

    def rank_of(found) -> int | None:
        hits = [r for r, c in zip(ranks, affirmed, strict=True) if found(c)]
        return max(hits) if hits else None

    if ref_numbers:
        ref_tokens = [stem_of(t) for t in raw_tokens(normalize_numbers(reference))]
        ref_values = set(ref_numbers)
        counted = _counted_noun(question or "")
        units = {u for i, t in enumerate(ref_tokens) if NUMBER.match(t) and (u := _unit_after(ref_tokens, i))}
        units = units or set(counted)
        gold = [rank_of(lambda c, v=v: _number_found(c, ref_tokens, v, ref_values, 0, counted))
                for v in dict.fromkeys(ref_numbers)]
        other = [_other_number(c, ref_values, units, q_stems) for c in affirmed]
    else:
        content, key = key_words(reference)
        names = bool(key) or any(t[:1].isupper() and t.lower() not in STOP_WORDS for t in raw_tokens(reference))
        gold = [rank_of(lambda c, w=w: w in c) for w in content]
        skip = content | q_stems | {stem_of(w) for w in _UPDATE_CUES | NOT_A_VALUE | _MONTHS}
        other = []
        for c in clauses:
            words = [t for t, st, ok in c if ok and st not in skip and not NUMBER.match(st)
                     and t.lower() not in STOP_WORDS]
            other.append(any(t[:1].isupper() for t in words) if names else bool(words))
    if not gold or any(g is None for g in gold):
        return False
    gold_rank = min(g for g in gold if g is not None)
    if not ref_numbers and not names and gold_rank > 0:
        return False  # plain words: only a reference left in the past is stale
    outranking = [r for r, o in zip(ranks, other, strict=True) if o and r > gold_rank]
    return bool(outranking)


_ZERO_WORDS = frozenset({"none", "noth", "nobodi"})
"""Stems of an affirmed "none"/"nothing"/"nobody" answer: the count zero."""

_POLAR = frozenset(
    {"yes", "no", "both", "neither", "either", "all", "none", "nothing", "everything", "something",
     "anything", "nobody", "everyone", "everybody", "someone", "somebody", "always", "never",
     "sometimes", "once", "twice"}
)
"""Stop words that are whole answers (yes/no, quantifiers): a reference without content
words must have them in the answer."""


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
    """Score one answer under the ``lme`` rule (module doc, steps 1–8).

    Args:
        answer: the model's answer.
        reference: the reference answer as text (``"38"``, never ``"38.0"``, though
            numbers compare by value anyway).
        cosine: cosine(answer, reference) of the PR embedder, in [-1, 1].
        question_id: LongMemEval id; a ``_abs`` suffix makes it an abstention question.
        question_type: LongMemEval question type (``temporal-reasoning`` tolerates a
            day count off by one; ``single-session-preference`` scores a rubric;
            ``knowledge-update`` rejects a stale value given as current).
        question: the question text (its words are not rubric evidence, nor a value
            an abstention or an update offers).
        threshold: cosine threshold of the partial-match and fallback steps (strict ``>``).

    Returns:
        An :class:`LmeVerdict`.

    Raises:
        TypeError: ``answer`` or ``reference`` is not a string (e.g. ``None``).
    """
    for name, value in (("answer", answer), ("reference", reference)):
        if not isinstance(value, str):
            raise TypeError(f"lme_verdict: {name} must be a string, got {type(value).__name__}")
    abst = abstains(answer, question)
    if question_id is not None and question_id.endswith("_abs"):
        return LmeVerdict(abst, abst, () if abst else ("<abstention>",), "abstention")
    have = affirmed_tokens(answer)
    have_set = set(have)
    update = question_type == "knowledge-update"

    if question_type == "single-session-preference" and _PREFERENCE.search(reference):
        q_words = {stem_of(t) for t in raw_tokens(normalize_numbers(question or ""))}
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
        ref_tokens = [stem_of(t) for t in raw_tokens(normalize_numbers(reference))]
        ref_values = set(ref_numbers)
        # numbers of codes (``GR-90``, ``B12``) are names, not quantities with a unit
        codes = {number_key(m) for m in re.findall(r"(?<=[^\W\d_])-?(\d+)", normalize_numbers(reference))}
        counted = _counted_noun(question or "")
        day_question = re.search(r"\bhow\s+many\s+days\b", question or "", re.I) is not None
        missing = []
        for value in dict.fromkeys(ref_numbers):
            tolerance = 0
            if question_type == "temporal-reasoning":
                units = {ref_tokens[i + 1] for i, t in enumerate(ref_tokens[:-1])
                         if NUMBER.match(t) and number_key(t) == value}
                if "day" in units or (not units and len(ref_values) == 1 and day_question):
                    tolerance = 1
            units_of = [] if value in codes else ref_tokens
            if value == "0" and have_set & _ZERO_WORDS:
                continue
            if not _number_found(have, units_of, value, ref_values, tolerance, counted):
                missing.append(value)
        # the reference's names and codes beside its numbers (``GR`` of ``GR-90``)
        content, key = key_words(reference)
        missing += sorted((key - ref_values) - have_set)
        if not missing and offers_alternatives(answer, reference):
            return LmeVerdict(False, True, (), "alternatives")
        if not missing and update and stale_value(answer, reference, question):
            return LmeVerdict(False, True, (), "stale")
        ok = not missing
        return LmeVerdict(ok, ok, tuple(sorted(missing)), "numbers")

    content, key = key_words(reference)
    if not content:
        polar = {t.lower() for t in raw_tokens(reference)} & _POLAR
        answer_words = {t.lower() for t in raw_tokens(normalize_numbers(answer))}
        if polar and not polar <= answer_words:
            return LmeVerdict(False, False, tuple(sorted(polar - answer_words)), "missing")
        ok = cosine > threshold and not abst
        return LmeVerdict(ok, False, (), "cosine")
    missing_words = content - have_set
    if not missing_words:
        if offers_alternatives(answer, reference):
            return LmeVerdict(False, True, (), "alternatives")
        if update and stale_value(answer, reference, question):
            return LmeVerdict(False, True, (), "stale")
        return LmeVerdict(True, True, (), "words")
    is_list = re.search(r",|;|&|\b(?:and|or)\b", reference, re.IGNORECASE) is not None
    if (
        not is_list
        and len(content) >= 3
        and 3 * len(missing_words) <= len(content)
        and not (missing_words & key)
        and cosine > threshold
        and not abst
        and not _substituted(have, reference, missing_words)
        and not offers_alternatives(answer, reference)
        and not (update and stale_value(answer, reference, question))
    ):
        return LmeVerdict(True, False, tuple(sorted(missing_words)), "partial")
    return LmeVerdict(False, False, tuple(sorted(missing_words)), "abstained" if abst else "missing")
