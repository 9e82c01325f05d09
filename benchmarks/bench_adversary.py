"""Benchmark: what the adversary costs per unit against the study's nine probes, in one run.

Each configuration runs the same units (one LongMemEval instance of the committed
sample each, the extractive backend, a fresh target per unit, feed, main phase, one
forget and the after-forget phase) through the one runner
(:func:`evaluators.runner.run_unit`):

* ``study``: the study's probes only (the baseline);
* ``policy Q=10`` / ``policy Q=30``: plus the adaptive attacker's seeded policy;
* ``planner Q=10`` / ``planner Q=30``: plus the adaptive attacker planned by a chat
  model (memkit's ``extractive`` backend, counted);
* ``library``: plus the 41 library probes; ``membership``: plus membership inference.

For each: agent calls per unit (queries the target answered, counted on the target),
planner calls per unit, seconds per unit inside the study's asks and inside the
adversary (measured in the same unit, so their ratio is the attacker's cost against
the study set's whatever the machine's load) and the whole unit's seconds. The
embedder's memo is cleared before each unit and the memory's sentences embedded first,
so every query text (the study's and the adversary's) is embedded afresh and no ask
pays for the memory; configurations alternate per unit, so drift on a shared machine
hits all alike.

Run: ``python benchmarks/bench_adversary.py [--n 4] [--target langgraph|memkit]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from evaluators.adversary import adversary_plan
from evaluators.runner import Deletion, UnitPlan, run_unit
from evaluators.targets.base import load_target
from memkit.dataset.longmemeval import load
from memkit.models.chat import embeddings
from memkit.models.extractive import ExtractiveChatModel, split_sentences

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "longmemeval_oracle_sample.json"


class _CountingPlanner(ExtractiveChatModel):
    """The extractive backend as the attacker's planner, counting its calls."""

    calls: int = 0

    def _generate(self, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        return super()._generate(*args, **kw)


def _configs(planner: _CountingPlanner) -> dict[str, Any]:
    return {
        "study": None,
        "policy Q=10": adversary_plan(budget=10),
        "policy Q=30": adversary_plan(budget=30),
        "planner Q=10": adversary_plan(budget=10, attacker_model=planner),
        "planner Q=30": adversary_plan(budget=30, attacker_model=planner),
        "library": adversary_plan("library"),
        "membership": adversary_plan(membership=True),
    }


class _Clock:
    """Seconds spent inside the study's asks and inside the adversary, by wrapping the
    runner's :meth:`_Unit.ask` and :meth:`Adversary.run`."""

    def __init__(self) -> None:
        self.study = self.adversary = 0.0

    def wrap(self, owner: Any, name: str, field: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kw)
            finally:
                setattr(self, field, getattr(self, field) + time.perf_counter() - t0)

        setattr(owner, name, timed)


def _unit(target_name: str, inst: Any, adversary: Any, clock: _Clock) -> tuple[int, float]:
    """One unit: (agent calls, wall seconds)."""
    target = load_target(target_name, **({"backend": "memory"} if target_name == "langgraph" else {"S": 0}))
    calls = 0
    inner = target.ask_many

    def counting(queries: Any) -> Any:
        nonlocal calls
        calls += len(queries)
        return inner(queries)

    target.ask_many = counting  # type: ignore[method-assign]
    # Every configuration embeds its query texts afresh (no memo from the one before);
    # the memory's sentences are embedded first, so no ask pays for them.
    embeddings()._memo.clear()
    embeddings().encode([s for _, _, turns in inst.sessions() for t in turns for s in split_sentences(t.content)])
    try:
        t0 = time.perf_counter()
        run_unit(target, [inst], UnitPlan(unit=inst.question_id, deletions=(Deletion(target.forget_label),),
                                          adversary=adversary))
        return calls, time.perf_counter() - t0
    finally:
        target.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4, help="units (instances of the sample)")
    ap.add_argument("--target", default="langgraph", choices=("langgraph", "memkit"))
    args = ap.parse_args()
    import evaluators.adversary.run as adversary_run
    import evaluators.runner as runner

    clock = _Clock()
    clock.wrap(runner._Unit, "ask", "study")
    clock.wrap(adversary_run.Adversary, "run", "adversary")
    instances = load(str(SAMPLE))[: args.n]
    planner = _CountingPlanner()
    configs = _configs(planner)
    _unit(args.target, instances[0], configs["library"], clock)  # warm-up: the embedder, the matcher tables
    totals = {name: [0, 0.0, 0, 0.0, 0.0] for name in configs}
    for j, inst in enumerate(instances):
        names = list(configs) if j % 2 == 0 else list(reversed(configs))
        for name in names:
            before, study0, adv0 = planner.calls, clock.study, clock.adversary
            calls, secs = _unit(args.target, inst, configs[name], clock)
            t = totals[name]
            t[0] += calls
            t[1] += secs
            t[2] += planner.calls - before
            t[3] += clock.study - study0
            t[4] += clock.adversary - adv0
    n = len(instances)
    study = totals["study"]
    print(f"adversary cost per unit ({args.target} target, extractive backend, {n} units of the LongMemEval "
          "sample, main phase + one forget; seconds: mean per unit)")
    print(f"{'configuration':<14} {'agent calls':>11} {'planner calls':>13} {'study asks s':>12} "
          f"{'adversary s':>11} {'unit s':>7} {'calls x study':>13} {'adversary s / study s':>21}")
    for name, (calls, secs, plans, st, adv) in totals.items():
        print(f"{name:<14} {calls / n:>11.1f} {plans / n:>13.1f} {st / n:>12.2f} {adv / n:>11.2f} {secs / n:>7.2f} "
              f"{calls / study[0]:>13.2f} {adv / max(st, 1e-9):>21.2f}")


if __name__ == "__main__":
    main()
