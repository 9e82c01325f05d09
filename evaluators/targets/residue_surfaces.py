"""Surfaces from :func:`memkit.residue.scan`: a Chroma store (memkit's own or another
memory layer's persist directory) and its side files, one :class:`Surface` per
residue surface that applies.

One residue scan per secret serves every surface of a phase (the scans are cached
until the next phase asks again with a new secrets list).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from evaluators.targets.base import FunctionSurface, Surface, SurfaceScan

__all__ = ["residue_surfaces"]


def residue_surfaces(target: Callable[[], Any], names: Sequence[str], *, also: Callable[[], Sequence[Any]] = tuple,
                     checkpointer: Any = None, check_embeddings: bool = False) -> list[Surface]:
    """Surfaces ``names`` (of :data:`memkit.residue.SURFACES`) of a residue scan.

    Args:
        target: returns what :func:`memkit.residue.scan` scans (a ``TieredMemoryStore``
            or a Chroma directory), called at scan time.
        names: the residue surfaces to report.
        also: returns the side files to scan with it.
        checkpointer: a LangGraph checkpointer for the ``checkpoint`` surface.
        check_embeddings: run the ``stale_embedding`` check (re-embeds every document).
    """
    from memkit.residue import scan

    cache: dict[str, Any] = {}

    def reports(secrets: Sequence[str], first: bool) -> dict[str, Any]:
        if first or set(cache) != set(secrets):
            cache.clear()
            for s in secrets:
                cache[s] = scan(target(), s, also=list(also()), checkpointer=checkpointer,
                                check_embeddings=check_embeddings)
        return cache

    def surface(name: str, first: bool) -> Callable[[Sequence[str]], SurfaceScan]:
        def run(secrets: Sequence[str]) -> SurfaceScan:
            got = reports(secrets, first)
            out = SurfaceScan(name)
            reasons = [r for rep in got.values() for r in rep.unchecked.get(name, [])]
            if reasons:
                return SurfaceScan(name, "not_checked", reason="; ".join(dict.fromkeys(reasons)))
            for s, rep in got.items():
                for hit in rep.surfaces.get(name, []):
                    out.add(s, hit.location)
            return out

        return run

    return [FunctionSurface(n, surface(n, i == 0), f"memkit.residue surface {n}") for i, n in enumerate(names)]
