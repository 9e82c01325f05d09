"""LongMemEval data: typed records, a validating (streaming) loader, sampling and a
synthetic generator of the same schema.

LongMemEval (Wu et al., "LongMemEval: Benchmarking Chat Assistants on Long-Term
Interactive Memory", ICLR 2025) ships three JSON files, each a JSON array of 500
instances: ``longmemeval_oracle.json`` (only the evidence sessions),
``longmemeval_s_cleaned.json`` (~50 sessions per instance) and
``longmemeval_m_cleaned.json`` (~500 sessions, ~2.7 GB). Each instance has the keys

``question_id`` (str; ``_abs`` suffix = abstention question), ``question_type``
(one of :data:`QUESTION_TYPES`), ``question`` (str), ``answer`` (str or number),
``question_date`` (str, ``"2023/05/30 (Tue) 14:10"``), ``haystack_session_ids``,
``haystack_dates`` and ``haystack_sessions`` (three parallel lists; a session is a
list of turns ``{"role", "content", "has_answer"?}``) and ``answer_session_ids``.

The source study (arXiv 2606.10062, Setup) uses N = 50 instances sampled from the
oracle split; :func:`sample` draws such subsets reproducibly.

Public API: :func:`load`, :func:`iter_load`, :func:`sample`, :func:`synthetic`,
:func:`write_synthetic`, :class:`Instance`, :class:`Turn`, :class:`LongMemEvalError`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

__all__ = [
    "ABSTENTION_SUFFIX",
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_STREAM_THRESHOLD",
    "QUESTION_TYPES",
    "Instance",
    "LongMemEvalError",
    "Turn",
    "format_date",
    "iter_load",
    "load",
    "mentions",
    "parse_date",
    "sample",
    "synthetic",
    "validate_record",
    "write_synthetic",
]

QUESTION_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
"""The six LongMemEval question types (Wu et al. 2025, Section 3)."""

QuestionType = Literal[
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
]

ABSTENTION_SUFFIX = "_abs"
"""``question_id`` suffix marking an abstention (unanswerable) question."""

DEFAULT_STREAM_THRESHOLD = 64 * 1024 * 1024
"""Files larger than this many bytes are parsed incrementally (see :func:`iter_load`)."""

DEFAULT_CHUNK_CHARS = 4 * 1024 * 1024
"""Characters read per chunk when streaming."""

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DATE_RE = re.compile(r"^(\d{4})/(\d{2})/(\d{2}) \(([A-Za-z]{3})\) (\d{2}):(\d{2})$")


class LongMemEvalError(ValueError):
    """A LongMemEval file or record is malformed.

    The message names the file, the instance (index and ``question_id`` where
    known), the field and what is wrong; the same facts are kept as attributes.

    Attributes:
        path: the file (``None`` for in-memory records).
        index: 0-based position of the instance in the file's array, if known.
        question_id: the instance's ``question_id``, if it could be read.
        field: dotted path of the offending field, e.g. ``haystack_sessions[3][2].role``.
        line, column: 1-based position of a JSON syntax error, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        index: int | None = None,
        question_id: str | None = None,
        field: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.index = index
        self.question_id = question_id
        self.field = field
        self.line = line
        self.column = column


# --------------------------------------------------------------------------- records


class Turn(BaseModel):
    """One chat turn: ``{"role", "content", "has_answer"?}``.

    ``has_answer`` is ``True`` on evidence turns in the official files and absent
    elsewhere (and absent everywhere in some re-packagings); it is kept absent on
    output when it was absent on input. Unknown extra keys are kept. Validation is
    strict: no type coercion (``"true"`` is not a boolean).
    """

    model_config = ConfigDict(strict=True, extra="allow")

    role: Literal["user", "assistant", "system"]
    content: str
    has_answer: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The turn in the official schema (keys that were never set are left out)."""
        return self.model_dump(exclude_unset=True)


class Instance(BaseModel):
    """One LongMemEval instance, with the official field names as attributes.

    Validation is strict (no coercion); ``haystack_session_ids``, ``haystack_dates``
    and ``haystack_sessions`` must have equal lengths. Unknown extra keys are kept
    so that :meth:`to_dict` gives back the record it was built from.
    """

    model_config = ConfigDict(strict=True, extra="allow")

    question_id: str = Field(min_length=1)
    question_type: QuestionType
    question: str
    answer: str | int | float
    question_date: str
    haystack_session_ids: list[str]
    haystack_dates: list[str]
    haystack_sessions: list[list[Turn]]
    answer_session_ids: list[str]

    @field_validator("haystack_sessions")
    @classmethod
    def _parallel_lengths(cls, value: list[list[Turn]], info: ValidationInfo) -> list[list[Turn]]:
        ids = info.data.get("haystack_session_ids")
        dates = info.data.get("haystack_dates")
        lengths = [len(x) for x in (ids, dates) if x is not None]
        if any(n != len(value) for n in lengths):
            raise ValueError(
                "haystack_session_ids, haystack_dates and haystack_sessions must have equal "
                f"lengths, got {len(ids) if ids is not None else '?'}, "
                f"{len(dates) if dates is not None else '?'} and {len(value)}"
            )
        return value

    @property
    def is_abstention(self) -> bool:
        """True for abstention questions (``question_id`` ends with ``_abs``)."""
        return self.question_id.endswith(ABSTENTION_SUFFIX)

    @property
    def answer_text(self) -> str:
        """The expected answer as a string (the official files hold some as numbers): a
        whole float is written without its fraction (``38.0`` → ``"38"``), as a reader
        would, so PR's rules match ``"You have 38 coins."``."""
        if isinstance(self.answer, float) and self.answer.is_integer():
            return str(int(self.answer))
        return str(self.answer)

    @property
    def has_labels(self) -> bool:
        """True when at least one turn carries ``has_answer: true``."""
        return any(t.has_answer is True for s in self.haystack_sessions for t in s)

    def sessions(self) -> Iterator[tuple[str, str, list[Turn]]]:
        """Yield ``(session_id, date, turns)`` for each haystack session, in file order."""
        yield from zip(
            self.haystack_session_ids, self.haystack_dates, self.haystack_sessions, strict=True
        )

    def to_dict(self) -> dict[str, Any]:
        """The instance in the official schema; ``Instance.model_validate(x.to_dict()) == x``."""
        return self.model_dump(exclude_unset=True)


# --------------------------------------------------------------------------- dates


def parse_date(text: str) -> _dt.datetime:
    """Parse a LongMemEval date such as ``"2023/05/30 (Tue) 14:10"`` (locale independent).

    Raises:
        LongMemEvalError: if ``text`` is not of that form or is not a valid date.
    """
    m = _DATE_RE.match(text)
    if m is None:
        raise LongMemEvalError(
            f"date {text!r} is not of the form 'YYYY/MM/DD (Day) HH:MM'", field="date"
        )
    y, mo, d, _, h, mi = m.groups()
    try:
        return _dt.datetime(int(y), int(mo), int(d), int(h), int(mi))
    except ValueError as exc:
        raise LongMemEvalError(f"date {text!r} is invalid: {exc}", field="date") from exc


def format_date(when: _dt.datetime) -> str:
    """Format a datetime as LongMemEval does: ``"2023/05/30 (Tue) 14:10"``."""
    return f"{when:%Y/%m/%d} ({_WEEKDAYS[when.weekday()]}) {when:%H:%M}"


# --------------------------------------------------------------------------- loading

_JSON_WS = " \t\n\r"
# An error within this many characters of the buffer's end may be due to a chunk cut.
_CUT_MARGIN = 16


class _ArrayReader:
    """Incremental reader of a top-level JSON array, one element at a time.

    Uses :meth:`json.JSONDecoder.raw_decode` on a sliding text buffer; the buffer
    grows geometrically while one element does not fit, so an element is decoded in
    amortised linear time and memory never holds much more than one element's text.
    With ``chunk_chars=None`` the whole file is read at once.
    """

    def __init__(self, fp: Any, path: Path, chunk_chars: int | None) -> None:
        self.fp = fp
        self.path = path
        self.chunk = chunk_chars
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.base_line = 1  # line of buf[0]
        self.base_col = 1  # column of buf[0]
        self.index = 0  # index of the next element
        self.decoder = json.JSONDecoder()

    # -- buffer management
    def _fill(self, at_least: int = 0) -> None:
        if self.eof:
            return
        if self.pos:
            consumed = self.buf[: self.pos]
            newlines = consumed.count("\n")
            if newlines:
                self.base_line += newlines
                self.base_col = self.pos - consumed.rfind("\n")
            else:
                self.base_col += self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0
        try:
            new = self.fp.read() if self.chunk is None else self.fp.read(max(self.chunk, at_least))
        except UnicodeDecodeError as exc:
            raise LongMemEvalError(
                f"{self.path}: not valid UTF-8 text near element {self.index}: {exc}",
                path=self.path,
                index=self.index,
            ) from exc
        if not new:
            self.eof = True
        else:
            self.buf += new
            if self.chunk is None:
                self.eof = True

    def _skip_ws(self) -> None:
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in _JSON_WS:
                self.pos += 1
            if self.pos < n or self.eof:
                return
            self._fill()

    def _peek(self) -> str:
        self._skip_ws()
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def _error(self, msg: str, pos: int, *, in_element: bool = True) -> LongMemEvalError:
        before = self.buf[:pos]
        newlines = before.count("\n")
        line = self.base_line + newlines
        col = pos - before.rfind("\n") if newlines else self.base_col + pos
        where = f" in instance {self.index}" if in_element else ""
        return LongMemEvalError(
            f"{self.path}: invalid JSON{where} at line {line}, column {col}: {msg}",
            path=self.path,
            index=self.index if in_element else None,
            line=line,
            column=col,
        )

    def _decode(self) -> Any:
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buf) - _CUT_MARGIN
                if cut and not self.eof:
                    self._fill(len(self.buf) - self.pos)
                    continue
                raise self._error(exc.msg, exc.pos) from None
            if end >= len(self.buf) and not self.eof:
                # A bare number may continue in the next chunk: decode again with more text.
                self._fill(len(self.buf) - self.pos)
                continue
            self.pos = end
            return obj

    # -- the array
    def __iter__(self) -> Iterator[tuple[int, Any]]:
        c = self._peek()
        if c == "":
            raise self._error("empty file, expected a JSON array of instances", self.pos, in_element=False)
        if c != "[":
            raise self._error(
                f"expected a JSON array of instances ('['), found {c!r}", self.pos, in_element=False
            )
        self.pos += 1
        if self._peek() == "]":
            self.pos += 1
        else:
            while True:
                if self._peek() == "":
                    raise self._error("unexpected end of file (truncated?)", self.pos)
                obj = self._decode()
                yield self.index, obj
                self.index += 1
                c = self._peek()
                if c == ",":
                    self.pos += 1
                    if self._peek() == "]":
                        raise self._error("trailing comma before ']'", self.pos)
                    continue
                if c == "]":
                    self.pos += 1
                    break
                if c == "":
                    raise self._error("unexpected end of file: array not closed (truncated?)", self.pos)
                raise self._error(f"expected ',' or ']' after an instance, found {c!r}", self.pos)
        if self._peek() != "":
            raise self._error("extra data after the top-level array", self.pos, in_element=False)


_KNOWN_FIELDS = frozenset(Instance.model_fields) | frozenset(Turn.model_fields)


def _field_path(loc: tuple[int | str, ...]) -> str:
    """``('haystack_sessions', 3, 2, 'role')`` -> ``haystack_sessions[3][2].role``;
    pydantic's union/validator tags (``'str'``, ``'int'``...) are dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _KNOWN_FIELDS:
            out += ("." if out else "") + part
    return out or "<instance>"


def _describe(exc: ValidationError) -> tuple[str, str]:
    """(first field, readable message) for a pydantic error, grouped by field."""
    groups: dict[str, list[str]] = {}
    for err in exc.errors(include_url=False):
        field = _field_path(err["loc"])
        if err["type"] == "missing":
            text = "missing key"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"].endswith("_type") or err["type"] == "literal_error":
                msg += f" (got {type(err['input']).__name__} {_short(err['input'])})"
            text = msg
        groups.setdefault(field, [])
        if text not in groups[field]:
            groups[field].append(text)
    parts = [f"field '{f}': {' / '.join(msgs)}" for f, msgs in list(groups.items())[:3]]
    if len(groups) > 3:
        parts.append(f"and {len(groups) - 3} more field(s)")
    return next(iter(groups)), "; ".join(parts)


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def validate_record(
    record: Any, *, index: int | None = None, path: str | os.PathLike[str] | None = None
) -> Instance:
    """Validate one parsed JSON record as an :class:`Instance`.

    Args:
        record: the parsed JSON value (should be a dict in the official schema).
        index: its position in the file, for the error message.
        path: the file it came from, for the error message.

    Raises:
        LongMemEvalError: naming file, index, ``question_id`` and field.
    """
    qid = record.get("question_id") if isinstance(record, dict) else None
    qid = qid if isinstance(qid, str) else None
    where = f"{path}: " if path is not None else ""
    where += f"instance {index}" if index is not None else "instance"
    where += f" (question_id={qid!r})" if qid is not None else " (question_id unknown)"
    if not isinstance(record, dict):
        raise LongMemEvalError(
            f"{where}: expected a JSON object, got {type(record).__name__}",
            path=path,
            index=index,
            field="<instance>",
        )
    try:
        return Instance.model_validate(record)
    except ValidationError as exc:
        field, text = _describe(exc)
        raise LongMemEvalError(
            f"{where}: {text}", path=path, index=index, question_id=qid, field=field
        ) from None


def iter_load(
    path: str | os.PathLike[str],
    *,
    stream_threshold: int = DEFAULT_STREAM_THRESHOLD,
    chunk_chars: int = DEFAULT_CHUNK_CHARS,
) -> Iterator[Instance]:
    """Yield the validated instances of a LongMemEval JSON file one at a time.

    Files larger than ``stream_threshold`` bytes are read in chunks of
    ``chunk_chars`` characters and decoded element by element, so only one
    instance's text and parsed dict are held at once (LongMemEval_M is ~2.7 GB);
    smaller files are read whole. Both paths give the same instances and errors.

    Args:
        path: a ``longmemeval_{oracle,s_cleaned,m_cleaned}.json``-style file.
        stream_threshold: size in bytes above which the file is streamed.
        chunk_chars: characters per read when streaming (> 0).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        LongMemEvalError: invalid JSON (with line/column), a top level that is not
            an array, a record violating the schema (naming index, ``question_id``
            and field), or a duplicate ``question_id``.
    """
    if chunk_chars <= 0:
        raise ValueError(f"chunk_chars must be positive, got {chunk_chars}")
    p = Path(path)
    size = p.stat().st_size
    seen: dict[str, int] = {}
    with p.open(encoding="utf-8") as fp:
        reader = _ArrayReader(fp, p, chunk_chars if size > stream_threshold else None)
        for index, record in reader:
            inst = validate_record(record, index=index, path=p)
            if inst.question_id in seen:
                raise LongMemEvalError(
                    f"{p}: instance {index} (question_id={inst.question_id!r}): field "
                    f"'question_id': duplicate of instance {seen[inst.question_id]}",
                    path=p,
                    index=index,
                    question_id=inst.question_id,
                    field="question_id",
                )
            seen[inst.question_id] = index
            yield inst


def load(
    path: str | os.PathLike[str],
    *,
    stream_threshold: int = DEFAULT_STREAM_THRESHOLD,
    chunk_chars: int = DEFAULT_CHUNK_CHARS,
) -> list[Instance]:
    """Load and validate a LongMemEval JSON file (oracle, S or M) as a list of instances.

    See :func:`iter_load` for the arguments, streaming behaviour and raised errors.
    """
    return list(iter_load(path, stream_threshold=stream_threshold, chunk_chars=chunk_chars))


# --------------------------------------------------------------------------- sampling


def sample(
    instances: Sequence[Instance], n: int, seed: int, stratify: bool = True
) -> list[Instance]:
    """Draw ``n`` distinct instances reproducibly (the study samples N = 50, Setup).

    With ``stratify=True`` each ``question_type`` gets a proportional share:
    ``floor(n * size / total)``, and the leftover slots go to the types with the
    largest remainders (ties broken by a seeded random order); within a type the
    instances are drawn uniformly without replacement by ``numpy.random.default_rng(seed)``.
    The result keeps the input order.

    Args:
        instances: the population.
        n: how many to draw, ``0 <= n <= len(instances)``.
        seed: seed of the numpy Generator.
        stratify: allocate by question type (True) or draw uniformly (False).

    Raises:
        ValueError: if ``n`` is negative or larger than ``len(instances)``.
    """
    total = len(instances)
    if not 0 <= n <= total:
        raise ValueError(f"cannot sample n={n} instances from a population of {total}")
    rng = np.random.default_rng(seed)
    if not stratify:
        picked = rng.choice(total, size=n, replace=False)
        return [instances[i] for i in sorted(int(i) for i in picked)]
    groups: dict[str, list[int]] = {}
    for i, inst in enumerate(instances):
        groups.setdefault(inst.question_type, []).append(i)
    names = sorted(groups)
    base = {g: n * len(groups[g]) // total for g in names}
    remainder = {g: n * len(groups[g]) % total for g in names}
    left = n - sum(base.values())
    tiebreak = rng.permutation(len(names))
    order = sorted(range(len(names)), key=lambda j: (-remainder[names[j]], int(tiebreak[j])))
    for j in order[:left]:
        base[names[j]] += 1
    chosen: list[int] = []
    for g in names:
        members = groups[g]
        picked = rng.choice(len(members), size=base[g], replace=False)
        chosen.extend(members[int(k)] for k in picked)
    return [instances[i] for i in sorted(chosen)]


# --------------------------------------------------------------------------- synthetic

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
