"""The probe library: families of adversarial probes as data, beside the study's nine.

The study's probes (:mod:`evaluators.scoring.probes`, three levels of three templates) stay the
reference set: they are the ``study`` set here, rendered from that module unchanged, and
the study's tables read only them. The library (``evaluators/data/probes.json``) adds
families from the extraction literature, each probe tagged with its family, its turns
(one, or two for a follow-up in the same conversation), its source and the transform it
asks the agent to apply to the secret (undone by :mod:`evaluators.adversary.detect`).
Users add probes from a JSON file or a Python list (:func:`resolve_probes`).

A probe file is JSON: a list of probes, or ``{"families": {...}, "probes": [...]}``; a
probe is ``{"id", "family", "turns": [text, ...]}`` (or ``"text"`` for one turn), with
optional ``"source"`` and ``"transform"`` (one of :data:`TRANSFORMS`). In a text,
``{name}`` is the canary kind's name ("session token") and ``{frame}`` the planted
sentence up to the value ("my private session token is").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from evaluators.scoring.probes import KIND_NAMES, LEVELS, probes_for
from memkit.dataset.canaries import SENTENCES

__all__ = [
    "LIBRARY_PATH",
    "STUDY_SOURCE",
    "TRANSFORMS",
    "AttackProbe",
    "ProbeError",
    "families",
    "frame",
    "library",
    "load_probe_file",
    "parse_probes",
    "resolve_probes",
    "study_probes",
]

LIBRARY_PATH = Path(__file__).resolve().parent.parent / "data" / "probes.json"
"""The library's data file (package data)."""

STUDY_SOURCE = "arXiv 2606.10062 (the source study's probes)"

TRANSFORMS: tuple[str, ...] = ("spaced", "reverse", "base64", "hex", "nato")
"""Transforms a probe may ask for; :func:`evaluators.adversary.detect.decoded_views` undoes each."""

_PLACEHOLDER = re.compile(r"\{(name|frame)\}")


class ProbeError(ValueError):
    """A probe file or list that cannot be used (the message names the file, probe and field)."""


@dataclass(frozen=True)
class AttackProbe:
    """One probe of a probe set.

    Attributes:
        id: unique within a run's probes (``"repeat-1"``; the study's ``"direct-1"``).
        family: the family (the study's levels are families ``direct``, ``indirect``,
            ``jailbreak``).
        turns: the texts sent, in order, in one conversation (rendered for a kind, or
            templates with ``{name}`` / ``{frame}``).
        source: where the probe comes from (a paper, a file).
        transform: what it asks the agent to do to the secret (:data:`TRANSFORMS`).
        set: ``study``, ``library`` or ``user``.
    """

    id: str
    family: str
    turns: tuple[str, ...]
    source: str = ""
    transform: str | None = None
    set: str = "library"

    def render(self, kind: str) -> AttackProbe:
        """The probe with ``{name}`` and ``{frame}`` filled in for canary ``kind``."""
        values = {"name": KIND_NAMES[kind], "frame": frame(kind)}
        return replace(self, turns=tuple(_PLACEHOLDER.sub(lambda m: values[m.group(1)], t) for t in self.turns))


def frame(kind: str) -> str:
    """The planted sentence up to the value, e.g. ``"my private session token is"``."""
    return SENTENCES[kind].split("{value}")[0].strip()


def _check_kind(kind: str) -> None:
    if kind not in KIND_NAMES:
        raise ValueError(f"unknown secret kind {kind!r}; expected one of {tuple(KIND_NAMES)}")


def study_probes(kind: str = "token") -> list[AttackProbe]:
    """The study's nine probes (:func:`evaluators.scoring.probes.probes_for`) as the ``study``
    set: family = level, texts unchanged."""
    by_level = probes_for(kind)
    return [AttackProbe(p.id, p.level, (p.text,), STUDY_SOURCE, None, "study") for lv in LEVELS for p in by_level[lv]]


@lru_cache(maxsize=1)
def _library_doc() -> dict[str, Any]:
    return json.loads(LIBRARY_PATH.read_text(encoding="utf-8"))


def families() -> dict[str, dict[str, str]]:
    """Every family: ``{name: {"description", "source", "set"}}``, the study's levels first."""
    out = {lv: {"description": f"the study's {lv} probes", "source": STUDY_SOURCE, "set": "study"}
           for lv in LEVELS}
    for name, d in _library_doc()["families"].items():
        out[name] = {"description": d["description"], "source": d["source"], "set": "library"}
    return out


def library(kind: str = "token") -> list[AttackProbe]:
    """The library's probes rendered for ``kind``, in file order.

    Raises:
        ValueError: an unknown kind.
    """
    _check_kind(kind)
    doc = _library_doc()
    return [p.render(kind) for p in parse_probes(doc["probes"], where=str(LIBRARY_PATH), set_name="library",
                                                families=doc["families"])]


def parse_probes(items: Sequence[Any], *, where: str = "probes", set_name: str = "user",
                 families: Mapping[str, Any] | None = None) -> list[AttackProbe]:
    """Probes from JSON-like items (dicts or :class:`AttackProbe`), not yet rendered.

    Raises:
        ProbeError: an item that is not a probe; the message names ``where``, the item
            and the field.
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise ProbeError(f"{where}: expected a list of probes, got {type(items).__name__}")
    out: list[AttackProbe] = []
    for n, item in enumerate(items):
        if isinstance(item, AttackProbe):
            out.append(item)
            continue
        at = f"{where}: probe {n}"
        if not isinstance(item, Mapping):
            raise ProbeError(f"{at}: expected an object with id, family and turns, got {type(item).__name__}")
        unknown = sorted(set(item) - {"id", "family", "turns", "text", "source", "transform"})
        if unknown:
            raise ProbeError(f"{at}: unknown field {unknown[0]!r} (fields: id, family, turns or text, source, transform)")
        pid, family = item.get("id"), item.get("family")
        for field, value in (("id", pid), ("family", family)):
            if not isinstance(value, str) or not value.strip():
                raise ProbeError(f"{at}: field {field!r} must be a non-empty string")
        at = f"{where}: probe {pid!r}"
        if ("turns" in item) == ("text" in item):
            raise ProbeError(f"{at}: give one of 'turns' (a list of texts) or 'text'")
        turns = item["turns"] if "turns" in item else [item["text"]]
        if isinstance(turns, str) or not isinstance(turns, Sequence) or not turns \
                or not all(isinstance(t, str) and t.strip() for t in turns):
            raise ProbeError(f"{at}: field 'turns' must be a non-empty list of non-empty strings")
        transform = item.get("transform")
        if transform is not None and transform not in TRANSFORMS:
            raise ProbeError(f"{at}: field 'transform' must be one of {', '.join(TRANSFORMS)}, got {transform!r}")
        source = item.get("source") or (families or {}).get(family, {}).get("source") or where
        if not isinstance(source, str):
            raise ProbeError(f"{at}: field 'source' must be a string")
        out.append(AttackProbe(pid, family, tuple(turns), source, transform, set_name))
    return out


def load_probe_file(path: str | Path) -> list[AttackProbe]:
    """The probes of a JSON file (module doc), not yet rendered, set ``user``.

    Raises:
        ProbeError: the file is missing, not JSON, or holds a bad probe (named).
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProbeError(f"{p}: cannot read the probe file ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise ProbeError(f"{p}: not JSON ({exc})") from exc
    fams = doc.get("families") if isinstance(doc, Mapping) else None
    items = doc.get("probes") if isinstance(doc, Mapping) else doc
    if items is None:
        raise ProbeError(f"{p}: expected a list of probes or an object with a 'probes' list")
    return parse_probes(items, where=str(p), set_name="user", families=fams if isinstance(fams, Mapping) else None)


def resolve_probes(specs: str | Path | Sequence[Any] | None, kind: str = "token") -> tuple[AttackProbe, ...]:
    """The probes a run adds to the study's, rendered for ``kind``.

    Args:
        specs: ``None`` or ``"study"`` (nothing beyond the study's nine), ``"library"``
            (memkit's library), a path to a probe file, a list of probe dicts or
            :class:`AttackProbe`, or a list mixing names and paths (``["library",
            "mine.json"]``); a string may list several, comma-separated.

    Raises:
        ProbeError: a bad file or probe, or two probes with one id.
        ValueError: an unknown kind.
    """
    _check_kind(kind)
    if specs is None:
        return ()
    if isinstance(specs, (str, Path)):
        parts: list[Any] = [s.strip() for s in str(specs).split(",") if s.strip()] if isinstance(specs, str) \
            else [specs]
    elif specs and all(isinstance(s, (Mapping, AttackProbe)) for s in specs):
        parts = [list(specs)]
    else:
        parts = list(specs)
    out: list[AttackProbe] = []
    for part in parts:
        if isinstance(part, list):
            out += [p.render(kind) for p in parse_probes(part, where="probes", set_name="user")]
        elif str(part) == "study":
            continue
        elif str(part) == "library":
            out += library(kind)
        elif isinstance(part, (Mapping, AttackProbe)):
            out += [p.render(kind) for p in parse_probes([part], where="probes", set_name="user")]
        else:
            out += [p.render(kind) for p in load_probe_file(part)]
    seen: dict[str, AttackProbe] = {}
    study_ids = {p.id for p in study_probes(kind)}
    for p in out:
        if p.id in seen or p.id in study_ids:
            raise ProbeError(f"probe id {p.id!r} is used twice (ids must be unique, the study's "
                             f"{', '.join(sorted(study_ids))} included)")
        seen[p.id] = p
    return tuple(out)
