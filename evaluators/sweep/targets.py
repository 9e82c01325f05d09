"""A sweep unit over a target (``memkit sweep --target``): the target built for the
unit, one instance through the one runner.

The knobs a target has set the grid: ``S`` when its factory takes one (the ``memkit``
target), the k grid when it honours a query's k (:attr:`Target.takes_k`), per-tier
FRS when recall can be restricted (:attr:`Target.tiers`). A knob it lacks is one point
(``S`` and ``k`` are ``None`` in the records) and the report says so. Deletion: each
of the config's deletion modes on a copy when the target can copy its memory
(:meth:`Target.fork`), else the target's own forget in place.
"""

from __future__ import annotations

import inspect
from typing import Any

from evaluators.runner import Deletion, UnitPlan, run_unit
from evaluators.sweep.config import SweepConfig
from memkit.dataset.longmemeval import Instance

__all__ = ["target_levels", "target_unit"]


def _factory_params(spec: str) -> set[str] | None:
    """The keyword parameters the target factory takes (``None``: any)."""
    from evaluators.targets.base import BUILTIN
    from memkit.runtime import import_spec

    factory = import_spec(BUILTIN.get(spec, spec), "--target")
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return set(params)


def target_levels(config: SweepConfig) -> list[int | None]:
    """The summary levels a target sweep runs: the config's when the factory takes
    ``S``, else ``[None]``.

    Raises:
        ValueError: the target cannot be imported (:class:`memkit.runtime.SpecError`).
    """
    assert config.target is not None
    params = _factory_params(config.target)
    return list(config.summary_levels) if params is None or "S" in params else [None]


def target_unit(config: SweepConfig, instance: Instance, S: int | None, unit: str) -> tuple[list[dict[str, Any]],
                                                                                            dict[str, Any]]:
    """Run one unit of a target sweep (module doc); returns ``(records, counts)`` as
    :func:`evaluators.sweep.unit.run_sweep_unit` does."""
    from evaluators.targets.agent import as_target
    from evaluators.targets.base import load_target

    assert config.target is not None
    options: dict[str, Any] = {**config.target_options, "model": config.model}
    if config.forget_resolver is not None:
        options["resolver"] = config.forget_resolver
    if S is not None:
        options["S"] = S
    target = as_target(load_target(config.target, **options))
    try:
        deletions = config.deletions(fork=target.supports("fork"), label=target.forget_label)
        if not target.supports("fork"):
            # requests need a copy of the memory each: n/a here, with the reason
            deletions += tuple(Deletion(target.forget_label, on_copy=True, request=kind, about=about)
                               for about in config.forget_about for kind in config.forget_requests)
        plan = UnitPlan(unit=unit, seed=config.seed, S=S,
                        ks=tuple(config.ks) if target.takes_k else (None,),
                        deletions=deletions, overall_probes=not target.tiers, adversary=config.adversary(),
                        weigh_vectors=config.weigh_vectors)
        run = run_unit(target, [instance], plan)
        counts = {**target.usage(), "tokens": {p: by_model for p, by_model in run.tokens.items() if by_model}}
    finally:
        target.close()
    return run.records, counts
