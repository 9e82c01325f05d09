"""The instances a run draws: ``n`` synthetic ones, or a seeded stratified sample of a
LongMemEval file (one rule for the sweep, ``audit`` and every other entry point)."""

from __future__ import annotations

import warnings

from memkit.dataset.longmemeval import Instance, load, sample
from memkit.dataset.synthetic import synthetic

__all__ = ["draw_instances"]


def draw_instances(data: str, n: int | None, seed: int, *, sessions: int | tuple[int, int] = (2, 6),
                   turns: int | tuple[int, int] = (6, 10)) -> list[Instance]:
    """``n`` synthetic instances (``data="synthetic"``; ``sessions`` per instance and
    ``turns`` per session, each an int or a range), or a seeded stratified sample of
    ``n`` instances of the LongMemEval file ``data`` (``n=None``, or more than the file
    holds, takes every instance; the latter with a warning).

    Raises:
        memkit.dataset.longmemeval.LongMemEvalError: a malformed file (names file, record, field).
        ValueError: ``n=None`` with synthetic data.
    """
    if data == "synthetic":
        if n is None:
            raise ValueError("--n all needs --data FILE; synthetic data takes a number")
        return synthetic(n, seed, sessions_per_instance=sessions, turns_per_session=turns)
    instances = load(data)
    if n is not None and n > len(instances):
        warnings.warn(f"--n {n} exceeds the {len(instances)} instances in {data}: taking all {len(instances)}",
                      stacklevel=2)
    if n is None or n >= len(instances):
        return list(instances)
    return sample(instances, n, seed, stratify=True)
