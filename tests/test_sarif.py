"""SARIF 2.1.0 from ``memkit residue`` and ``memkit audit``, and ``--baseline``.

Every SARIF file is validated against the OASIS SARIF 2.1.0 schema
(tests/data/sarif-schema-2.1.0.json, read with PyPI's ``jsonschema``). Secrets are
planted by code that is not memkit's (chromadb, sqlite3, plain file writes) and each
reported location is checked against the bytes or rows it names.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import typer
from typer.testing import CliRunner

from evaluators.audit import AuditResult
from evaluators.cli.audit import register as register_audit
from evaluators.cli.residue import register as register_residue
from evaluators.report.baseline import Snapshot, compare, load_baseline, metric_worse
from evaluators.report.sarif import parse_location
from evaluators.targets.gates import evaluate, parse_condition

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
SECRET = "XQ7-VIOLET-3829"
MASK = "X" + "*" * (len(SECRET) - 2) + "9"


def validate(doc: dict) -> None:
    """Raise unless ``doc`` is a valid SARIF 2.1.0 log (the OASIS schema, draft 4)."""
    jsonschema.Draft4Validator(SCHEMA).validate(doc)


@pytest.fixture(scope="module")
def app():
    a = typer.Typer()
    register_residue(a)
    register_audit(a)
    return a


_WRITE_STORE = """
import json, sys
import chromadb, numpy as np
from chromadb.config import Settings
path, docs, metas = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
col = client.create_collection("notes", embedding_function=None)
vecs = np.random.default_rng(0).normal(size=(len(docs), 8)).astype(np.float32)
col.add(ids=[f"n{i}" for i in range(len(docs))], documents=docs, metadatas=metas, embeddings=vecs)
client.close()
"""


def chroma_dir(path: Path, docs: list[str], metas: list[dict]) -> None:
    """A Chroma directory written with chromadb alone (seeded random vectors), in a
    process of its own: chromadb writes uninitialised heap memory into its HNSW
    ``length.bin``, which in this process may hold the secret (earlier tests put it
    there), and the scan rightly reports that copy."""
    subprocess.run([sys.executable, "-c", _WRITE_STORE, str(path), json.dumps(docs), json.dumps(metas)],
                   check=True, timeout=120, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})


def results_by_rule(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in doc["runs"][0]["results"]:
        out.setdefault(r["ruleId"], []).append(r)
    return out


def test_parse_location_forms():
    f = parse_location("/data/h.json@17 [utf-16-le]")
    assert f["physicalLocation"]["artifactLocation"]["uri"] == "file:///data/h.json"
    assert f["physicalLocation"]["region"] == {"byteOffset": 17}
    rel = parse_location("base/16384/2619@8192 (block 1, dead tuple)")
    assert rel["physicalLocation"]["artifactLocation"] == {"uri": "base/16384/2619", "uriBaseId": "SCANROOT"}
    member = parse_location("/d/a.zip!inner.txt@3")
    assert "region" not in member["physicalLocation"]
    assert member["logicalLocations"][0]["fullyQualifiedName"] == "/d/a.zip!inner.txt@3"
    thread = parse_location("thread=memkit-1:main:u:q:checkpoint=abc:messages[0]")
    assert thread["logicalLocations"][0] == {"name": "memkit-1:main:u:q", "kind": "thread",
                                             "fullyQualifiedName": "thread=memkit-1:main:u:q:checkpoint=abc:messages[0]"}
    row = parse_location("history:row 3:new_memory")
    assert "physicalLocation" not in row and row["logicalLocations"][0]["name"] == "history"
    for loc in (f, rel, member, thread, row):
        validate({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "t"}},
                                                "results": [{"message": {"text": "m"}, "locations": [loc]}]}]})


@pytest.mark.timeout(300)
def test_residue_sarif_validates_and_locates_each_copy(app, tmp_path):
    store = tmp_path / "store"
    chroma_dir(store, ["call me at noon", f"the vault code is {SECRET}"], [{"src": "chat"}, {"src": SECRET}])
    side = tmp_path / "notes.json"
    side.write_text(json.dumps({"a": "nothing here", "b": f"keep {SECRET} safe"}))
    db = tmp_path / "history.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE history (id INTEGER PRIMARY KEY, text TEXT)")
    con.executemany("INSERT INTO history (text) VALUES (?)", [("hello",), (f"old: {SECRET}",)])
    con.commit()
    con.close()
    out = tmp_path / "out.sarif"
    res = CliRunner().invoke(app, ["residue", str(store), SECRET, "--also", str(side), "--also", str(db),
                                   "--no-embeddings", "--json", "--sarif", str(out)])
    assert res.exit_code == 1, res.output
    counts = {s: n for s, n in json.loads(res.stdout)["counts"].items() if n}
    text = out.read_text()
    assert SECRET not in text and SECRET.lower() not in text and MASK in text
    doc = json.loads(text)
    validate(doc)
    by_rule = results_by_rule(doc)
    # one result per surface with copies (one secret), counting every copy
    assert {s: [r["properties"]["copies"] for r in rs] for s, rs in by_rule.items()} == \
        {s: [n] for s, n in counts.items()}
    assert {"side_json", "side_sqlite", "side_disk", "text_other", "metadata", "disk_sqlite"} <= set(by_rule)
    rules = {r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]}
    assert rules == set(by_rule)
    # a side file: its byte offset is where Python's bytes.find puts the secret
    [j] = by_rule["side_json"]
    [loc] = j["locations"]
    assert loc["physicalLocation"]["artifactLocation"]["uri"] == side.resolve().as_uri()
    assert loc["physicalLocation"]["region"]["byteOffset"] == side.read_bytes().find(SECRET.encode())
    # chroma.sqlite3 relative to the store (SCANROOT): every offset holds the secret
    base = doc["runs"][0]["originalUriBaseIds"]["SCANROOT"]["uri"]
    assert base == store.resolve().as_uri() + "/"
    raw = (store / "chroma.sqlite3").read_bytes()
    [d] = by_rule["disk_sqlite"]
    offsets = set()
    for loc in d["locations"]:
        art = loc["physicalLocation"]["artifactLocation"]
        assert art == {"uri": "chroma.sqlite3", "uriBaseId": "SCANROOT"}
        offsets.add(loc["physicalLocation"]["region"]["byteOffset"])
    exact = {m.start() for m in re.finditer(re.escape(SECRET.encode()), raw)}
    assert exact and exact <= offsets
    # a SQLite side file's live row: table and row as a logical location
    [row] = by_rule["side_sqlite"]
    names = [loc["logicalLocations"][0]["fullyQualifiedName"] for loc in row["locations"]]
    assert any("history" in n and "row" in n for n in names), names
    # what was not read is said, never dropped
    notes = doc["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert any(n["properties"]["surface"] == "stale_embedding" and n["level"] == "warning" for n in notes)
    assert any(n["properties"]["surface"] == "checkpoint" and n["descriptor"]["id"] == "not_given" for n in notes)


@pytest.mark.timeout(300)
def test_residue_baseline_fails_only_on_a_new_surface_and_lists_what_was_fixed(app, tmp_path):
    store = tmp_path / "store"
    chroma_dir(store, ["call me at noon", "groceries"], [{"src": "chat"}, {"src": "chat"}])
    side = tmp_path / "notes.json"
    side.write_text(json.dumps({"b": f"keep {SECRET} safe"}))
    runner = CliRunner()
    common = [str(store), SECRET, "--also", str(side), "--no-embeddings"]
    first = runner.invoke(app, ["residue", *common, "--json", "--sarif", str(tmp_path / "b.sarif")])
    assert first.exit_code == 1, first.output
    (tmp_path / "b.json").write_text(first.stdout)
    for baseline in ("b.sarif", "b.json"):  # the same residue: nothing new, exit 0
        same = runner.invoke(app, ["residue", *common, "--baseline", str(tmp_path / baseline)])
        assert same.exit_code == 0, same.output
        assert "- new: none" in same.stdout and "known (in the baseline): side_json (1 secrets)" in same.stdout
    extra = tmp_path / "extra.txt"
    extra.write_bytes(b"plain text " + SECRET.encode() + b"\n")
    worse = runner.invoke(app, ["residue", *common, "--also", str(extra), "--baseline", str(tmp_path / "b.sarif"),
                                "--sarif", str(tmp_path / "w.sarif")])
    assert worse.exit_code == 1, worse.output
    assert "- new: side_file (1 secrets)" in worse.stdout
    doc = json.loads((tmp_path / "w.sarif").read_text())
    validate(doc)
    states = {r["ruleId"]: r["baselineState"] for r in doc["runs"][0]["results"]}
    assert states == {"side_json": "unchanged", "side_file": "new"}
    side.write_text(json.dumps({"b": "nothing left"}))
    fixed = runner.invoke(app, ["residue", *common, "--baseline", str(tmp_path / "b.json"), "--json"])
    assert fixed.exit_code == 0, fixed.output
    assert json.loads(fixed.stdout)["baseline"]["fixed"] == {"side_json": 1}
    # a baseline that is not a memkit output: exit 2 before any scan, the file named
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    res = runner.invoke(app, ["residue", *common, "--baseline", str(bad)])
    assert res.exit_code == 2 and str(bad) in res.output
    res = runner.invoke(app, ["residue", *common, "--sarif", str(tmp_path / "missing" / "x.sarif")])
    assert res.exit_code == 2 and "does not exist" in res.output


def _result(**kw) -> AuditResult:
    base = dict(n=2, data="synthetic", seed=0, kind="token", pr=1.0, pr_ci=(1.0, 1.0),
                aer={"direct": 1.0, "indirect": 1.0, "jailbreak": 1.0, "max": 1.0}, aer_ci=(1.0, 1.0),
                forget_mode="full_purge", aer_after={"direct": 0.5, "indirect": 0, "jailbreak": 0, "max": 0.5},
                residue={"checkpoint": 2, "pg_rows": 0}, phases=["before", "forget"], exercised=True)
    return AuditResult(**{**base, **kw})


def test_gates_with_a_baseline_count_only_what_is_new_or_worse():
    was = Snapshot("audit", residue={"checkpoint": 2, "pg_rows": 0}, unchecked={"disk_pg_wal": ["no pgdata"]},
                   gates={"aer_after_max": {"value": 0.5, "ci": [0.25, 0.75]}}, source="b.json")
    conds = [parse_condition(c) for c in ("residue", "unchecked", "aer_after_max>0")]
    same = _result(residue_unchecked={"disk_pg_wal": ["no pgdata"]})
    assert [hit for _, hit, _ in evaluate(same, conds, baseline=was)] == [False, False, False]
    assert [hit for _, hit, _ in evaluate(same, conds)] == [True, True, True]
    new = _result(residue={"checkpoint": 2, "pg_rows": 1}, aer_after={"max": 0.9})
    verdicts = evaluate(new, conds, baseline=was)
    assert [hit for _, hit, _ in verdicts] == [True, False, True]
    assert "new: pg_rows (1 users)" in verdicts[0][2] and "known (in the baseline): checkpoint" in verdicts[0][2]
    assert "above its CI" in verdicts[2][2]
    more = _result(residue={"checkpoint": 3, "pg_rows": 0}, n=3)
    assert evaluate(more, conds[:1], baseline=was)[0][1] is True  # more users on a known surface
    fixed = compare(was, Snapshot("audit", residue={"checkpoint": 0, "pg_rows": 0}))
    assert fixed.fixed == {"checkpoint": 2} and not fixed.regressed
    assert metric_worse("pr", "<", 0.2, Snapshot("audit", gates={"pr": {"value": 0.6, "ci": [0.4, 0.8]}}))[0]
    assert not metric_worse("pr", "<", 0.5, Snapshot("audit", gates={"pr": {"value": 0.6, "ci": [0.4, 0.8]}}))[0]
    with pytest.raises(ValueError, match="memkit residue"):
        compare(Snapshot("residue", source="r.json"), Snapshot("audit"))


@pytest.fixture()
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_audit_sarif_and_baseline_of_the_example_agent(app, in_repo, tmp_path):
    """A baseline with residue on one surface (the agent's checkpoints after
    ``full_purge``): the same run passes, a run that leaves copies on new surfaces
    (``raw_only`` keeps summaries) fails and names them."""
    runner = CliRunner()
    args = ["audit", "examples.my_agent:build", "--n", "1", "--n-resamples", "10", "--fail-on", "residue"]
    first = runner.invoke(app, [*args, "--mode", "full_purge", "--sarif", str(tmp_path / "a.sarif"), "--json",
                                "--junit", str(tmp_path / "a.xml")])
    assert first.exit_code == 1, first.output
    doc = json.loads((tmp_path / "a.sarif").read_text())
    validate(doc)
    payload = json.loads(first.stdout)
    canary = payload["canaries"][0]["value"]
    assert canary not in (tmp_path / "a.sarif").read_text()
    [res] = doc["runs"][0]["results"]
    assert res["ruleId"] == "checkpoint" and res["properties"]["user"] == payload["canaries"][0]["user_id"]
    assert res["properties"]["copies"] == payload["surface_scans"]["forget"]["checkpoint"]["copies"]
    threads = {loc["logicalLocations"][0]["name"] for loc in res["locations"]}
    assert threads and all(t.startswith("memkit-") or t.startswith(payload["canaries"][0]["user_id"])
                           for t in threads), threads
    assert load_baseline(tmp_path / "a.sarif").residue["checkpoint"] == 1
    same = runner.invoke(app, [*args, "--mode", "full_purge", "--baseline", str(tmp_path / "a.sarif")])
    assert same.exit_code == 0, same.output
    assert "ok   --fail-on residue: known (in the baseline): checkpoint (1 users)" in same.stdout
    worse = runner.invoke(app, [*args, "--mode", "raw_only", "--baseline", str(tmp_path / "a.sarif"),
                                "--junit", str(tmp_path / "w.xml")])
    assert worse.exit_code == 1, worse.output
    line = next(x for x in worse.stdout.splitlines() if x.startswith("FAIL --fail-on residue"))
    assert "new: " in line and "text_summary" in line and "known (in the baseline): checkpoint" in line
    assert "Since the baseline" in (tmp_path / "w.xml").read_text()
