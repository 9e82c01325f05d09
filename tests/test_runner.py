"""One runner: the sweep, ``audit`` (callables and targets), the matrix and the
isolation probe all run their units through :func:`evaluators.runner.run_unit`, and no
other module plants a canary, asks probes or forgets through a target."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

import evaluators.runner as runner
from evaluators.runner import Deletion, UnitPlan, run_unit
from evaluators.targets.base import Target
from memkit.dataset.synthetic import synthetic

REPO = Path(__file__).resolve().parents[1]
PROTOCOL_CALLS = {"feed_sessions", "ask_many", "forget_secret", "forget_user", "delete_threads", "fork"}
PLANTING = {"plant", "probe_queries", "probes_for"}


def _calls(path: Path) -> list[tuple[str, int]]:
    """``(name, line)`` of every call in a module: ``f(...)`` and ``x.f(...)`` where x is
    not ``self``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                out.append((f.id, node.lineno))
            elif isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id == "self"):
                out.append((f.attr, node.lineno))
    return out


def test_no_other_module_plants_probes_or_forgets():
    """Outside the runner, only a target's own implementation (evaluators/targets/) may
    call the target operations, and only the runner plants canaries and asks probes.
    ``cost_line`` counts the probes of a unit to state the cost, and the probe library
    lists the study's nine as its ``study`` set (neither asks any)."""
    allowed = {REPO / "evaluators" / "runner.py", REPO / "evaluators" / "scoring" / "probes.py",
               REPO / "memkit" / "dataset" / "canaries.py"}
    counts_only = {(REPO / "evaluators" / "sweep" / "run.py", "probe_queries"),
                   (REPO / "evaluators" / "adversary" / "library.py", "probes_for"),
                   (REPO / "evaluators" / "inspect_task.py", "probe_queries")}
    offenders = []
    for package in ("memkit", "graphs", "evaluators"):
        for path in sorted((REPO / package).rglob("*.py")):
            if path in allowed:
                continue
            in_targets = "targets" in path.relative_to(REPO).parts
            for name, line in _calls(path):
                if name in PLANTING and (path, name) not in counts_only:
                    offenders.append(f"{path.relative_to(REPO)}:{line}: {name}")
                if name in PROTOCOL_CALLS and not in_targets:
                    offenders.append(f"{path.relative_to(REPO)}:{line}: {name}")
    assert offenders == []


@pytest.fixture
def counted(monkeypatch):
    """Counts units by the entry point that ran them (the runner's ``_Unit``)."""
    seen: Counter[str] = Counter()
    original = runner._Unit.__init__

    def init(self, target, instances, plan, say):
        seen[plan.unit.split("::")[0] if plan.unit in ("audit", "isolation") else "sweep"] += 1
        original(self, target, instances, plan, say)

    monkeypatch.setattr(runner._Unit, "__init__", init)
    return seen


class EchoTarget(Target):
    """A stand-in memory: every user turn, repeated back whole."""

    name = "echo"

    def __init__(self) -> None:
        self.memory: dict[str, list[str]] = {}

    def feed(self, turns, session_id, date, user_id):
        self.memory.setdefault(user_id, []).extend(t["content"] for t in turns if t["role"] == "user")

    def ask(self, text, user_id, thread_id):
        return " ".join(self.memory.get(user_id, []))

    def forget_secret(self, secret, user_id):
        self.memory[user_id] = [t for t in self.memory.get(user_id, []) if secret not in t]


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_every_entry_point_runs_its_units_through_the_runner(counted, tmp_path, monkeypatch, embedder):
    from evaluators.audit import audit
    from evaluators.isolation import isolation_probe
    from evaluators.sweep import SweepConfig, run_sweep
    from evaluators.targets import matrix

    run_sweep(SweepConfig(n=2, summary_levels=[0], ks=[1], deletion_modes=["full_purge"], n_resamples=10),
              tmp_path / "sweep", progress=False, write_outputs=False)
    assert counted == {"sweep": 2}
    echo = EchoTarget()
    audit(lambda q, u: echo.ask(q, u, ""), feed=echo.feed, forget=echo.forget_secret, n=2, n_resamples=10)
    audit(EchoTarget(), forget=True, n=2, n_resamples=10)
    assert counted["audit"] == 2
    isolation_probe(lambda u: (lambda q, user: echo.ask(q, user, "")), lambda u: echo.feed, n=2)
    assert counted["isolation"] == 1
    from evaluators.targets.base import load_target

    monkeypatch.setattr(matrix, "_factories", lambda pg_uri, pgdata: [
        ("langgraph[memory]", lambda: load_target("langgraph", backend="memory",
                                                  embed=DeterministicFakeEmbedding(size=8), dims=8))])
    matrix.run_matrix(n=1, n_resamples=10)
    assert counted["audit"] == 4  # the matrix: one audit per forget scope


def test_the_runner_reports_what_a_target_lacks_as_na():
    """A forget the target lacks, a step it has not and threads it keeps not are n/a in
    the run (never zeros)."""

    class Mute(Target):
        name = "mute"

        def feed(self, turns, session_id, date, user_id):
            pass

        def ask(self, text, user_id, thread_id):
            return ""

    inst = synthetic(1, 0)
    run = run_unit(Mute(), inst, UnitPlan(unit="u", deletions=(Deletion("x", steps=("vacuum",), delete_threads=True),),
                                          questions=False))
    assert run.na == {"forget_secret": "mute has no forget_secret"}
    run = run_unit(EchoTarget(), inst, UnitPlan(unit="u", questions=False, scan_before=True,
                                                deletions=(Deletion("x", steps=("vacuum",), delete_threads=True),)))
    assert set(run.na) == {"vacuum", "delete_threads"}
    assert [r["phase"] for r in run.records if r["type"] == "forensics"] == []  # no surfaces: nothing scanned
    assert {r["phase"] for r in run.records if r["type"] == "call"} == {"main", "forget"}
