"""Memory systems under audit: the target protocol (:mod:`evaluators.targets.base`),
the runner that audits a target (:mod:`evaluators.targets.run`) and the built-in
targets (``langgraph``, ``langmem``, ``mem0``, ``memkit``)."""

from evaluators.targets.base import (
    BUILTIN,
    NotApplicable,
    Surface,
    SurfaceScan,
    Target,
    load_target,
)

__all__ = ["BUILTIN", "NotApplicable", "Surface", "SurfaceScan", "Target", "load_target"]
