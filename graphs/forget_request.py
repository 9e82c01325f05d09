"""Forget requests in words: resolve what a user asks to forget, show it, delete it.

Users do not ask to forget a string; they say "forget what I told you about my bank",
"delete my s3ssion t0ken", "olvida mi dirección" (ForgetEval, arXiv 2606.15903). A
request is resolved to the memory items it concerns -- sentences of the user's stored
turns -- and those are forgotten with a deletion mode of :mod:`graphs.forget`:

1. **candidates**: every sentence of the user's memories (:class:`Item`).
2. **literal match** (the one matcher, :mod:`memkit.scan.matching`): a sentence whose
   identifier (:func:`identifiers`: a token with digits, an e-mail address, a run of
   capitalised words) the request spells, in any case, with any separators, or in
   digits for letters (``0`` for ``o``, ``3`` for ``e`` ...), is selected.
3. otherwise **retrieval** over the user's namespace: the sentence nearest the
   request by the store's embedding (cosine), restricted to the sessions of a weekday
   the request names ("what I told you on Tuesday"), selected if its cosine reaches
   ``threshold``; or, **with a chat model**, the model's judgement over the
   ``candidates`` nearest sentences, listed in an order drawn from the request (so a
   model's bias for the first item earns nothing), answered with their numbers.
4. **preview** (:meth:`Resolution.preview`): what will be deleted; ``confirm`` may
   refuse it.
5. **delete**: each selected sentence, and its identifiers with digits or ``@``,
   forgotten with the mode (:func:`graphs.forget.forget_strings`, each string in turn).

The deterministic resolver (no model) and the LLM resolver differ only in step 3.
:func:`build_forget_request_graph` is the same as a LangGraph graph (``resolve`` ->
``preview`` -> ``forget``). The graph state holds the request and what it resolves
to: do not compile it with a checkpointer.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from memkit.dataset.canaries import TOKEN_RE
from memkit.scan.matching import alnum_fold

__all__ = ["Item", "Match", "RequestForget", "Resolution", "build_forget_request_graph", "forget_request",
           "identifiers", "resolve", "store_items"]

THRESHOLD = 0.35
"""Least cosine between a request and a sentence for the deterministic resolver to
select it by retrieval alone."""

CANDIDATES = 8
"""Sentences the LLM resolver judges (the nearest by retrieval, and every literal match)."""

_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "8": "b"})
_SHAPES = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"                      # e-mail
    r"|\+?\d[\d ()-]{6,}\d"                               # phone / card numbers
    r"|\b(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*\b"  # a token holding a digit
)
_CAPS = re.compile(r"\b(?:\d+ )?[A-Z][a-zA-Z'-]{2,}(?: (?:[A-Z][a-zA-Z'-]+|de|da|del|van|von))*")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


@dataclass(frozen=True)
class Item:
    """One candidate: a sentence of one stored memory (``id``) of ``namespace``, from a
    session of ``date``."""

    id: str
    sentence: str
    date: str = ""
    namespace: str = ""


@dataclass(frozen=True)
class Match:
    """A selected item, its score and why (``literal``, ``retrieval``, ``llm``)."""

    item: Item
    score: float
    why: str


@dataclass
class Resolution:
    """What a request resolved to.

    Attributes:
        request: the request. resolver: ``deterministic`` or ``llm:<model>``.
        matches: the selected items. considered: sentences considered.
    """

    request: str
    resolver: str
    matches: list[Match] = field(default_factory=list)
    considered: int = 0

    def texts(self) -> list[str]:
        """The selected sentences."""
        return [m.item.sentence for m in self.matches]

    def strings(self) -> list[str]:
        """What is forgotten: each selected sentence, and its identifiers holding a
        digit or ``@`` (so a summary that copied the value is found too)."""
        out: list[str] = []
        for m in self.matches:
            for s in [m.item.sentence, *(i for i in identifiers(m.item.sentence) if re.search(r"[\d@]", i))]:
                if s not in out:
                    out.append(s)
        return out

    def preview(self) -> str:
        """The items that will be forgotten, one line each (for the user who asked)."""
        if not self.matches:
            return f"Nothing found for {self.request!r} ({self.resolver}, {self.considered} sentences)."
        lines = [f"To forget for {self.request!r} ({self.resolver}):"]
        lines += [f"- {m.item.sentence} [memory {m.item.id}, {m.why} {m.score:.2f}]" for m in self.matches]
        return "\n".join(lines)


def identifiers(sentence: str) -> list[str]:
    """Identifier-like spans of a sentence: tokens holding a digit, e-mail addresses,
    phone and card numbers, canary tokens, runs of capitalised words past the first
    word (names, places)."""
    out = [m.group(0) for m in TOKEN_RE.finditer(sentence)]
    out += [m.group(0).strip() for m in _SHAPES.finditer(sentence)]
    first = re.match(r"\W*\w+", sentence)
    start = first.end() if first else 0
    out += [m.group(0) for m in _CAPS.finditer(sentence) if m.start() >= start and m.group(0) not in ("I",)]
    keep = [s for s in dict.fromkeys(out) if len(alnum_fold(s)) >= 3]
    return [s for s in keep if not any(s != o and s in o for o in keep)]


def _literal(request: str, item: Item) -> bool:
    folded = alnum_fold(request)
    leet = folded.translate(_LEET)
    for ident in identifiers(item.sentence):
        f = alnum_fold(ident)
        if len(f) >= 4 and (f in folded or f.translate(_LEET) in leet):
            return True
    return False


def _weekdays(request: str) -> set[str]:
    low = request.lower()
    return {d[:3] for d in _WEEKDAYS if re.search(rf"\b{d}\b", low)}


def _on_day(item: Item, days: set[str]) -> bool:
    low = item.date.lower()
    return any(f"({d})" in low or d in low for d in days)


def _encode(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    from memkit.residue.weigh import encode

    return encode(embedder, texts)


def _ask_model(chat_model: Any, request: str, items: Sequence[Item]) -> list[int]:
    from langchain_core.messages import HumanMessage

    lines = "\n".join(f"{n}. [{it.date}] {it.sentence}" for n, it in enumerate(items, start=1))
    prompt = (f"A user asked their assistant: \"{request}\"\n\nThese are things the user told the assistant:\n"
              f"{lines}\n\nWhich of them does the user want forgotten? Answer with their numbers only "
              "(for example: 2), or 'none'.")
    reply = chat_model.invoke([HumanMessage(content=prompt)])
    text = str(getattr(reply, "content", reply))
    return [int(x) - 1 for x in dict.fromkeys(re.findall(r"\b\d+\b", text)) if 1 <= int(x) <= len(items)]


def resolve(request: str, items: Sequence[Item], embedder: Any, *, chat_model: Any = None,
            threshold: float = THRESHOLD, candidates: int = CANDIDATES) -> Resolution:
    """Resolve ``request`` to the ``items`` it concerns (module doc, steps 2-3).

    Args:
        request: the user's words.
        items: every sentence of the user's memories.
        embedder: the store's embedder (``encode`` or LangChain ``embed_documents``).
        chat_model: a LangChain chat model for the LLM judgement (``None``: deterministic).
        threshold: the deterministic resolver's least cosine.
        candidates: sentences the model judges.

    Raises:
        ValueError: an empty request.
    """
    if not isinstance(request, str) or not request.strip():
        raise ValueError("forget request: the request must be non-empty text")
    name = "deterministic" if chat_model is None else f"llm:{getattr(chat_model, 'model_name', None) or type(chat_model).__name__}"
    out = Resolution(request, name, considered=len(items))
    if not items:
        return out
    literal = [it for it in items if _literal(request, it)]
    if literal and chat_model is None:
        out.matches = [Match(it, 1.0, "literal") for it in literal]
        return out
    vecs = _encode(embedder, [request, *(it.sentence for it in items)])
    cos = vecs[1:] @ vecs[0]
    days = _weekdays(request)
    pool = [i for i, it in enumerate(items) if not days or _on_day(it, days)] or list(range(len(items)))
    order = sorted(pool, key=lambda i: (-cos[i], i))
    if chat_model is None:
        best = order[0]
        if cos[best] >= threshold:
            out.matches = [Match(items[best], float(cos[best]), "retrieval")]
        return out
    shown = list(dict.fromkeys([*(items.index(it) for it in literal), *order[:candidates]]))
    # in an order of the request's own, so a model that always answers "1" gets no
    # credit for the retrieval's ranking
    seed = int.from_bytes(hashlib.sha256(request.encode("utf-8")).digest()[:8], "big")
    np.random.default_rng(seed).shuffle(shown)
    picked = {shown[j] for j in _ask_model(chat_model, request, [items[i] for i in shown])}
    out.matches = [Match(items[i], 1.0, "literal") for i in shown if items[i] in literal]
    out.matches += [Match(items[i], float(cos[i]), "llm") for i in shown if i in picked and items[i] not in literal]
    return out


def store_items(store: Any, namespace: str | Sequence[str]) -> list[Item]:
    """Every sentence of the raw chunks of ``namespace`` in a tiered store: a namespace
    as stored, or a namespace's labels (the chunks whose
    :func:`~memkit.store.langgraph.chunk_namespace` equals them)."""
    from memkit.models.extractive import split_sentences
    from memkit.store.langgraph import NAMESPACE_SEPARATOR, chunk_namespace

    if isinstance(namespace, str):
        chunks = store.chunks(namespace=namespace, tiers=["raw"])
    else:
        labels = tuple(namespace)
        chunks = [c for c in store.chunks(namespace=NAMESPACE_SEPARATOR.join(labels), tiers=["raw"])
                  if chunk_namespace(c) == labels]
    return [Item(c.id, s, c.date, c.namespace) for c in chunks for s in split_sentences(c.text)]


# --------------------------------------------------------------------------- deleting


@dataclass
class RequestForget:
    """A request's resolution and what forgetting it changed (one
    :class:`~graphs.forget.ForgetResult` per string of :meth:`Resolution.strings`).
    ``confirmed``: False when ``confirm`` refused the preview (nothing was deleted)."""

    resolution: Resolution
    results: list[Any] = field(default_factory=list)
    confirmed: bool = True

    @property
    def resolved_texts(self) -> list[str]:
        """The sentences the request resolved to."""
        return self.resolution.texts()

    def changes(self) -> dict[str, Any]:
        """The results' changes summed (:meth:`graphs.forget.ForgetResult.changes`), and
        ``request``: ``{"items", "resolver", "confirmed"}``."""
        out: dict[str, Any] = {"deleted": {}, "redacted": {}, "created": {}, "cache_entries_purged": 0,
                               "bytes_before": None, "bytes_after": None}
        for r in self.results:
            ch = r.changes()
            for key in ("deleted", "redacted", "created"):
                for tier, n in ch[key].items():
                    out[key][tier] = out[key].get(tier, 0) + n
            out["cache_entries_purged"] += ch["cache_entries_purged"]
            for key in ("bytes_before", "bytes_after", "keys_destroyed"):
                if ch.get(key) is not None:
                    out[key] = ch[key]
        out["request"] = {"items": len(self.resolution.matches), "resolver": self.resolution.resolver,
                          "confirmed": self.confirmed}
        return out


def forget_request(store: Any, request: str, mode: str, *, namespace: str, chat_model: Any = None,
                   confirm: Callable[[Resolution], bool] | None = None, S: int | None = None,
                   summarizer: Any = None, cache: Any = None, unverified_ok: bool = False,
                   threshold: float = THRESHOLD) -> RequestForget:
    """Resolve a request in words over ``namespace`` of a tiered store, show it to
    ``confirm``, and forget what it resolved to with ``mode`` (module doc).

    Args:
        store: a :class:`~memkit.store.TieredMemoryStore`.
        request: the user's words. mode: a deletion mode of :mod:`graphs.forget`.
        namespace: the user's namespace.
        chat_model: a LangChain chat model (or a :func:`memkit.models.chat_model` spec)
            for the LLM judgement; ``None``: the deterministic resolver.
        confirm: called with the :class:`Resolution`; ``False`` deletes nothing.
        S, summarizer, cache, unverified_ok: as :func:`graphs.forget.forget`.
        threshold: the deterministic resolver's least cosine.

    Returns:
        :class:`RequestForget`.

    Raises:
        ValueError: an empty request or an unknown mode. StoreError: as
            :func:`graphs.forget.forget` (before any change).
    """
    from graphs.forget import DELETION_MODES, forget_strings

    if mode not in DELETION_MODES:
        raise ValueError(f"unknown deletion mode {mode!r}; use one of {DELETION_MODES}")
    if isinstance(chat_model, str):
        from memkit.models import chat_model as make

        chat_model = make(chat_model)
    resolution = resolve(request, store_items(store, namespace), store.embedder, chat_model=chat_model,
                         threshold=threshold)
    if confirm is not None and not confirm(resolution):
        return RequestForget(resolution, [], confirmed=False)
    results = forget_strings(store, resolution.strings(), mode, namespace=namespace, S=S, summarizer=summarizer,
                             cache=cache, unverified_ok=unverified_ok)  # graphs.forget
    return RequestForget(resolution, results)


class RequestState(TypedDict, total=False):
    """State of the request graph: input ``request``, ``mode``, ``namespace``; output
    ``resolution``, ``preview`` and ``result`` (:class:`RequestForget`)."""

    request: str
    mode: str
    namespace: str
    resolution: Resolution
    preview: str
    result: RequestForget


def build_forget_request_graph(store: Any, *, chat_model: Any = None,
                               confirm: Callable[[Resolution], bool] | None = None, summarizer: Any = None,
                               cache: Any = None) -> Any:
    """Compile the request graph: ``resolve`` -> ``preview`` -> ``forget`` (skipped when
    nothing was found or ``confirm`` refuses), as :func:`forget_request`."""
    from langgraph.graph import END, START, StateGraph

    def resolve_node(state: RequestState) -> dict[str, Any]:
        return {"resolution": resolve(state["request"], store_items(store, state["namespace"]), store.embedder,
                                      chat_model=chat_model)}

    def preview_node(state: RequestState) -> dict[str, Any]:
        return {"preview": state["resolution"].preview()}

    def route(state: RequestState) -> str:
        res = state["resolution"]
        return "forget" if res.matches and (confirm is None or confirm(res)) else END

    def forget_node(state: RequestState) -> dict[str, Any]:
        from graphs.forget import forget_strings

        res = state["resolution"]
        results = forget_strings(store, res.strings(), state["mode"], namespace=state["namespace"],
                                 summarizer=summarizer, cache=cache)
        return {"result": RequestForget(res, results)}

    graph = StateGraph(RequestState)
    graph.add_node("resolve", resolve_node)
    graph.add_node("preview", preview_node)
    graph.add_node("forget", forget_node)
    graph.add_edge(START, "resolve")
    graph.add_edge("resolve", "preview")
    graph.add_conditional_edges("preview", route, ["forget", END])
    graph.add_edge("forget", END)
    return graph.compile(name="memkit-forget-request")
