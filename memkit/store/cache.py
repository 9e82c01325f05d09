"""SQLite cache of LLM generations (a residue surface, docs/design.md, "Forget").

:class:`LLMCache` is a LangChain :class:`~langchain_core.caches.BaseCache`: pass it as
``cache=`` to a chat model and a prompt already answered is never sent again
(``hits`` / ``misses`` count lookups). It persists to one SQLite file in rollback
journal mode (``journal_mode=DELETE``, no ``-wal`` file), so everything it holds
is in :attr:`LLMCache.path` -- the file ``memkit.residue.chroma.scan(cache_paths=[...])``
reads. :meth:`LLMCache.purge` deletes every entry whose prompt or response holds a
secret and VACUUMs the file so no freed page keeps its bytes (``full_purge`` and
``tombstone_redaction`` call it).

Concurrency: each operation opens its own connection with a busy timeout, so
threads and processes of a sweep can share one file; writes are serialised by
SQLite's file lock.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.messages import message_to_dict, messages_from_dict
from langchain_core.outputs import ChatGeneration, Generation

from memkit.scan.matching import contains_secret

__all__ = ["LLMCache", "contains_secret"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_cache (
    key TEXT PRIMARY KEY,
    prompt TEXT NOT NULL,
    llm_string TEXT NOT NULL,
    response TEXT NOT NULL
)
"""


def _dump_generations(generations: RETURN_VAL_TYPE) -> str:
    rows = []
    for gen in generations:
        if isinstance(gen, ChatGeneration):
            rows.append({"type": "chat", "message": message_to_dict(gen.message),
                         "info": gen.generation_info})
        else:
            rows.append({"type": "text", "text": gen.text, "info": gen.generation_info})
    return json.dumps(rows, ensure_ascii=False, default=str)


def _load_generations(payload: str) -> list[Generation]:
    out: list[Generation] = []
    for row in json.loads(payload):
        if row.get("type") == "chat":
            message = messages_from_dict([row["message"]])[0]
            out.append(ChatGeneration(message=message, generation_info=row.get("info")))
        else:
            out.append(Generation(text=row["text"], generation_info=row.get("info")))
    return out


class LLMCache(BaseCache):
    """SQLite cache of LLM generations keyed by ``(prompt, llm_string)``.

    Args:
        path: the SQLite file (created with its parent directory if missing).
        timeout: seconds a connection waits for another writer's lock.

    Attributes:
        path: the SQLite file; it holds prompts and responses in plain text.
        hits: lookups answered from the cache since this object was created.
        misses: lookups that found nothing (the model was then called).

    The key column is the SHA-256 of ``prompt + "\\0" + llm_string``; the prompt
    (LangChain's JSON serialisation of the messages), the llm_string and the
    response (JSON list of generations) are stored beside it.
    """

    def __init__(self, path: str | Path, *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.execute(_SCHEMA)

    def __repr__(self) -> str:
        return f"LLMCache({str(self.path)!r}, hits={self.hits}, misses={self.misses})"

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=DELETE")
            con.execute("PRAGMA secure_delete=ON")
            yield con
        finally:
            con.close()

    @staticmethod
    def _key(prompt: str, llm_string: str) -> str:
        return hashlib.sha256(f"{prompt}\0{llm_string}".encode()).hexdigest()

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """Cached generations for ``(prompt, llm_string)``, or ``None`` (counts a hit or a miss)."""
        with self._connect() as con:
            row = con.execute(
                "SELECT response FROM llm_cache WHERE key = ?", (self._key(prompt, llm_string),)
            ).fetchone()
        with self._lock:
            if row is None:
                self.misses += 1
            else:
                self.hits += 1
        return None if row is None else _load_generations(row[0])

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Store the generations for ``(prompt, llm_string)`` (replacing any earlier entry)."""
        with self._connect() as con:
            con.execute(
                "INSERT OR REPLACE INTO llm_cache (key, prompt, llm_string, response) "
                "VALUES (?, ?, ?, ?)",
                (self._key(prompt, llm_string), prompt, llm_string, _dump_generations(return_val)),
            )

    def clear(self, **kwargs: Any) -> None:
        """Delete every entry and VACUUM the file."""
        with self._connect() as con:
            con.execute("DELETE FROM llm_cache")
            con.execute("VACUUM")

    def __len__(self) -> int:
        with self._connect() as con:
            return int(con.execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0])

    def entries(self) -> list[tuple[str, str, str]]:
        """All ``(prompt, llm_string, response)`` rows, in key order."""
        with self._connect() as con:
            return [tuple(r) for r in con.execute(
                "SELECT prompt, llm_string, response FROM llm_cache ORDER BY key")]

    def purge_any(self, secrets: Sequence[str]) -> int:
        """:meth:`purge` for many secrets at once (a user's fingerprint): delete the
        entries holding a copy of any of them (one prefilter pass per value,
        :class:`memkit.scan.multi.MultiMatcher`), then VACUUM once.

        Returns:
            The number of entries deleted.

        Raises:
            ValueError: no secrets, or a secret without letters or digits.
        """
        from memkit.scan.multi import MultiMatcher

        mm = MultiMatcher(list(secrets))
        with self._connect() as con:
            doomed: Sequence[tuple[str]] = [
                (key,)
                for key, prompt, llm_string, response in con.execute(
                    "SELECT key, prompt, llm_string, response FROM llm_cache")
                if mm.contains([prompt, llm_string, response])
            ]
            con.execute("BEGIN IMMEDIATE")
            con.executemany("DELETE FROM llm_cache WHERE key = ?", doomed)
            con.execute("COMMIT")
            con.execute("VACUUM")
        return len(doomed)

    def purge(self, secret: str) -> int:
        """Delete the entries whose prompt, model string or response holds ``secret``,
        then VACUUM.

        A match is any spelling of the secret (:func:`memkit.scan.matching.contains_secret`:
        normal forms, case, separators, and the JSON escapes of LangChain's serialised
        prompts). VACUUM rewrites the file so the deleted rows' bytes
        do not survive in free pages.

        Args:
            secret: the string to forget (e.g. a canary ``XQ7-VIOLET-3829``).

        Returns:
            The number of entries deleted.

        Raises:
            ValueError: the secret has no letter or digit.
        """
        contains_secret("", secret)  # validates the secret
        with self._connect() as con:
            doomed: Sequence[tuple[str]] = [
                (key,)
                for key, prompt, llm_string, response in con.execute(
                    "SELECT key, prompt, llm_string, response FROM llm_cache")
                if contains_secret([prompt, llm_string, response], secret)
            ]
            con.execute("BEGIN IMMEDIATE")
            con.executemany("DELETE FROM llm_cache WHERE key = ?", doomed)
            con.execute("COMMIT")
            con.execute("VACUUM")
        return len(doomed)
