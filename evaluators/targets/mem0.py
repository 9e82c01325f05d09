"""Built-in target ``mem0``: the mem0 memory layer (``examples/05_audit_mem0.py`` as a
target; the ``mem0`` extra).

mem0 runs fully offline: ``infer=False`` (each message stored as it is, no LLM
extraction), Chroma on a local path (``<workdir>/chroma``), the bundled
all-MiniLM-L6-v2 through mem0's ``huggingface`` embedder, a history database
(``<workdir>/history.db``: mem0 logs every ADD, UPDATE and DELETE with the old and
new text). The agent answers from the user's top-``k`` mem0 search results.

Forget through mem0's own API: ``forget_secret`` lists the user's memories
(``get_all``) and deletes each holding the secret (``delete(memory_id)``);
``forget_user`` is ``delete_all(user_id=...)``. mem0 keeps no conversations and has
no deletion step beyond its API (both n/a).

Surfaces: :func:`memkit.residue.chroma.scan` of the Chroma directory with the history
database as a side file: ``text_other`` (documents), ``metadata``, ``side_sqlite``
and ``side_disk`` (history rows and bytes), ``disk_sqlite``, ``disk_wal``,
``disk_log``, ``disk_fulltext``, ``disk_hnsw``, ``disk_other`` (Chroma's files), and
``stale_embedding`` (not checked: re-embedding every document per phase is left
out; ``memkit residue`` runs it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

# mem0 sends usage data to PostHog unless told not to when it is imported.
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from evaluators.targets.base import Surface, Target  # noqa: E402
from evaluators.targets.residue_surfaces import residue_surfaces  # noqa: E402
from memkit.scan.matching import matcher  # noqa: E402

__all__ = ["Mem0Target", "build"]

SURFACES = ("text_other", "metadata", "stale_embedding", "side_sqlite", "side_disk", "disk_sqlite", "disk_wal",
            "disk_log", "disk_fulltext", "disk_hnsw", "disk_other")


class Mem0Target(Target):
    """mem0 over Chroma in ``workdir`` (module doc).

    Args:
        workdir: where mem0 keeps its files (``chroma/``, ``history.db``).
        model: chat model spec or instance for the answers. k: memories per question.
        cleanup: remove ``workdir`` on :meth:`close`.
    """

    def __init__(self, workdir: Path, model: Any = "extractive", k: int = 3, cleanup: bool = False) -> None:
        os.environ.setdefault("MEM0_DIR", str(workdir / "mem0"))
        from mem0 import Memory

        from memkit.models.chat import chat_model, minilm_path

        self.name, self.workdir, self.k, self._cleanup = "mem0", workdir, k, cleanup
        self.llm = chat_model(model) if isinstance(model, str) else model
        self.memory = Memory.from_config({
            "vector_store": {"provider": "chroma",
                             "config": {"collection_name": "memories", "path": str(workdir / "chroma")}},
            "embedder": {"provider": "huggingface", "config": {"model": str(minilm_path()), "embedding_dims": 384}},
            "llm": {"provider": "langchain", "config": {"model": self.llm}},
            "history_db_path": str(workdir / "history.db"),
        })

    def feed(self, turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
        """``Memory.add`` of the session's messages, ``infer=False``."""
        messages = [{"role": t["role"], "content": t["content"]} for t in turns if t.get("content")]
        self.memory.add(messages, user_id=user_id, infer=False, metadata={"session_id": session_id, "date": date})

    def ask(self, text: str, user_id: str, thread_id: str) -> str:
        """Answer from the user's top-``k`` mem0 search results (no conversation kept)."""
        from graphs.prompts import respond_prompt

        found = self.memory.search(text, filters={"user_id": user_id}, top_k=self.k)
        return str(self.llm.invoke(respond_prompt(text, [m["memory"] for m in found.get("results", [])])).content)

    def _all(self, user_id: str) -> list[dict[str, Any]]:
        return list(self.memory.get_all(filters={"user_id": user_id}, top_k=100_000).get("results", []))

    def forget_secret(self, secret: str, user_id: str) -> int:
        """``delete(memory_id)`` of every memory of the user holding ``secret``."""
        m = matcher(secret)
        doomed = [x["id"] for x in self._all(user_id) if m.contains(x.get("memory"))]
        for mid in doomed:
            self.memory.delete(mid)
        return len(doomed)

    def forget_user(self, user_id: str) -> Any:
        """mem0's ``delete_all(user_id=...)``."""
        return self.memory.delete_all(user_id=user_id)

    def surfaces(self) -> list[Surface]:
        """The residue surfaces of mem0's Chroma directory and history database."""
        return residue_surfaces(lambda: self.workdir / "chroma", SURFACES,
                                also=lambda: [self.workdir / "history.db"])

    def close(self) -> None:
        """Remove the temporary working directory (when the target made it)."""
        if self._cleanup:
            self._cleanup = False
            shutil.rmtree(self.workdir, ignore_errors=True)


def build(workdir: str | Path | None = None, *, model: Any = "extractive", k: int = 3) -> Mem0Target:
    """The ``mem0`` target (module doc).

    Args:
        workdir: an empty or new directory for mem0's files (default: a temporary one,
            removed by ``close``: the files hold the planted canaries).
        model: chat model spec or instance. k: memories per question.

    Raises:
        ImportError: mem0 is not installed (the ``mem0`` extra).
        ValueError: ``workdir`` exists and is not empty.
    """
    try:
        import mem0  # noqa: F401
    except ModuleNotFoundError as exc:
        raise ImportError("target 'mem0' needs mem0ai (pip install -e '.[mem0]')") from exc
    if workdir is None:
        return Mem0Target(Path(tempfile.mkdtemp(prefix="memkit-mem0-")), model, k, cleanup=True)
    root = Path(workdir)
    if root.exists() and any(root.iterdir()):
        raise ValueError(f"mem0 workdir {root} is not empty; give a new directory")
    root.mkdir(parents=True, exist_ok=True)
    return Mem0Target(root, model, k)
