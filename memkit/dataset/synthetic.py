"""A synthetic generator of LongMemEval-shaped instances (same schema and question
types as :mod:`memkit.dataset.longmemeval`), seeded, for runs and tests without the real data.

Each instance is a persona's sessions with evidence turns for one question of a
LongMemEval type, padded with small talk; :func:`synthetic` builds them in memory and
:func:`write_synthetic` writes a JSON file :func:`memkit.dataset.longmemeval.load` reads.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memkit.dataset.longmemeval import (
    ABSTENTION_SUFFIX,
    QUESTION_TYPES,
    Instance,
    Turn,
    format_date,
)

__all__ = ["mentions", "synthetic", "write_synthetic"]

# Slot fillers. Fact slots and small-talk slots are disjoint where it matters; the
# generator also checks that no non-evidence turn contains the expected answer.
_NAMES = (
    "Biscuit", "Pepper", "Mochi", "Juniper", "Waffles", "Clementine", "Pickles", "Ziggy",
    "Nutmeg", "Olive", "Maple", "Bramble", "Tofu", "Pistachio", "Rocket", "Marbles",
)
_PEOPLE = (
    "Ingrid", "Tomasz", "Priya", "Eliseo", "Marguerite", "Oluwaseun", "Hiroshi", "Beatriz",
    "Declan", "Anneliese", "Rafferty", "Soraya", "Lucius", "Wilhelmina", "Caspian", "Odalys",
)
_FACT_CITIES = (
    "Tromso", "Valparaiso", "Ljubljana", "Hobart", "Asheville", "Bergamo", "Kingston",
    "Tallinn", "Duluth", "Cusco", "Nagasaki", "Galway", "Porto", "Bozeman", "Zanzibar", "Leipzig",
)
_INSTRUMENTS = ("cello", "banjo", "ukulele", "trombone", "harp", "accordion", "oboe", "mandolin")
_JOBS = (
    "pharmacist", "landscape architect", "sound engineer", "veterinary nurse", "translator",
    "data analyst", "pastry chef", "park ranger", "radiographer", "carpenter",
)
_BOOKS = (
    "The Left Hand of Darkness", "Piranesi", "A Gentleman in Moscow", "The Remains of the Day",
    "Station Eleven", "The Overstory", "Circe", "Kindred", "The Dispossessed", "Middlemarch",
)
_CARS = ("Subaru Outback", "Honda Fit", "Volvo wagon", "Mazda Miata", "Toyota Tacoma", "Ford Bronco")
_CAR_COLORS = ("teal", "burgundy", "silver", "mustard yellow", "forest green", "pearl white")
_SPORTS = ("bouldering", "fencing", "rowing", "table tennis", "pickleball", "kickboxing")

_REC_CATEGORIES = (
    ("hiking trail", "a day hike near the coast",
     ("the Lost Coast Trail", "the Cliffside Loop", "the Juniper Ridge Path", "the Heron Point Trail")),
    ("podcast", "my morning commute",
     ("Deep Field Notes", "The Curious Kitchen", "Slow History Hour", "Orbit and Ember")),
    ("board game", "a game night with four friends",
     ("Wingspan", "Azul", "Cascadia", "The Crew")),
    ("houseplant", "a dim apartment",
     ("a snake plant", "a ZZ plant", "a pothos", "a cast iron plant")),
    ("stew recipe", "a cold weekend",
     ("a Moroccan chickpea stew", "a Hungarian goulash", "a Brazilian moqueca", "an Irish lamb stew")),
)
_PREFERENCES = (
    ("dinner", "dinner ideas",
     ("spicy vegetarian dishes", "one-pot pasta recipes", "Japanese home cooking", "grilled seafood")),
    ("weekend trips", "weekend trip ideas",
     ("quiet mountain cabins", "small coastal towns", "historic city centers", "lakeside campsites")),
    ("workouts", "workout plans",
     ("short high-intensity sessions", "long easy runs", "yoga flows", "kettlebell circuits")),
    ("reading", "book recommendations",
     ("character-driven science fiction", "narrative nonfiction", "cozy mysteries", "literary short stories")),
    ("music", "playlists",
     ("instrumental jazz", "1970s soul", "ambient electronic music", "acoustic folk")),
)
_EVENTS = (
    "visited the botanical garden", "ran my first half marathon", "repainted the spare bedroom",
    "adopted a rescue kitten", "went to a pottery workshop", "hosted a dumpling party",
    "toured the old lighthouse", "finished a jigsaw puzzle of the night sky",
    "volunteered at the food bank", "saw an opera for the first time",
)
_WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_CLASSES = ("watercolor", "salsa", "Mandarin", "woodworking", "improv", "ceramics", "sourdough baking")
_RELATIVES = ("aunt", "grandfather", "brother", "niece", "godmother", "uncle")
_GIFTS = ("hand-knitted scarf", "vintage record player", "cast iron skillet", "telescope", "fountain pen")
_ABSENT_THINGS = (
    ("goldfish", "What is the name of my goldfish?"),
    ("dentist", "What is the name of my dentist?"),
    ("landlord", "What is my landlord's name?"),
    ("first car", "What color was my first car?"),
    ("piano teacher", "What was my piano teacher's name?"),
    ("wedding anniversary", "When is my wedding anniversary?"),
)

# Small talk: user requests, first-person non-evidence statements, assistant replies.
_TALK_SLOTS: dict[str, tuple[str, ...]] = {
    "task": ("meal prepping", "decluttering a closet", "learning a new language", "budgeting",
             "planning a birthday party", "writing a cover letter", "training for a 10K",
             "organizing photos", "studying for an exam", "keeping a journal"),
    "concept": ("compound interest", "photosynthesis", "machine learning", "inflation",
                "the water cycle", "blockchain", "jet lag", "sourdough fermentation",
                "noise-cancelling headphones", "credit scores"),
    "city": ("Lisbon", "Montreal", "Kyoto", "Edinburgh", "Melbourne", "Seville", "Chicago",
             "Vienna", "Oaxaca", "Copenhagen"),
    "season": ("spring", "summer", "autumn", "winter"),
    "food": ("lentils", "sweet potatoes", "tofu", "salmon", "quinoa", "spinach", "mushrooms",
             "chickpeas", "eggplant", "brown rice"),
    "genre": ("thriller", "comedy", "documentary", "horror", "romance", "western"),
    "decade": ("1980", "1990", "1960", "2000"),
    "hobby": ("birdwatching", "knitting", "rock climbing", "calligraphy", "chess", "gardening",
              "photography", "origami"),
    "event": ("a wedding", "a networking dinner", "a baby shower", "a book club meeting"),
    "person": ("my manager", "a neighbor", "my old teacher", "a friend"),
    "favor": ("helping me move", "watering my plants", "lending me a ladder", "a lovely dinner"),
    "mood": ("tired", "restless", "distracted", "stressed", "upbeat"),
    "reason": ("work deadlines", "the noisy construction outside", "the heat", "a cold"),
    "weekend": ("cleaning the apartment", "catching up on sleep", "walking in the park",
                "sorting my bookshelf", "trying new recipes"),
    "color": ("sage green", "pale blue", "warm gray", "terracotta"),
    "drink": ("coffee", "sparkling water", "green tea", "lemonade"),
    "project": ("small bakery", "gardening blog", "podcast about local history", "bike repair shop"),
}
_USER_REQUESTS = (
    "Can you give me some tips for {task}?",
    "What's the best way to get better at {task}?",
    "Could you explain how {concept} works in simple terms?",
    "What are some fun things to do in {city} during {season}?",
    "How long should I roast {food} in the oven?",
    "Can you suggest a name for a {project}?",
    "What's the difference between {concept} and {concept2}?",
    "Can you help me write a short note to thank {person} for {favor}?",
    "What should I pack for a weekend trip to {city}?",
    "How can I make my mornings more productive?",
    "Is it better to work on {task} in the morning or in the evening?",
    "What are the health benefits of {food}?",
    "Can you recommend a few {genre} movies from the {decade}s?",
    "How do I get started with {hobby}?",
    "What's a quick dinner I can make with {food} and {food2}?",
    "How do I politely decline an invitation to {event}?",
    "What's the weather usually like in {city} in {season}?",
    "Can you give me a simple stretching routine for after {hobby}?",
    "Could you make me a checklist for {task}?",
    "Why do people say {concept} is so important?",
    "What's a good gift for someone who loves {hobby}?",
    "How much {drink} is too much in one day?",
    "Can you give me three conversation starters for {event}?",
    "What's an easy way to explain {concept} to a ten-year-old?",
)
_USER_STATEMENTS = (
    "I had {food} for lunch today and it was surprisingly good.",
    "I think I'll spend this weekend {weekend}.",
    "I've been feeling a bit {mood} lately because of {reason}.",
    "My neighbor keeps talking about {concept}.",
    "I watched a {genre} movie last night and couldn't sleep afterwards.",
    "I'm thinking about repainting the hallway {color}.",
    "My coworker recommended that I try {hobby}.",
    "I spent the morning {weekend} and now I'm exhausted.",
    "I keep forgetting to water the plants on my balcony.",
    "My phone battery has been dying really fast this week.",
    "I finally cleaned out the garage yesterday.",
    "I've been drinking way too much {drink} recently.",
    "I tried a new recipe with {food} and it was a bit bland.",
    "My cousin is visiting {city} next month.",
    "I've always wanted to learn more about {concept}.",
    "My weekend plans fell through, so I have some free time.",
)
_ASSISTANT_REPLIES = (
    "Sure! Here are a few ideas: start small, keep it consistent, and adjust as you go.",
    "Great question. In short, it depends on your goals, but a simple plan usually works best.",
    "Happy to help! A good first step is to break the task into smaller pieces.",
    "That sounds like a fun plan. Let me know if you want more specific suggestions.",
    "Here is a quick overview: {concept} is easiest to understand with a concrete example.",
    "I'd suggest setting aside a little time each day and tracking your progress.",
    "Absolutely. Many people find that preparing the night before makes a big difference.",
    "Good idea! You might also enjoy {hobby} if you have some free time.",
    "Thanks for sharing that. Would you like a step-by-step plan?",
    "Of course. A simple approach is to start with the basics and build from there.",
    "Sounds good. Remember to take breaks and stay hydrated.",
    "There are a few things to consider, such as time, budget and energy.",
    "That's understandable. Small routines can help a lot when things feel busy.",
    "Here's a short list to get you started; feel free to ask for more detail on any step.",
)
_ACKS = (
    "That's wonderful, thanks for telling me!",
    "How nice! Is there anything I can help you plan around that?",
    "Good to know. Let me know if you'd like any suggestions.",
    "That sounds great. What would you like to do next?",
)
_FOLLOW_UPS = ("", " Any tips?", " What do you think?", " Anyway, just wanted to share.", "")


def _pick(rng: np.random.Generator, seq: Sequence[Any]) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _fill_template(rng: np.random.Generator, template: str) -> str:
    values: dict[str, str] = {}
    for name in re.findall(r"\{(\w+)\}", template):
        if name in values:
            continue
        key = name.rstrip("2")
        choices = _TALK_SLOTS[key]
        value = _pick(rng, choices)
        if name.endswith("2") and key in values and len(choices) > 1:
            while value == values[key]:
                value = _pick(rng, choices)
        values[name] = value
    return template.format(**values)


def mentions(text: str, phrase: str) -> bool:
    """True if ``phrase`` occurs in ``text`` as whole words, case-insensitively.

    Surrounding whitespace and trailing ``.!?`` of ``phrase`` are ignored (answers such
    as ``"The GR-90 trail."`` match ``"... the GR-90 trail is ..."``); an empty
    phrase matches nothing.
    """
    phrase = phrase.strip().rstrip(".!?").strip()
    if not phrase:
        return False
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text, flags=re.IGNORECASE) is not None


class _Block:
    """Evidence turns that go into one session, in order: list of (role, content, has_answer)."""

    def __init__(self, turns: list[tuple[str, str, bool]]) -> None:
        self.turns = turns


def _ev(rng: np.random.Generator, statement: str, label: bool = True) -> _Block:
    return _Block([("user", statement + _pick(rng, _FOLLOW_UPS), label), ("assistant", _pick(rng, _ACKS), False)])


def _persona_facts(rng: np.random.Generator) -> list[tuple[str, str, str]]:
    """Single-session-user facts of a persona: (statement, question, answer) triples."""
    animal = _pick(rng, ("dog", "cat", "rabbit", "parrot"))
    pet = _pick(rng, _NAMES)
    city = _pick(rng, _FACT_CITIES)
    sister_city = _pick(rng, [c for c in _FACT_CITIES if c != city])
    instrument = _pick(rng, _INSTRUMENTS)
    job = _pick(rng, _JOBS)
    book = _pick(rng, _BOOKS)
    car = f"{_pick(rng, _CAR_COLORS)} {_pick(rng, _CARS)}"
    sport = _pick(rng, _SPORTS)
    sister = _pick(rng, _PEOPLE)
    years = int(rng.integers(2, 9))
    facts = [
        (f"I adopted a {animal} named {pet} last spring.", f"What is the name of the {animal} I adopted?", pet),
        (f"I grew up in {city}, so cold winters don't bother me.", "Where did I grow up?", city),
        (f"I have been learning to play the {instrument} for {years} years.",
         "What instrument have I been learning to play?", instrument),
        (f"I work as a {job} at a small company downtown.", "What is my job?", job),
        (f"My favorite book is {book}, and I reread it every summer.", "What is my favorite book?", book),
        (f"My car is a {car} that I bought used.", "What car do I drive?", car),
        (f"I joined a {sport} club near my office.", "What kind of sports club did I join?", sport),
        (f"My sister {sister} just moved to {sister_city} for work.", "Where did my sister move to?", sister_city),
    ]
    order = rng.permutation(len(facts))
    return [facts[int(i)] for i in order]


def _question_plan(
    rng: np.random.Generator, qtype: str, persona: list[tuple[str, str, str]]
) -> tuple[list[_Block], str, str]:
    """Evidence blocks (chronological), question and expected answer for a question type."""
    if qtype == "single-session-user":
        statement, question, answer = persona[0]
        return [_ev(rng, statement)], question, answer
    if qtype == "single-session-assistant":
        category, purpose, items = _pick(rng, _REC_CATEGORIES)
        item = _pick(rng, items)
        block = _Block([
            ("user", f"Can you recommend a {category} for {purpose}?", False),
            ("assistant", f"I would recommend {item}. Many people enjoy it, and it fits what you described.", True),
            ("user", f"I'll go with {item} then, thanks.", True),
            ("assistant", _pick(rng, _ACKS), False),
        ])
        return [block], f"Which {category} did you recommend to me for {purpose}?", item
    if qtype == "single-session-preference":
        domain, ask, prefs = _pick(rng, _PREFERENCES)
        pref = _pick(rng, prefs)
        statement = f"I really prefer {pref} when it comes to {domain}."
        return [_ev(rng, statement)], f"Can you give me some {ask}?", pref
    if qtype == "multi-session":
        variant = int(rng.integers(3))
        if variant == 0:
            cls, day, name = _pick(rng, _CLASSES), _pick(rng, _WEEKDAY_NAMES), _pick(rng, _PEOPLE)
            blocks = [_ev(rng, f"I signed up for a {cls} class that meets on {day}s."),
                      _ev(rng, f"My {day} class instructor is called {name}.")]
            return blocks, f"What is the name of the instructor of my {cls} class?", name
        if variant == 1:
            rel, gift = _pick(rng, _RELATIVES), _pick(rng, _GIFTS)
            city = _pick(rng, _FACT_CITIES)
            blocks = [_ev(rng, f"I bought a {gift} for my {rel}'s birthday."),
                      _ev(rng, f"My {rel} lives in {city} these days.")]
            return blocks, f"Where does the person I bought a {gift} for live?", city
        friend, job = _pick(rng, _PEOPLE), _pick(rng, _JOBS)
        blocks = [_ev(rng, f"My best friend is {friend}; we met in college."),
                  _ev(rng, f"I heard that {friend} just started working as a {job}.")]
        return blocks, "What job did my best friend just start?", job
    if qtype == "knowledge-update":
        variant = int(rng.integers(3))
        if variant == 0:
            old, new = (int(x) for x in rng.choice(np.arange(15, 80, 5), size=2, replace=False))
            blocks = [_ev(rng, f"My commute to work takes about {old} minutes each way."),
                      _ev(rng, f"I moved, so my commute now takes {new} minutes each way.")]
            return blocks, "How long is my commute now?", f"{new} minutes"
        if variant == 1:
            b1, b2 = (str(x) for x in rng.choice(np.array(_BOOKS, dtype=object), size=2, replace=False))
            blocks = [_ev(rng, f"I'm currently reading {b1}."),
                      _ev(rng, f"I finished my last book and now I'm reading {b2}.")]
            return blocks, "What book am I reading now?", b2
        t1, t2 = sorted((int(x) for x in rng.choice(np.arange(22, 40), size=2, replace=False)), reverse=True)
        blocks = [_ev(rng, f"My personal best for a 5K is {t1} minutes."),
                  _ev(rng, f"I set a new 5K personal best of {t2} minutes this morning.")]
        return blocks, "What is my current 5K personal best?", f"{t2} minutes"
    if qtype == "temporal-reasoning":
        e1, e2 = (str(x) for x in rng.choice(np.array(_EVENTS, dtype=object), size=2, replace=False))
        blocks = [_ev(rng, f"I {e1} today."), _ev(rng, f"I {e2} today.")]
        a, b = (e1, e2) if rng.random() < 0.5 else (e2, e1)
        return blocks, f"Which happened first: the day I {a} or the day I {b}?", e1
    raise ValueError(f"unknown question type {qtype!r}; expected one of {QUESTION_TYPES}")


def _size_range(name: str, value: int | tuple[int, int], minimum: int) -> tuple[int, int]:
    lo, hi = (value, value) if isinstance(value, int) else value
    if not (isinstance(lo, int) and isinstance(hi, int)) or lo > hi:
        raise ValueError(f"{name} must be an int or an (low, high) pair of ints, got {value!r}")
    if lo < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return lo, hi


def _small_talk_user(rng: np.random.Generator, avoid: Sequence[str], extras: Sequence[str]) -> str:
    for _ in range(100):
        if extras and rng.random() < 0.15:
            text = _pick(rng, extras) + " " + _fill_template(rng, _pick(rng, _USER_REQUESTS))
        elif rng.random() < 0.35:
            text = (_fill_template(rng, _pick(rng, _USER_STATEMENTS)) + " "
                    + _fill_template(rng, _pick(rng, _USER_REQUESTS)))
        else:
            text = _fill_template(rng, _pick(rng, _USER_REQUESTS))
        if not any(mentions(text, a) for a in avoid):
            return text
    raise RuntimeError("could not generate small talk avoiding the answer")  # pragma: no cover


def _small_talk_assistant(rng: np.random.Generator, avoid: Sequence[str]) -> str:
    for _ in range(100):
        text = _fill_template(rng, _pick(rng, _ASSISTANT_REPLIES))
        if not any(mentions(text, a) for a in avoid):
            return text
    raise RuntimeError("could not generate small talk avoiding the answer")  # pragma: no cover


_MIN_SESSIONS = {"multi-session": 2, "knowledge-update": 2, "temporal-reasoning": 2}


def _one_synthetic(
    rng: np.random.Generator,
    qtype: str,
    abstain: bool,
    sess_range: tuple[int, int],
    turn_range: tuple[int, int],
) -> Instance:
    persona = _persona_facts(rng)
    blocks, question, answer = _question_plan(rng, qtype, persona)
    avoid = [answer]
    if abstain:
        thing, question = _pick(rng, _ABSENT_THINGS)
        answer = f"The information provided is not enough. You did not mention your {thing}."
        avoid = [thing]
        blocks = [_Block([(r, c, False) for r, c, _ in b.turns]) for b in blocks]
    # Other persona facts appear as first-person non-evidence statements.
    used = persona[0][0] if qtype == "single-session-user" else ""
    extras = [
        s for s, _, _ in persona
        if s != used and not any(mentions(s, x) for x in (*avoid, answer))
    ]
    n_sess = max(int(rng.integers(sess_range[0], sess_range[1] + 1)), len(blocks))
    hex_id = "".join(_pick(rng, "0123456789abcdef") for _ in range(8))
    qid = hex_id + (ABSTENTION_SUFFIX if abstain else "")
    ev_slots = sorted(int(i) for i in rng.choice(n_sess, size=len(blocks), replace=False))
    start = _dt.datetime(2023, 1, 1) + _dt.timedelta(days=int(rng.integers(0, 365)))
    ids: list[str] = []
    dates: list[str] = []
    sessions: list[list[Turn]] = []
    answer_ids: list[str] = []
    when = start
    filler_no = 0
    for s in range(n_sess):
        when = when + _dt.timedelta(days=int(rng.integers(1, 5)), minutes=int(rng.integers(0, 600)))
        n_turns = int(rng.integers(turn_range[0] // 2, turn_range[1] // 2 + 1)) * 2
        block = blocks[ev_slots.index(s)] if s in ev_slots else None
        if block is not None:
            sid = f"answer_{hex_id}_{ev_slots.index(s) + 1}"
            answer_ids.append(sid)
            n_turns = max(n_turns, len(block.turns))
            at = int(rng.integers(0, (n_turns - len(block.turns)) // 2 + 1)) * 2
        else:
            filler_no += 1
            sid = f"session_{hex_id}_{filler_no}"
            at = -1
        turns: list[Turn] = []
        t = 0
        while t < n_turns:
            if t == at and block is not None:
                for role, content, label in block.turns:
                    turns.append(Turn(role=role, content=content, has_answer=True) if label
                                 else Turn(role=role, content=content))
                t += len(block.turns)
                continue
            turns.append(Turn(role="user", content=_small_talk_user(rng, avoid, extras)))
            turns.append(Turn(role="assistant", content=_small_talk_assistant(rng, avoid)))
            t += 2
        ids.append(sid)
        dates.append(format_date(when))
        sessions.append(turns)
    asked = when + _dt.timedelta(days=int(rng.integers(1, 8)), minutes=int(rng.integers(0, 600)))
    return Instance(
        question_id=qid,
        question_type=qtype,  # type: ignore[arg-type]
        question=question,
        answer=answer,
        question_date=format_date(asked),
        haystack_session_ids=ids,
        haystack_dates=dates,
        haystack_sessions=sessions,
        answer_session_ids=answer_ids,
    )


def synthetic(
    n: int,
    seed: int,
    *,
    sessions_per_instance: int | tuple[int, int] = (2, 6),
    turns_per_session: int | tuple[int, int] = (6, 10),
    question_types: Sequence[str] | None = None,
    abstention_rate: float = 0.0,
) -> list[Instance]:
    """Generate ``n`` synthetic instances in LongMemEval's schema, deterministically per seed.

    Each instance has a persona (a few first-person facts), dated sessions in
    chronological order, small talk (user requests, first-person statements that
    are not evidence, assistant replies) and evidence turns marked
    ``has_answer: true``. The expected answer is a short phrase that appears verbatim
    in an evidence turn, and in no turn that is not evidence, so a retrieval-only
    responder can answer it. Question types cycle through ``question_types``
    (default: the six of :data:`QUESTION_TYPES`) from a seeded offset:
    single-session-user/-preference (one user statement), single-session-assistant
    (the assistant recommends an item and the user repeats it; both turns are
    evidence), multi-session (two linked statements in two sessions),
    knowledge-update (an old and a newer value; the answer is the newer),
    temporal-reasoning (two dated events; the answer is the earlier one).
    Abstention variants (``_abs`` ids, with probability ``abstention_rate``) ask about
    something never mentioned; their turns carry no ``has_answer`` labels.
    Evidence sessions are ``answer_<hex>_<k>`` and listed in ``answer_session_ids``.

    Args:
        n: number of instances (>= 0).
        seed: seed; instance ``i`` uses ``numpy.random.default_rng([seed, i])``, so the
            first ``m`` instances of ``synthetic(n, seed)`` do not depend on ``n``.
        sessions_per_instance: sessions per instance, an int or an inclusive
            ``(low, high)`` range drawn per instance (oracle-like: ``(1, 6)``;
            S-like: ``50``). Types that need two evidence sessions get at least two.
        turns_per_session: turns per session (user and assistant alternate, user
            first), an even int >= 4 or an inclusive range; odd values round down.
        question_types: the types to use (subset of :data:`QUESTION_TYPES`).
        abstention_rate: probability in [0, 1] that an instance is an abstention variant.

    Returns:
        list of :class:`Instance`, unique ``question_id`` values.

    Raises:
        ValueError: on a negative ``n``, an unknown question type, sizes below the
            minimum, or an int ``sessions_per_instance`` below the 2 that
            multi-session, knowledge-update and temporal-reasoning need.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 <= abstention_rate <= 1.0:
        raise ValueError(f"abstention_rate must be in [0, 1], got {abstention_rate}")
    types = tuple(QUESTION_TYPES if question_types is None else question_types)
    unknown = [t for t in types if t not in QUESTION_TYPES]
    if unknown or not types:
        raise ValueError(f"unknown question types {unknown or types!r}; expected {QUESTION_TYPES}")
    sess_range = _size_range("sessions_per_instance", sessions_per_instance, 1)
    turn_range = _size_range("turns_per_session", turns_per_session, 4)
    if isinstance(sessions_per_instance, int):
        need = max(_MIN_SESSIONS.get(t, 1) for t in types)
        if sessions_per_instance < need:
            raise ValueError(
                f"sessions_per_instance={sessions_per_instance} is below the {need} sessions "
                f"that question types {[t for t in types if t in _MIN_SESSIONS]} need"
            )
    offset = int(np.random.default_rng(seed).integers(len(types)))
    out: list[Instance] = []
    seen: set[str] = set()
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        qtype = types[(i + offset) % len(types)]
        abstain = bool(rng.random() < abstention_rate)
        inst = _one_synthetic(rng, qtype, abstain, sess_range, turn_range)
        if inst.question_id in seen:
            inst = inst.model_copy(update={"question_id": f"{inst.question_id}_{i}"})
        seen.add(inst.question_id)
        out.append(inst)
    return out


def write_synthetic(path: str | os.PathLike[str], n: int, seed: int, **size: Any) -> Path:
    """Write ``synthetic(n, seed, **size)`` to ``path`` as a JSON array in the official schema.

    Returns:
        the path written. Raises what :func:`synthetic` raises.
    """
    p = Path(path)
    data = [inst.to_dict() for inst in synthetic(n, seed, **size)]
    with p.open("w", encoding="utf-8") as fp:
        json.dump(data, fp, ensure_ascii=False, indent=1)
        fp.write("\n")
    return p
