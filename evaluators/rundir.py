"""Which directories a memkit command may write into: the one rule for ``--out``.

A command that writes a directory of outputs (``memkit sweep``, ``memkit compare``,
``memkit audit --matrix --out``) writes into ``--out`` only when it is

- missing (it is created), or
- empty, or
- one of that command's own earlier outputs: a directory holding the marker file
  :data:`MARKER` (``.memkit-run``, JSON ``{"kind": ...}``) that memkit writes into
  every output directory it creates, before any other file.

A directory without the marker is never taken for an earlier run by the names of
the files it holds (a user's own ``matrix.json``, ``config.json`` or ``report.md``):
holding anything, it is refused before a byte is written, with what was found and
how to go on (:class:`NotARunDirectoryError`), so a mistaken ``--out`` never replaces
a file memkit did not write. ``memkit report`` and ``memkit judge`` rewrite files only
inside a marked sweep run (:func:`require_run`). A run made by a memkit older than the
marker is named as such in the refusal, with the one line that marks it. The rule is
stated for users in README.md ("Where outputs go").
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

MARKER = ".memkit-run"
"""Name of the marker file memkit writes into every output directory it creates."""

KINDS = {
    "sweep": "a memkit sweep run",
    "designs": "a memkit sweep of several designs",
    "compare": "a memkit compare output",
    "audit": "a memkit audit --matrix output",
}


class NotARunDirectoryError(ValueError):
    """``--out`` is a non-empty directory that is not one of the command's own outputs."""


def run_kind(path: str | Path) -> str | None:
    """The kind of memkit output directory ``path`` is (a key of :data:`KINDS`), read
    from its marker :data:`MARKER`; ``None`` without one (a damaged marker, or one
    naming no known kind, counts as none)."""
    try:
        kind = json.loads((Path(path) / MARKER).read_text()).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if kind in KINDS else None


def _unmarked_kind(p: Path) -> str | None:
    """The kind an unmarked directory's file names suggest (a run of a memkit older
    than the marker, or a user's files that share the names); only for messages,
    never a licence to write."""
    if _json_has(p / "config.json", ("summary_levels", "ks")) or (
            _json_has(p / "config.json", ()) and ((p / "results.jsonl").is_file()
                                                  or _json_has(p / "metrics.json", ("by_S",)))):
        return "sweep"
    if _json_has(p / "compare.json", ("runs",)):
        return "compare"
    if (p / "matrix.json").is_file():
        return "audit"
    return None


def _unmarked_hint(p: Path) -> str:
    """What to tell the user about an unmarked directory whose files look like a run."""
    kind = _unmarked_kind(p) if p.is_dir() else None
    if kind is None:
        return ""
    return (f"; its files look like {KINDS[kind]} but it has no {MARKER} marker, so memkit "
            f"did not mark it as its own (if a memkit older than the marker wrote it, mark it: "
            f"echo '{{\"kind\": \"{kind}\"}}' > {p / MARKER})")


def _json_has(path: Path, keys: Iterable[str]) -> bool:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and all(k in data for k in keys)


def check_out_dir(out: str | Path, kinds: str | Iterable[str], *, option: str = "--out") -> None:
    """Refuse ``out`` unless the command may write there (module docstring). Changes nothing.

    Args:
        out: the output directory the command was given.
        kinds: the :data:`KINDS` this command writes (a run of one of them is reused).
        option: the option name used in the message.

    Raises:
        NotADirectoryError: ``out`` is a file.
        NotARunDirectoryError: ``out`` is non-empty and not a run of ``kinds``; the
            message names what was found and how to go on.
    """
    p = Path(out)
    kinds = {kinds} if isinstance(kinds, str) else set(kinds)
    if not p.exists():
        return
    if not p.is_dir():
        raise NotADirectoryError(f"{option} {p} is a file; give a directory")
    entries = sorted(e.name for e in p.iterdir() if e.name != MARKER)
    if not entries:
        return
    kind = run_kind(p)
    if kind in kinds:
        return
    found = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    what = KINDS[kind] if kind else "not a memkit output directory"
    want = " or ".join(KINDS[k] for k in sorted(kinds))
    raise NotARunDirectoryError(
        f"{option} {p} is not empty and is {what} (found {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}: {found}); "
        f"memkit writes only into a new or empty directory or {want} (marked by {MARKER}), "
        f"so nothing was written: choose a new {option}, e.g. {option} {_free_name(p)}"
        + ("" if kind else _unmarked_hint(p))
    )


def _free_name(p: Path) -> Path:
    for i in range(1, 1000):
        cand = p.with_name(f"{p.name}-{i}")
        if not cand.exists():
            return cand
    return p.with_name(p.name + "-new")


def claim_out_dir(out: str | Path, kind: str, *, option: str = "--out") -> Path:
    """Check ``out`` (:func:`check_out_dir` for ``kind``), create it and write its marker
    (before the caller writes any other file into it).

    Returns:
        ``out`` as a :class:`~pathlib.Path`.

    Raises:
        NotADirectoryError, NotARunDirectoryError: see :func:`check_out_dir`.
        OSError: the directory cannot be created or written.
    """
    check_out_dir(out, kind, option=option)
    p = Path(out)
    p.mkdir(parents=True, exist_ok=True)
    if run_kind(p) != kind:  # new or empty (a lone marker of another kind, or a damaged one)
        (p / MARKER).write_text(json.dumps({"kind": kind}) + "\n")
    return p


def require_run(path: str | Path, kind: str = "sweep") -> Path:
    """``path`` as a recognised run of ``kind`` (for commands that rewrite files inside a run).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        NotARunDirectoryError: it exists but is not a run of ``kind``.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist: give a directory written by `memkit sweep --out`")
    if run_kind(p) != kind:
        entries = sorted(e.name for e in p.iterdir()) if p.is_dir() else []
        found = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise NotARunDirectoryError(
            f"{p} is not {KINDS[kind]} (no {MARKER} marker of a sweep; found "
            f"{found or 'nothing'}), so nothing was written: give the --out of a `memkit sweep`"
            + (_unmarked_hint(p) if run_kind(p) is None else "")
        )
    return p


def run_settings(path: str | Path) -> dict:
    """Settings recorded in a run's marker (:data:`MARKER`) that later commands on the
    run keep, e.g. ``{"kind": "sweep", "redact_hypotheses": true}``; ``{}`` without one."""
    try:
        data = json.loads((Path(path) / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record_setting(path: str | Path, key: str, value: object, *, kind: str = "sweep") -> None:
    """Record ``key: value`` in the run's marker so later sweeps, ``--resume`` and
    ``memkit report`` on the run keep it (e.g. ``redact_hypotheses``).

    Raises:
        OSError: the marker cannot be written.
    """
    data = run_settings(path) or {"kind": run_kind(path) or kind}
    data[key] = value
    (Path(path) / MARKER).write_text(json.dumps(data, sort_keys=True) + "\n")
