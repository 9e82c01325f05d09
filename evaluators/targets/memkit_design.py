"""Built-in target ``memkit``: a memory design (:class:`graphs.designs.MemoryDesign`)
as the sweep runs it.

The design's compiled write graph stores each session at summary level ``S``
(:func:`graphs.memory.write_sessions`, namespace = the user) in a persistent
:class:`memkit.store.TieredMemoryStore` (Chroma in ``<workdir>/chroma``); its read
graph answers a question from the tiers the design reads at ``S``, top ``k``.
``forget_secret`` runs a deletion mode of :mod:`graphs.forget` (``mode``, default
``full_purge``) in the user's namespace; ``forget_user`` deletes every chunk of the
user's namespace (``TieredMemoryStore.delete``). Deletion step beyond them:
``compact`` (:meth:`memkit.store.TieredMemoryStore.compact`: the Chroma directory
rewritten so that deleted text is gone from its files). The design keeps no
conversations (n/a).

Surfaces: every surface :func:`memkit.residue.scan` reads in a Chroma store
(``text_raw``, ``text_summary``, ``text_other``, ``metadata``, ``stale_embedding``,
``disk_sqlite``, ``disk_wal``, ``disk_log``, ``disk_fulltext``, ``disk_hnsw``,
``disk_other``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluators.targets.base import Surface, Target
from evaluators.targets.residue_surfaces import residue_surfaces

__all__ = ["MemkitDesignTarget", "build"]

SURFACES = ("text_raw", "text_summary", "text_other", "metadata", "stale_embedding", "disk_sqlite", "disk_wal",
            "disk_log", "disk_fulltext", "disk_hnsw", "disk_other")


class MemkitDesignTarget(Target):
    """A memkit memory design over a persistent tiered store (module doc).

    Args:
        design: a design or its name (:func:`graphs.designs.resolve_design`).
        workdir: where the Chroma directory lives. S: summary level 0, 1 or 2.
        mode: the deletion mode of ``forget_secret``. model: chat model spec.
        k: chunks per question. cleanup: remove ``workdir`` on :meth:`close`.
    """

    def __init__(self, design: Any = "study", workdir: Path | None = None, *, S: int = 1, mode: str = "full_purge",
                 model: Any = "extractive", k: int = 3, cleanup: bool = False) -> None:
        from graphs.designs import resolve_design
        from graphs.forget import DELETION_MODES
        from memkit.store import TieredMemoryStore

        if mode not in DELETION_MODES:
            raise ValueError(f"unknown deletion mode {mode!r}; use one of {DELETION_MODES}")
        self.design = resolve_design(design)
        self.name = f"memkit[{self.design.name}, S={S}, {mode}]"
        self.S, self.mode, self.k, self.model = S, mode, k, model
        self.workdir, self._cleanup = workdir or Path(tempfile.mkdtemp(prefix="memkit-design-")), cleanup or workdir is None
        self.store = TieredMemoryStore(self.workdir / "chroma", create=True)
        self.summarizer = self.design.summarizer(model)
        self.write = self.design.write_graph(self.store, summarizer=self.summarizer)
        self.read = self.design.read_graph(self.store, model)

    def feed(self, turns: list[dict[str, Any]], session_id: str, date: str, user_id: str) -> None:
        """The design's write graph on one session, namespace ``user_id``, level ``S``."""
        from graphs.memory import write_sessions

        write_sessions(self.write, user_id, [(session_id, date, turns)], self.S)

    def ask(self, text: str, user_id: str, thread_id: str) -> str:
        """The design's read graph: top ``k`` of the tiers read at ``S``."""
        out = self.read.invoke({"query": text, "namespace": user_id, "k": self.k,
                                "tiers": list(self.design.tiers_for(self.S))})
        return str(out["response"])

    def forget_secret(self, secret: str, user_id: str) -> Any:
        """:func:`graphs.forget.forget` with ``mode`` in the user's namespace."""
        from graphs.forget import forget

        return forget(self.store, secret, self.mode, namespace=user_id, S=self.S, summarizer=self.summarizer)

    def forget_user(self, user_id: str) -> list[str]:
        """Delete every chunk of the user's namespace."""
        return self.store.delete([c.id for c in self.store.chunks(namespace=user_id)])

    def surfaces(self) -> list[Surface]:
        """The residue surfaces of the store (module doc)."""
        return residue_surfaces(lambda: self.store, SURFACES, check_embeddings=True)

    def deletion_steps(self) -> dict[str, Callable[[], Any]]:
        """``compact``: rewrite the Chroma directory."""
        return {"compact": self.store.compact}

    def close(self) -> None:
        """Close the store; remove a temporary working directory."""
        if self.store is not None:
            self.store.close()
            self.store = None  # type: ignore[assignment]
        if self._cleanup:
            self._cleanup = False
            shutil.rmtree(self.workdir, ignore_errors=True)


def build(design: Any = "study", *, workdir: str | Path | None = None, S: int = 1, mode: str = "full_purge",
          model: Any = "extractive", k: int = 3) -> MemkitDesignTarget:
    """The ``memkit`` target (module doc); ``mode`` is the deletion mode.

    Raises:
        ValueError: unknown design or deletion mode; a non-empty ``workdir``.
    """
    root = None
    if workdir is not None:
        root = Path(workdir)
        if root.exists() and any(root.iterdir()):
            raise ValueError(f"memkit workdir {root} is not empty; give a new directory")
        root.mkdir(parents=True, exist_ok=True)
    if mode == "none":
        mode = "full_purge"  # `memkit audit --mode none` skips the forget; the target still needs a mode
    return MemkitDesignTarget(design, root, S=S, mode=mode, model=model, k=k)
