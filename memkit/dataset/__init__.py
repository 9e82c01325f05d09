"""The study's data: LongMemEval instances (:mod:`memkit.dataset.longmemeval`), a
synthetic generator of the same shape (:mod:`memkit.dataset.synthetic`), and the
canaries planted in them (:mod:`memkit.dataset.canaries`)."""

from memkit.dataset.canaries import Canary, plant
from memkit.dataset.longmemeval import Instance, LongMemEvalError, Turn, load, sample

__all__ = ["Canary", "Instance", "LongMemEvalError", "Turn", "load", "plant", "sample"]
