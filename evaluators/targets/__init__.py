"""Memory systems under evaluation: the target protocol (:mod:`evaluators.targets.base`),
the one adapter from a user's agent and memory objects (:mod:`evaluators.targets.agent`,
:mod:`evaluators.targets.stores`) and the built-in targets (``langgraph``, ``langmem``,
``mem0``, ``memkit``). Every target runs through :func:`evaluators.runner.run_unit`."""

from evaluators.targets.base import (
    BUILTIN,
    NotApplicable,
    Surface,
    SurfaceResult,
    Target,
    load_target,
)

__all__ = ["BUILTIN", "NotApplicable", "Surface", "SurfaceResult", "Target", "load_target"]
