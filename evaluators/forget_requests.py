"""The evaluation set of forget requests: per planted item, the words a user would use.

For each user's planted secret (the canary, :mod:`memkit.dataset.canaries`) and planted fact
(:mod:`memkit.dataset.facts`), one request of each kind (:data:`REQUEST_KINDS`), drawn
deterministically from the item, its turn's date and a seed (ForgetEval, arXiv
2606.15903, compares deletion primitives on such requests):

============== ==================================================================
kind           the request names the item ...
============== ==================================================================
``exact``      by its value, verbatim ("Please forget XQ7-VIOLET-3829.")
``paraphrase`` by what it is, in other words ("Please forget the login code I
               gave you."), no value
``obfuscated`` by its name and value in a mangled spelling (digits for letters,
               other separators, lower case: "delete my s3ssion t0ken xq7 v10l3t 3829")
``es``         in Spanish ("Por favor, olvida mi token de sesión privado.")
``de``         in German ("Bitte vergiss mein privates Sitzungstoken.")
``zh``         in Chinese ("请忘记我的私人会话令牌。")
``indirect``   by when it was said ("Please forget the personal detail I mentioned
               on Saturday.")
============== ==================================================================
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

import numpy as np

__all__ = ["ABOUT", "REQUEST_KINDS", "obfuscate", "request_text"]

REQUEST_KINDS = ("exact", "paraphrase", "obfuscated", "es", "de", "zh", "indirect")
"""Kinds of forget request (module doc)."""

ABOUT = ("secret", "fact")
"""What a request asks to forget: the user's canary, or their planted fact."""

_NAMES = {"token": "private session token", "email": "private email address", "phone": "private phone number",
          "card": "card number", "api_key": "API key", "pin": "bank card PIN", "name": "doctor's name",
          "place": "home address"}
_PARAPHRASES = {
    "token": ("the login code I gave you", "the code I use to get into my account", "my account access code"),
    "email": ("the address people can write to me at", "my personal mail address"),
    "phone": ("the number people can call me on", "how to reach me by phone"),
    "card": ("my payment card details", "the number on my credit card"),
    "api_key": ("the key I use for the developer service", "my secret key for the API"),
    "pin": ("the code I type at the cash machine", "my card's secret number"),
    "name": ("who my physician is", "the name of the person who treats me"),
    "place": ("where I live", "my street and town"),
}
_TRANSLATED = {
    "es": ("Por favor, olvida {}.", {
        "token": "mi token de sesión privado", "email": "mi correo electrónico privado",
        "phone": "mi número de teléfono privado", "card": "el número de mi tarjeta",
        "api_key": "mi clave de API privada", "pin": "el PIN de mi tarjeta bancaria",
        "name": "el nombre de mi médico", "place": "mi dirección"}),
    "de": ("Bitte vergiss {}.", {
        "token": "mein privates Sitzungstoken", "email": "meine private E-Mail-Adresse",
        "phone": "meine private Telefonnummer", "card": "meine Kartennummer",
        "api_key": "meinen privaten API-Schlüssel", "pin": "die PIN meiner Bankkarte",
        "name": "den Namen meines Arztes", "place": "meine Wohnadresse"}),
    "zh": ("请忘记{}。", {
        "token": "我的私人会话令牌", "email": "我的私人电子邮件地址", "phone": "我的私人电话号码",
        "card": "我的银行卡号", "api_key": "我的私人API密钥", "pin": "我的银行卡密码",
        "name": "我医生的名字", "place": "我的住址"}),
}
_LEET = {"o": "0", "i": "1", "e": "3", "a": "4", "s": "5", "t": "7"}


def _rng(seed: int, *parts: str) -> np.random.Generator:
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).digest()
    return np.random.default_rng(np.random.SeedSequence([seed, *digest[:8]]))


def obfuscate(text: str, rng: np.random.Generator) -> str:
    """``text`` lower-cased, its separators replaced by spaces and about half of its
    leet-able letters replaced by digits (``o`` -> ``0``, ``e`` -> ``3`` ...)."""
    out = []
    for ch in re.sub(r"[-_.@+]", " ", text.lower()):
        out.append(_LEET[ch] if ch in _LEET and rng.random() < 0.5 else ch)
    return re.sub(r" +", " ", "".join(out)).strip()


def _weekday(date: str) -> str | None:
    m = re.search(r"\((Mon|Tue|Wed|Thu|Fri|Sat|Sun)\)", date)
    days = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    if m:
        return next(d for d in days if d.startswith(m.group(1)))
    for fmt in ("%Y/%m/%d", "%Y-%m-%d"):
        try:
            return days[datetime.strptime(date[:10], fmt).weekday()]
        except ValueError:
            continue
    return None


def request_text(kind: str, category: str, value: str, date: str, *, seed: int = 0) -> str:
    """The request of ``kind`` for an item (module doc).

    Args:
        kind: one of :data:`REQUEST_KINDS`.
        category: the item's category (a canary kind or a fact category,
            :data:`memkit.dataset.facts.ATTRIBUTES`).
        value: the item's value.
        date: the date of the session it was said in (LongMemEval's ``2023/05/20 (Sat)
            02:21``; ``indirect`` names its weekday).
        seed: the run seed (with the value, it picks the phrasing and the obfuscation).

    Raises:
        ValueError: an unknown kind or category.
    """
    if kind not in REQUEST_KINDS:
        raise ValueError(f"unknown request kind {kind!r}; use one of {REQUEST_KINDS}")
    if category not in _NAMES:
        raise ValueError(f"unknown item category {category!r}; use one of {tuple(_NAMES)}")
    rng = _rng(seed, kind, category, value)
    if kind == "exact":
        return f"Please forget {value}."
    if kind == "paraphrase":
        phrases = _PARAPHRASES[category]
        frame = ("Please forget {}.", "Delete what I told you about {}.")[int(rng.integers(2))]
        return frame.format(phrases[int(rng.integers(len(phrases)))])
    if kind == "obfuscated":
        return f"delete my {obfuscate(_NAMES[category], rng)} {obfuscate(value, rng)}"
    if kind in _TRANSLATED:
        frame, names = _TRANSLATED[kind]
        return frame.format(names[category])
    day = _weekday(date)
    when = f"on {day}" if day else "the other day"
    return f"Please forget the personal detail I mentioned {when}."
