"""Numbers and tables as the report, the comparison and the CLI print them: one
number format and one markdown/HTML table writer for every output."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["html_inline", "html_table", "md_table", "number_text", "signed_text", "value_text"]


def number_text(x: float) -> str:
    """``x`` to two decimals with the Unicode minus sign (−0.25); a value that rounds to
    zero prints as 0.00, never −0.00. The one number format of every output."""
    s = f"{x:.2f}"
    if float(s) == 0:
        return "0.00"
    return s.replace("-", "−")


def signed_text(x: float | None) -> str:
    """A difference with its sign (+0.50, −0.25; 0.00 when it rounds to zero; ``–``
    when it was not measured)."""
    if x is None:
        return "–"
    s = number_text(x)
    return s if s == "0.00" or s.startswith("−") else "+" + s


def value_text(x: Any, ci: Sequence[float | None] | None = None, *, na: str = "–",
               signed: bool = False) -> str:
    """A value with its confidence interval: ``0.42 [0.30, 0.55]``.

    Args:
        x: the value, or ``None`` (printed as ``na``: not measured, never 0).
        ci: ``[lo, hi]`` (either may be ``None``: no interval printed).
        na: the text for a missing value.
        signed: print ``x`` with its sign (:func:`signed_text`), for differences.
    """
    if x is None:
        return na
    s = signed_text(x) if signed else number_text(x)
    if ci is not None and len(ci) == 2 and ci[0] is not None and ci[1] is not None:
        s += f" [{number_text(ci[0])}, {number_text(ci[1])}]"
    return s


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured markdown table (cells are written as given)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def html_inline(text: str) -> str:
    """Escaped HTML of a line with the outputs' inline markdown (`code`, **bold**)."""
    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table with escaped cells."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
