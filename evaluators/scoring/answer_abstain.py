"""Does an answer decline? LongMemEval's abstention semantics for PR's default rule
(:mod:`evaluators.scoring.answer_rule`): an answer that says it does not know, or offers no
value for what the question asks, abstains."""

from __future__ import annotations

import re
import unicodedata

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from evaluators.scoring.answer_numbers import (
    NUMBER,
    normalize_numbers,
    raw_tokens,
    stem_of,
)

__all__ = ["ANSWER_BEARING", "CLAUSE", "NOT_A_VALUE", "SENTENCE", "STOP_WORDS", "abstains"]


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

"""Words in scikit-learn's ``ENGLISH_STOP_WORDS`` that can carry an answer; the
``lme`` rule keeps them as content words."""

STOP_WORDS = frozenset(ENGLISH_STOP_WORDS - ANSWER_BEARING)
"""The ``lme`` rule's stop list: scikit-learn's minus :data:`ANSWER_BEARING`."""

"""The ``lme`` rule's stop list: scikit-learn's minus :data:`ANSWER_BEARING`."""

CLAUSE = re.compile(
    r"[.;:!?\n]+(?:\s|$)|,\s|\s[-–—]\s|\b(?:but|however|although|though|whereas|instead|yet)\b"
    r"|\band\s+(?:now|then|later|currently|also)\b",
    re.IGNORECASE,
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
    r"|not\s+enough\s+(?:information|info|detail|details|data|context|to\s+(?:answer|determine|tell|say|know))"
    r"|not\s+(?:sure|certain)(?!\s+(?:that\s+)?(?:you|if\s+you|whether\s+you)\b)|not\s+able"
    r"|not\s+something\s+(?:you(?:'ve|\s+have)?\s+)?(?:shared|mentioned|told|said|discussed)"
    r"|nothing\s+in\s+(?:our|your|the|my)\s+(?:chats?|conversations?|history|messages|notes|records)"
    r"|no\s+knowledge|(?:could|can)(?:\s*n[o']?t|not)\s+find|couldnt\s+find|impossible\s+to\s+(?:tell|say|know|determine)"
    r"|(?:conversations?|chats?|history|messages)\s+(?:do|does|did)\s*(?:n[o']?t|not)\s+"
    r"(?:cover|mention|include|say|contain|show)"
    r"|(?:but|and)\s+not\s+(?:your|the|any|its|their|his|her)\b"
    r"|unable\s+to|can(?:no|['’])t\s+(?:determine|tell|find|say|"
    r"know|answer|recall|confirm)|cannot\s+(?:determine|tell|find|say|know|answer|recall|confirm)"
    r"|(?:is|are|was)\s*n[o']?t\s+(?:mentioned|available|specified|provided|known|recorded|stated|clear)"
    r"|(?:isn|aren|wasn)['’]?t\s+(?:mentioned|available|specified|provided|known|recorded|stated|clear)"
    r"|(?:^|[.!?]\s+)(?:that(?:'s|\s+is)|it(?:'s|\s+is))\s+unknown|insufficient|unclear\s+from|no\s+idea|not\s+have\s+(?:that|this|any|enough)"
    r"|(?:but|and)\s+not\s+(?:how|what|when|where|which|who|whether|the\s+(?:number|amount|exact))"
    r"|(?:was|were|is|are)\s*n[o']?t\s+(?:shared|given|told)|(?:wasn|weren|isn|aren)'t\s+(?:shared|given|told)"
    r")\b",
    re.IGNORECASE,
)

SENTENCE = re.compile(r"[.;!?\n]+(?:\s|$)")

_REPORTING = re.compile(r"\b(?:mention|told|tell|said|say|shar|talk|discuss)", re.IGNORECASE)

_GUESS = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|likely|presumably|i\s+(?:think|believe|guess|suspect|assume|reckon)"
    r"|my\s+(?:best\s+)?guess|i'?d\s+(?:say|guess)|if\s+i\s+(?:had|have)\s+to\s+guess"
    r"|(?:might|could|may|must)\s+(?:be|have\s+been))\b",
    re.IGNORECASE,
)
"""Cues of a guess ("maybe", "I think", "might be" …): what follows them is offered as
the answer."""

"""Cues of a guess ("maybe", "I think", "might be" …): what follows them is offered as
the answer."""

_STATES = re.compile(r"(?:\b(?:is|was|are|were|be|been|called|named)\b|'(?:s|re)\b)", re.IGNORECASE)
"""A verb that states a value ("your cat is called Miso", "it's the blue one", "you're
on the last chapter")."""

"""A verb that states a value ("your cat is called Miso", "it's the blue one", "you're
on the last chapter")."""

_GUESS_OBJECT = re.compile(
    r"^\s*(?:,\s*)?(?:the|a|an|your|around|about|roughly|approximately|some|at\s+least)\b", re.IGNORECASE
)
"""A guess cue followed directly by a noun phrase ("maybe the blue one", "probably
around 100")."""

"""A guess cue followed directly by a noun phrase ("maybe the blue one", "probably
around 100")."""

_WHERE = re.compile(
    r"\s*(?:(?:written|saved|stored|listed|noted|recorded|somewhere)\s+)?(?:in|on|at|inside)\s+"
    r"(?:(?:your|the|our|my|one\s+of\s+(?:your|our|the))\s+)?(?:notes?|messages?|chats?|history|records?|"
    r"conversations?|memor(?:y|ies)|diary|journal|calendar|files?|e-?mails?|phone|papers|documents?)\b",
    re.IGNORECASE,
)
"""After a stating verb, where to look rather than a value ("maybe it's in your notes")."""

"""After a stating verb, where to look rather than a value ("maybe it's in your notes")."""

_NAME_TOKEN = re.compile(r"(?<![\w'])([A-Z][^\W\d_]*)(?![\w])(?!'(?!s\b))")
"""A capitalised word not inside a contraction ("I'm" is no name; "Miso's" is)."""

"""A capitalised word not inside a contraction ("I'm" is no name; "Miso's" is)."""

NOT_A_VALUE = frozenset(
    {
        # discourse words that open a sentence, and the vocabulary of not knowing
        "maybe", "perhaps", "probably", "possibly", "likely", "presumably", "sorry",
        "unfortunately", "honestly", "actually", "well", "hmm", "oh", "ah", "yes", "okay",
        "ok", "sure", "based", "according", "however", "still", "now", "currently",
        "today", "remind", "recall", "remember", "know", "certain", "clear", "help", "ask",
        "check", "exactly", "quite", "guess", "think", "believe", "suspect", "assume",
        "reckon", "say", "said", "tell", "told", "mention", "mentioned", "share", "shared",
    }
)
"""Words that are never the offered value of a guess or a hedged answer."""

"""Words that are never the offered value of a guess or a hedged answer."""

def _offers_value(clause: str, sentence_guess: bool, question_stems: frozenset[str]) -> bool:
    """Whether a clause that does not itself abstain offers a specific value
    (:func:`abstains`): a number, a name, or a guess stating a value."""

    def value_word(tok: str) -> bool:
        low = tok.lower()
        return (low not in STOP_WORDS and low not in NOT_A_VALUE and stem_of(tok) not in question_stems
                and not _REPORTING.match(low))

    if any(NUMBER.match(t) and stem_of(t) not in question_stems for t in raw_tokens(clause)):
        return True
    for m in _NAME_TOKEN.finditer(clause):
        initial = not clause[: m.start()].strip()
        if (not initial or sentence_guess) and value_word(m.group(1)):
            return True
    for m in _GUESS.finditer(clause):
        rest = clause[m.end():]
        verb = _STATES.search(rest)
        if verb and not _WHERE.match(rest[verb.end():]) \
                and any(value_word(t) for t in raw_tokens(rest[verb.end():])):
            return True
        if _GUESS_OBJECT.match(rest) and any(value_word(t) for t in raw_tokens(rest)):
            return True
    return False

def abstains(text: str, question: str | None = None) -> bool:
    """Whether an answer abstains: says it does not know, that the information was not
    mentioned / is not available / is not enough, or that it cannot determine or find
    it (``_ABSTAIN``: "I don't know", "You didn't mention …", "There is no information
    …", "not enough information", "I'm not sure", "I can't determine …", "That's not
    something you've shared", "Nothing in our chats …", "I couldn't find …",
    "It's impossible to tell", "Our conversations don't cover …"), *and gives no
    specific value* (declines to give the fact).

    An answer that says so and then offers a value anyway is no abstention: a clause
    (sentence punctuation, commas, ``but``/``though``/…) without such a statement that

    - states a number ("You have 120 pages left, though I don't know your reading
      speed"),
    - holds a name, a capitalised word that is not a stop word, not a word of the
      question and not a discourse or memory word (``Maybe``, ``Sorry``, ``remember``
      …; a sentence's first word counts only in a sentence with a guess cue), or
    - guesses: a cue (``maybe``, ``perhaps``, ``probably``, ``possibly``, ``likely``,
      ``I think``/``believe``/``guess``, ``my guess``, ``I'd say``, ``might``/``could``/
      ``may``/``must be``) followed by a stating verb (``is``, ``'s``, ``'re``, ``was``,
      ``called``, ``named`` …) and a content word (not a place to look: "maybe it's in
      your notes" offers none), or directly by a noun phrase
      (``the``, ``a``, ``your``, ``around`` … and a content word): "I don't remember
      exactly, but maybe your cat is called Miso."

    A number or a name in a clause that reports what *was* mentioned ("You mentioned 2
    books but not your progress", "you only told me about your dog, Rex") is no value
    offered, unless the clause guesses.

    Args:
        text: the answer.
        question: the question; its words (stems) and numbers are never an offered
            value ("What is my cat's name?": ``cat``, ``name``).

    LongMemEval counts an abstaining answer correct for an abstention (``_abs``)
    question, including one that names what *was* mentioned instead; any answer that
    gives a specific value, hedged or not, is wrong.
    """
    text = unicodedata.normalize("NFKC", text).replace("’", "'")
    if not _ABSTAIN.search(text):
        return False
    question_stems = frozenset(stem_of(t) for t in raw_tokens(normalize_numbers(question or "")))
    for sentence in SENTENCE.split(normalize_numbers(text)):
        sentence_guess = _GUESS.search(sentence) is not None
        reported = False  # the previous clause of this sentence reports what was mentioned
        for clause in CLAUSE.split(sentence):
            if not clause or not clause.strip():
                continue
            if _ABSTAIN.search(clause):
                reported = False
                continue
            guess = _GUESS.search(clause) is not None
            reporting = _REPORTING.search(clause) is not None
            appositive = reported and len(raw_tokens(clause)) <= 3
            if (guess or not (reporting or appositive)) and _offers_value(clause, sentence_guess, question_stems):
                return False
            reported = reporting
    return True
