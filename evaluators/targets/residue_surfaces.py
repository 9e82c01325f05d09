"""Surfaces from :func:`memkit.residue.chroma.scan`: a Chroma store (memkit's own or another
memory layer's persist directory) and its side files, one :class:`Surface` per
residue surface that applies.

One residue scan per secret serves every surface of a phase (the scans are cached
until the next phase asks again with a new secrets list).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from evaluators.targets.base import FunctionSurface, Surface
from memkit.residue.report import SurfaceResult

__all__ = ["residue_surfaces"]


def residue_surfaces(target: Callable[[], Any], names: Sequence[str], *, also: Callable[[], Sequence[Any]] = tuple,
                     cache_paths: Callable[[], Sequence[Any]] = tuple, checkpointer: Any = None,
                     check_embeddings: bool = False) -> list[Surface]:
    """Surfaces ``names`` (of :data:`memkit.residue.chroma.SURFACES`) of a residue scan.

    One secret is scanned as :func:`memkit.residue.chroma.scan` scans it; several in one
    multi-secret pass (``secrets=``), each hit going to the secret it copies (a stale
    vector, which copies no one secret, is ``unattributed``; so is every
    ``stale_vector`` hit, whose meaning :mod:`memkit.residue.weigh` weighs). A surface the scan could
    not read is ``not_checked``; one it read in part keeps its hits and says so in
    ``partial`` (never clean).

    Args:
        target: returns what :func:`memkit.residue.chroma.scan` scans (a ``TieredMemoryStore``
            or a Chroma directory), called at scan time.
        names: the residue surfaces to report.
        also: returns the side files to scan with it.
        cache_paths: returns the LLM-cache files to scan with it (``cache`` surfaces).
        checkpointer: a LangGraph checkpointer for the ``checkpoint`` surface.
        check_embeddings: run the ``stale_embedding`` check (re-embeds every document).
    """
    from memkit.residue.chroma import scan

    cache: dict[tuple[str, ...], Any] = {}

    def report(secrets: Sequence[str], first: bool) -> Any:
        key = tuple(secrets)
        if first or key not in cache:
            cache.clear()
            kw = {"also": list(also()), "cache_paths": list(cache_paths()), "checkpointer": checkpointer,
                  "check_embeddings": check_embeddings}
            cache[key] = (scan(target(), key[0], **kw) if len(key) == 1 else scan(target(), secrets=list(key), **kw))
        return cache[key]

    def surface(name: str, first: bool) -> Callable[[Sequence[str]], SurfaceResult]:
        def run(secrets: Sequence[str]) -> SurfaceResult:
            rep = report(secrets, first)
            reasons = "; ".join(dict.fromkeys(rep.unchecked.get(name, []))) or None
            hits = rep.surfaces.get(name, [])
            if reasons and not hits:
                return SurfaceResult(name, "not_checked", reason=reasons)
            out = SurfaceResult(name, partial=reasons)
            for hit in hits:
                if name == "stale_vector":  # a vector no record owns: weighed, never one secret's copy
                    out.unattributed.append(hit.location)
                elif len(secrets) == 1:
                    out.add(secrets[0], hit.location)
                elif hit.secret_index is None:
                    out.unattributed.append(hit.location)
                else:
                    out.add(secrets[hit.secret_index], hit.location)
            return out

        return run

    return [FunctionSurface(n, surface(n, i == 0), f"memkit.residue.chroma surface {n}") for i, n in enumerate(names)]
