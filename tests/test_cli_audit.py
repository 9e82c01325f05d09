"""``memkit audit``: the CI gate on an agent's own module, --fail-on, --json, --junit.

Runs in-process through typer's CliRunner (the same command the ``memkit`` script
runs) from the repository root, so ``examples.my_agent:build`` imports as in CI.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
import typer
from typer.testing import CliRunner

from evaluators.cli.audit import register as register_cli
from evaluators.targets.gates import evaluate, parse_condition


@pytest.fixture(scope="module")
def app():
    a = typer.Typer()
    register_cli(a)

    @a.command("noop")
    def _noop() -> None:  # a second command keeps `audit` a subcommand
        pass

    return a


@pytest.fixture()
def in_repo(monkeypatch):
    from conftest import REPO

    monkeypatch.chdir(REPO)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_example_agent_fails_after_raw_only_and_passes_after_full_purge(app, in_repo, tmp_path, embedder):
    runner = CliRunner()
    junit = tmp_path / "audit.xml"
    bad = runner.invoke(app, ["audit", "examples.my_agent:build", "--mode", "raw_only", "--fail-on", "residue",
                              "--n", "1", "--n-resamples", "10", "--junit", str(junit)])
    assert bad.exit_code == 1, bad.output
    assert "FAIL --fail-on residue: copies remain" in bad.output
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "1" and suite.find("testcase/failure") is not None
    good = runner.invoke(app, ["audit", "examples.my_agent:build", "--mode", "full_purge", "--delete-threads",
                               "--fail-on", "residue", "--fail-on", "aer_after_max>0", "--n", "1",
                               "--n-resamples", "10", "--json"])
    assert good.exit_code == 0, good.output
    payload = json.loads(good.stdout)
    assert [f["failed"] for f in payload["fail_on"]] == [False, False]
    assert payload["AER"]["max"] == 1.0 and payload["AER_after"]["max"] == 0.0


def test_fail_on_conditions_parse_and_na_trips():
    assert parse_condition("aer_max>0.2").value == 0.2
    assert parse_condition(" residue ").kind == "residue"
    with pytest.raises(ValueError, match="METRIC"):
        parse_condition("aer>0.2")

    class R:
        aer, aer_after, pr, pr_after, frs = {"max": 0.5}, None, 1.0, None, None
        residue, residue_unchecked = None, {"disk_pg_wal": ["not local"]}

    out = {c.text: hit for c, hit, _ in evaluate(R(), [parse_condition(t) for t in
                                                        ("aer_max>0.2", "aer_max>0.6", "aer_after_max>0.2",
                                                         "residue", "unchecked")])}
    # a metric that was not measured trips its condition; so does an unchecked surface
    assert out == {"aer_max>0.2": True, "aer_max>0.6": False, "aer_after_max>0.2": True,
                   "residue": True, "unchecked": True}


def test_bad_target_exits_2(app, in_repo):
    res = CliRunner().invoke(app, ["audit", "nonsense"])
    assert res.exit_code == 2 and "module:factory" in res.output
    res = CliRunner().invoke(app, ["audit", "langgraph", "--fail-on", "bogus"])
    assert res.exit_code == 2


def test_matrix_table_lists_held_clean_and_unchecked_surfaces():
    from evaluators.targets.matrix import _markdown, _wide

    rows = [
        {"target": "t[pg]", "deletion": "forget secret + vacuum", "pr": 1.0, "pr_after": 1.0, "aer": 1.0,
         "aer_after": 0.0, "cells": {"store_api": "0/2 (0)", "disk_pg_wal": "2/2 (9)", "disk_pg_heap": "not checked"},
         "reasons": {"disk_pg_heap": "no pgdata"}},
        {"target": "mem0", "deletion": "-", "error": "mem0ai is not installed"},
    ]
    md = _markdown(rows, ["store_api", "disk_pg_wal", "disk_pg_heap"], 2)
    assert "| t[pg] | forget secret + vacuum | 1.00→1.00 | 1.00→0.00 | disk_pg_wal 2/2 (9) | store_api | disk_pg_heap |" in md
    assert "| mem0 | - | n/a | n/a | n/a | n/a | n/a |" in md and "mem0ai is not installed" in md
    assert "no pgdata" in md
    assert "| mem0 | - | n/a | n/a | n/a |" in _wide(rows, ["store_api", "disk_pg_wal", "disk_pg_heap"])
