"""Memory designs as values: a name plus the nodes of the write and read graphs.

docs/design.md, "Designs": a memory design is a value (a name, the writer, summarizer,
retriever and responder, and the tiers each S reads); the sweep runs a design through
its compiled write and read graphs, so whatever a user swaps is what is measured;
``study`` is the source study's pipeline.

A :class:`MemoryDesign` holds the writer (a :data:`graphs.nodes.Writer`) and three
node *factories*, because those nodes need the run's resources:

* ``summarizer(model_or_spec, cache=cache) -> Summarizer`` (default
  :func:`graphs.nodes.make_summarizer`);
* ``retriever(store) -> Retriever`` (default :func:`graphs.nodes.make_retriever`);
* ``responder(model_or_spec, cache=cache) -> Responder`` (default
  :func:`graphs.nodes.make_responder`);

and ``tiers``: the tiers read at each summary level S (default S=0 -> ``raw``,
S>=1 -> ``summary``, :func:`graphs.nodes.tiers_for`). :meth:`MemoryDesign.write_graph`
and :meth:`MemoryDesign.read_graph` compile the design's graphs with
:func:`graphs.memory.build_write_graph` / :func:`graphs.memory.build_read_graph`.

Built-in designs (:data:`DESIGNS`, by name):

``study``
    the source study's pipeline (arXiv 2606.10062, Setup): one raw chunk per user
    turn, summaries at level S, top-k by cosine similarity, the model's responder.
``mmr``
    ``study`` with maximal-marginal-relevance retrieval (:class:`MMRRetriever`:
    LangChain's :func:`~langchain_core.vectorstores.utils.maximal_marginal_relevance`
    over the top ``fetch_k`` cosine candidates) instead of plain top-k.
``redacting``
    ``study`` whose summaries pass through a PII/credential scrubber
    (:class:`RedactingSummarizer` with :func:`scrubber`: scrubadub's detectors plus
    :func:`secret_detector` for values introduced by credential words and
    token-shaped strings). Raw turns are stored as written (a deployed system keeps
    its log), so at S=0 it equals ``study``; at S>=1 it shows what scrubbing buys
    over plain summarizing.

A design given as text (CLI ``--design``) is a built-in name or ``module:factory``:
``factory`` is a :class:`MemoryDesign` or a callable returning one (:func:`resolve_design`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import numpy as np

from graphs.memory import build_read_graph, build_write_graph
from graphs.nodes import (
    Responder,
    Retriever,
    Summarizer,
    SummaryItem,
    Writer,
    check_level,
    make_responder,
    make_retriever,
    make_summarizer,
    user_turn_chunks,
)
from memkit.scan.matching import matcher, redact_text
from memkit.store.tiered import TIERS, Chunk, TieredMemoryStore

__all__ = [
    "DESIGNS",
    "MMRRetriever",
    "MemoryDesign",
    "RedactingSummarizer",
    "detect_secrets",
    "secret_detector",
    "mmr_design",
    "redacting_design",
    "resolve_design",
    "scrub_text",
    "scrubber",
    "study_design",
]

SummarizerFactory = Callable[..., Summarizer]
"""``(model_or_spec, *, cache=None) -> Summarizer`` (like :func:`graphs.nodes.make_summarizer`)."""

RetrieverFactory = Callable[[TieredMemoryStore], Retriever]
"""``(store) -> Retriever`` (like :func:`graphs.nodes.make_retriever`)."""

ResponderFactory = Callable[..., Responder]
"""``(model_or_spec, *, cache=None) -> Responder`` (like :func:`graphs.nodes.make_responder`)."""

_STUDY_TIERS: Mapping[int, tuple[str, ...]] = MappingProxyType({0: ("raw",), 1: ("summary",), 2: ("summary",)})


@dataclass(frozen=True)
class MemoryDesign:
    """A memory design: a name, the nodes of its graphs and the tiers each S reads.

    Attributes:
        name: the design's name (records and metrics carry it as ``design``; a
            sweep over several designs writes one directory per name). Letters,
            digits, ``_``, ``-`` and ``.``.
        description: one line for reports.
        writer: the write node, ``(namespace, session_id, date, turns) -> raw chunks``.
        summarizer: factory ``(model_or_spec, *, cache=None) -> Summarizer``.
        retriever: factory ``(store) -> Retriever``.
        responder: factory ``(model_or_spec, *, cache=None) -> Responder``.
        tiers: summary level S -> tuple of tiers the read path searches.
        prefix_retrieval: whether the retriever's top-k is a prefix of its top-k' for
            k < k' (true of cosine top-k and of greedy MMR over a fixed candidate
            pool). The sweep then retrieves once at the largest k and answers each k
            with the prefix; otherwise it calls the retriever once per k.

    Raises:
        ValueError: a bad name, or ``tiers`` not covering S = 0, 1, 2 with tiers of
            :data:`memkit.store.tiered.TIERS`.
    """

    name: str
    description: str = ""
    writer: Writer = user_turn_chunks
    summarizer: SummarizerFactory = make_summarizer
    retriever: RetrieverFactory = make_retriever
    responder: ResponderFactory = make_responder
    tiers: Mapping[int, tuple[str, ...]] = field(default_factory=lambda: _STUDY_TIERS)
    prefix_retrieval: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", self.name):
            raise ValueError(
                f"MemoryDesign name must be letters, digits, '_', '-', '.' (not starting with '.' or '-'); "
                f"got {self.name!r}"
            )
        for S in (0, 1, 2):
            t = self.tiers.get(S) if isinstance(self.tiers, Mapping) else None
            if not t or any(x not in TIERS for x in t):
                raise ValueError(
                    f"MemoryDesign {self.name!r}: tiers[{S}] must be a non-empty tuple of {TIERS}, got {t!r}"
                )

    def tiers_for(self, S: int) -> tuple[str, ...]:
        """The tiers the design reads at summary level ``S`` (0, 1 or 2).

        Raises:
            ValueError: ``S`` is not a summary level.
        """
        return tuple(self.tiers[check_level(S)])

    def write_graph(self, store: TieredMemoryStore, model: Any = "extractive", *, cache: Any = None,
                    summarizer: Summarizer | None = None) -> Any:
        """Compile the design's write graph over ``store``.

        Args:
            store: where chunks go.
            model: model spec or chat model for the summarizer factory.
            cache: an :class:`memkit.store.cache.LLMCache` for the summarizer's model.
            summarizer: an already built summarizer (overrides ``model``/``cache``).

        Returns:
            A compiled LangGraph taking :class:`graphs.memory.WriteState`.
        """
        return build_write_graph(store, summarizer=summarizer or self.summarizer(model, cache=cache),
                                 writer=self.writer)

    def read_graph(self, store: TieredMemoryStore, model: Any = "extractive", *, cache: Any = None,
                   retriever: Retriever | None = None, responder: Responder | None = None) -> Any:
        """Compile the design's read graph over ``store``.

        Args:
            store: where chunks are read from.
            model: model spec or chat model for the responder factory.
            cache: an :class:`memkit.store.cache.LLMCache` for the responder's model.
            retriever, responder: already built nodes (override the factories).

        Returns:
            A compiled LangGraph taking :class:`graphs.memory.ReadState`; give it
            ``tiers`` (e.g. :meth:`tiers_for`) or it falls back to the study's tiers.
        """
        return build_read_graph(store, retriever=retriever or self.retriever(store),
                                responder=responder or self.responder(model, cache=cache))


# --------------------------------------------------------------------------- mmr


class MMRRetriever:
    """Maximal-marginal-relevance :data:`graphs.nodes.Retriever` over a store.

    Takes the top ``max(fetch_k, k)`` chunks by cosine similarity
    (:meth:`memkit.store.tiered.TieredMemoryStore.search`), then selects ``k`` of them with
    LangChain's :func:`langchain_core.vectorstores.utils.maximal_marginal_relevance`
    (greedy: relevance ``lambda_mult`` vs. redundancy ``1 - lambda_mult``) on the
    stored vectors and the query's MiniLM embedding. For ``k <= fetch_k`` the
    candidate pool does not depend on k and the selection is greedy, so top-k is a
    prefix of top-k'.

    Args:
        store: the memory.
        fetch_k: candidate pool size (default 25, the study's largest k).
        lambda_mult: in [0, 1]; 1 is plain top-k, 0 maximal diversity (default 0.5,
            LangChain's default).

    Raises:
        ValueError: ``fetch_k < 1`` or ``lambda_mult`` outside [0, 1].
    """

    def __init__(self, store: TieredMemoryStore, *, fetch_k: int = 25, lambda_mult: float = 0.5) -> None:
        if fetch_k < 1 or not 0.0 <= lambda_mult <= 1.0:
            raise ValueError(f"MMRRetriever: need fetch_k >= 1 and 0 <= lambda_mult <= 1, got {fetch_k}, {lambda_mult}")
        self.store = store
        self.fetch_k = fetch_k
        self.lambda_mult = lambda_mult
        self.calls = 0

    def __call__(self, query: str, k: int, tiers: Sequence[str], namespace: str | None = None) -> list[Chunk]:
        """Up to ``k`` chunks of ``tiers`` (in ``namespace``) in MMR order."""
        from langchain_core.vectorstores.utils import maximal_marginal_relevance

        if k < 1:
            raise ValueError(f"retrieve: k must be >= 1, got {k}")
        self.calls += 1
        pool = self.store.search(query, max(self.fetch_k, k), tiers=tuple(tiers), namespace=namespace)
        if len(pool) <= 1:
            return pool[:k]
        vecs = self.store.embeddings_of([c.id for c in pool])
        qvec = np.asarray(self.store.embedder.encode([query]), dtype=np.float32)[0]
        order = maximal_marginal_relevance(qvec, vecs.tolist(), lambda_mult=self.lambda_mult, k=k)
        return [pool[i] for i in order]


def mmr_design(*, fetch_k: int = 25, lambda_mult: float = 0.5, name: str = "mmr") -> MemoryDesign:
    """The ``mmr`` design: ``study`` with :class:`MMRRetriever` (arguments as there)."""
    return MemoryDesign(
        name=name,
        description=f"study with MMR retrieval (LangChain, fetch_k={fetch_k}, lambda={lambda_mult})",
        retriever=lambda store: MMRRetriever(store, fetch_k=fetch_k, lambda_mult=lambda_mult),
    )


# --------------------------------------------------------------------------- redacting


@lru_cache(maxsize=1)
def _secret_detector_cls() -> type:
    import scrubadub
    import scrubadub.detectors
    import scrubadub.filth

    class SecretFilth(scrubadub.filth.Filth):
        type = "secret"

    class _SecretDetector(scrubadub.detectors.RegexDetector):
        """scrubadub detector for credentials without a username: a value introduced by
        a credential word (``token``, ``password``, ``passcode``, ``pin``, ``secret``,
        ``api key``, ``access code`` followed by ``is``, ``:`` or ``=``), and
        token-shaped strings (letters and digits in at least two groups joined by
        ``-`` or ``_``, with at least one digit and one upper-case letter, e.g. licence
        keys and session tokens)."""

        name = "secret"
        filth_cls = SecretFilth
        regex = re.compile(
            r"(?i:(?<=token is )|(?<=token: )|(?<=password is )|(?<=password: )|(?<=passcode is )"
            r"|(?<=pin is )|(?<=secret is )|(?<=key is )|(?<=code is )|(?<=token = )|(?<=password = ))"
            r"[^\s,;.]+(?:[.][^\s,;.]+)*"
            r"|\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Z])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+\b"
        )

    return _SecretDetector


def secret_detector() -> type:
    """The scrubadub ``RegexDetector`` class for credentials without a username (its
    docstring gives the patterns). A function so that scrubadub (a few seconds to
    import) loads only when the ``redacting`` design is used."""
    return _secret_detector_cls()


_SCRUBBER: list[Any] = []


def scrubber() -> Any:
    """The shared offline scrubber: a ``scrubadub.Scrubber`` with its default detectors
    (credential, credit card, email, phone, twitter, url, social security number) plus
    :func:`secret_detector`. Replaces each finding by ``{{TYPE}}`` (e.g. ``{{SECRET}}``,
    ``{{EMAIL}}``). No model, no network."""
    if not _SCRUBBER:
        import scrubadub

        s = scrubadub.Scrubber()
        s.add_detector(secret_detector())
        _SCRUBBER.append(s)
    return _SCRUBBER[0]


_JOINER = re.compile(r"(?<=[^\W_])(?:[^\w\s]|_)+(?=[^\W_])")
"""A run of punctuation or symbols between two letters or digits (``–``, ``.``, ``/``)."""


def _views(text: str) -> list[str]:
    """The text as the scrubber's detectors read it: as given; its visible form (NFKC,
    format characters such as zero-width spaces removed); and that with every run of
    punctuation or symbols between two letters or digits written ``-`` (en dashes,
    minus signs, dots: the joiners :mod:`memkit.scan.matching` treats as separators)."""
    visible = "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")
    return list(dict.fromkeys([text, visible, _JOINER.sub("-", visible)]))


def detect_secrets(text: str) -> dict[str, str]:
    """What :func:`scrubber` finds in ``text`` (any of :func:`_views`), as
    ``{value: "{{TYPE}}"}`` (first type found wins); values without a letter or
    digit are left out (they have no copy to match)."""
    s = scrubber()
    found: dict[str, str] = {}
    for view in _views(text):
        for f in s.iter_filth(view):
            if any(c.isalnum() for c in f.text):
                found.setdefault(f.text, "{{" + str(f.type).upper() + "}}")
    return found


def scrub_text(text: str, known: Mapping[str, str] | None = None) -> str:
    """``text`` with every copy of every detected value replaced, in every spelling
    :mod:`memkit.scan.matching` counts as a copy (any case, any dash or blank between its
    characters, zero-width characters, any Unicode normal form, escapes).

    Detected values are those :func:`detect_secrets` finds in ``text`` plus ``known``
    (values found elsewhere, e.g. in the turns a summary was made from: a spelling a
    detector cannot tell from prose, such as the value spaced by blanks or in lower
    case, is then still a copy of something the scrubber scrubs). Each is redacted
    with the matcher, longest first, then the scrubber cleans what is left.

    Args:
        text: the text to scrub.
        known: ``{value: placeholder}`` found elsewhere (placeholders such as
            ``"{{SECRET}}"``, as :func:`detect_secrets` returns).

    Returns:
        The scrubbed text; replacements are the scrubber's ``{{TYPE}}``.
    """
    found = {**(known or {}), **detect_secrets(text)}
    out = text
    for secret, placeholder in sorted(found.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        if not matcher(secret).search(placeholder):
            out = redact_text(out, secret, placeholder)
    return scrubber().clean(out)


class RedactingSummarizer:
    """A :data:`graphs.nodes.Summarizer` whose items pass through a scrubber.

    Each summary item's text is replaced by ``scrub(text)``; its ``source_ids`` are
    kept; an item left empty is dropped. The default scrub is :func:`scrub_text` with
    ``known`` = what :func:`detect_secrets` finds in the chunks summarized and the
    prior summary: a value the user wrote as ``XQ7-VIOLET-3829`` is scrubbed from a
    summary that writes it ``xq7 violet 3829``. The prior summary given for a rolling
    re-summarization is passed to the inner summarizer as stored (already scrubbed).

    Args:
        inner: the summarizer whose output is scrubbed.
        scrub: ``str -> str`` (replaces the default, which reads the sources too).
    """

    def __init__(self, inner: Summarizer, scrub: Callable[[str], str] | None = None) -> None:
        self.inner = inner
        self.scrub = scrub

    def __call__(self, chunks: list[Chunk], S: int, prior: list[str] | None = None) -> list[SummaryItem]:
        """Summarize with the inner summarizer, then scrub each item."""
        scrub = self.scrub
        if scrub is None:
            known: dict[str, str] = {}
            for source in [*(c.text for c in chunks), *(prior or [])]:
                for value, placeholder in detect_secrets(source).items():
                    known.setdefault(value, placeholder)

            def scrub(text: str) -> str:
                return scrub_text(text, known)

        out = []
        for item in self.inner(chunks, S, prior):
            text = scrub(item[0]).strip()
            if text:
                out.append(SummaryItem(text, list(item[1])))
        return out


def _redacting_summarizer(model_or_spec: Any = "extractive", *, cache: Any = None, **kw: Any) -> Summarizer:
    return RedactingSummarizer(make_summarizer(model_or_spec, cache=cache, **kw))


def redacting_design(name: str = "redacting") -> MemoryDesign:
    """The ``redacting`` design: ``study`` with :class:`RedactingSummarizer` over the
    model's summarizer (scrubadub + :func:`secret_detector`)."""
    return MemoryDesign(
        name=name,
        description="study with summaries scrubbed of PII and credentials (scrubadub)",
        summarizer=_redacting_summarizer,
    )


def study_design() -> MemoryDesign:
    """The ``study`` design: the source study's pipeline (module docstring)."""
    return MemoryDesign(name="study", description="the source study's pipeline (top-k cosine, summaries at S)")


DESIGNS: Mapping[str, Callable[[], MemoryDesign]] = MappingProxyType(
    {"study": study_design, "mmr": mmr_design, "redacting": redacting_design}
)
"""Built-in designs by name: each value builds the design."""


def resolve_design(spec: str | MemoryDesign) -> MemoryDesign:
    """A design from a built-in name, ``module:factory``, or a :class:`MemoryDesign`.

    ``module:factory`` imports ``module`` and takes its attribute ``factory``
    (dotted paths allowed): a :class:`MemoryDesign`, or a callable of no arguments
    returning one.

    Raises:
        ValueError: an unknown name, a module or attribute that cannot be found, or a
            factory that does not give a :class:`MemoryDesign` (the message names the spec).
    """
    if isinstance(spec, MemoryDesign):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"--design: expected a design name or module:factory, got {spec!r}")
    spec = spec.strip()
    if ":" not in spec:
        if spec not in DESIGNS:
            raise ValueError(
                f"--design {spec!r}: unknown design; built-ins are {sorted(DESIGNS)}, "
                "or give module:factory"
            )
        return DESIGNS[spec]()
    from memkit.runtime import import_spec

    obj = import_spec(spec, "--design")
    design = obj if isinstance(obj, MemoryDesign) else obj() if callable(obj) else obj
    if not isinstance(design, MemoryDesign):
        raise ValueError(
            f"--design {spec!r}: {spec.partition(':')[2]} gave a {type(design).__name__}, not a graphs.designs.MemoryDesign"
        )
    return design

