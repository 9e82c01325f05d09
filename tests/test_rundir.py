"""Which folders memkit may write into (evaluators.rundir): a folder memkit did not mark
with ``.memkit-run`` is refused if it holds anything, whatever its files are named.

Every folder here is written by the test itself (plain ``pathlib``), and "nothing
changed" is checked with ``os.walk`` + ``hashlib`` (file bytes and modes).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluators.rundir import (
    MARKER,
    NotARunDirectoryError,
    check_out_dir,
    claim_out_dir,
    require_run,
    run_kind,
)


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in files + dirs:
            p = Path(dirpath, name)
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            out[str(p.relative_to(root))] = (p.stat().st_mode, digest)
    return out


# a user's own folders whose file names are those memkit's outputs use
LOOKALIKES: dict[str, dict[str, str]] = {
    "audit": {"matrix.json": '{"rows": ["my own"]}\n', "matrix.md": "# my matrix\n"},
    "sweep": {"config.json": json.dumps({"summary_levels": [0], "ks": [1]}), "results.jsonl": "{}\n",
              "report.md": "mine\n"},
    "sweep-metrics": {"config.json": "{}", "metrics.json": json.dumps({"by_S": {}})},
    "compare": {"compare.json": json.dumps({"runs": ["a"]}), "compare.md": "mine\n"},
    "designs": {"a/config.json": json.dumps({"summary_levels": [0], "ks": [1]})},
    "lock only": {".lock": ""},
    "hidden": {".env": "KEY=1\n"},
    "damaged marker": {MARKER: "{not json", "matrix.json": "{}"},
    "other kind's marker": {MARKER: '{"kind": "sweep"}', "matrix.json": "{}"},
}
COMMAND_KINDS = [("audit", "audit"), ("sweep", "sweep"), ("designs", "designs"), ("compare", "compare"),
                 (("compare", "designs"), "compare")]


def make(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


@pytest.mark.parametrize("layout", sorted(LOOKALIKES))
@pytest.mark.parametrize(("kinds", "kind"), COMMAND_KINDS)
def test_an_unmarked_folder_that_holds_anything_is_refused_and_left_as_it_was(tmp_path, layout, kinds, kind):
    out = make(tmp_path / "ci", LOOKALIKES[layout])
    if layout == "other kind's marker" and kind == "sweep":
        (out / MARKER).write_text('{"kind": "audit"}')
    before = snapshot(tmp_path)
    with pytest.raises(NotARunDirectoryError, match="is not empty") as err:
        check_out_dir(out, kinds)
    assert f"--out {tmp_path / 'ci-1'}" in str(err.value)
    with pytest.raises(NotARunDirectoryError):
        claim_out_dir(out, kind)
    assert snapshot(tmp_path) == before


def test_the_refusal_names_a_lookalike_and_how_to_mark_an_old_run(tmp_path):
    out = make(tmp_path / "ci", LOOKALIKES["audit"])
    assert run_kind(out) is None
    with pytest.raises(NotARunDirectoryError) as err:
        check_out_dir(out, "audit")
    msg = str(err.value)
    assert "not a memkit output directory" in msg and "matrix.json, matrix.md" in msg
    assert "look like a memkit audit --matrix output but it has no .memkit-run marker" in msg


def test_report_and_judge_rewrite_only_a_marked_sweep(tmp_path):
    out = make(tmp_path / "run", LOOKALIKES["sweep"])
    with pytest.raises(NotARunDirectoryError, match="is not a memkit sweep run"):
        require_run(out, "sweep")
    (out / MARKER).write_text('{"kind": "sweep"}\n')
    assert require_run(out, "sweep") == out
    with pytest.raises(FileNotFoundError):
        require_run(tmp_path / "nowhere")


def test_new_empty_and_marked_folders_are_taken(tmp_path):
    new = claim_out_dir(tmp_path / "a" / "b", "audit")
    assert json.loads((new / MARKER).read_text()) == {"kind": "audit"} and run_kind(new) == "audit"
    (new / "matrix.json").write_text("{}")
    check_out_dir(new, "audit")  # memkit's own earlier output
    with pytest.raises(NotARunDirectoryError, match="is a memkit audit --matrix output"):
        check_out_dir(new, "sweep")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_kind(claim_out_dir(empty, "sweep")) == "sweep"
    lone = tmp_path / "lone"  # only a marker (damaged, or of another kind): nothing to lose
    lone.mkdir()
    (lone / MARKER).write_text("{oops")
    assert run_kind(claim_out_dir(lone, "compare")) == "compare"
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        check_out_dir(tmp_path / "file", "audit")


def test_run_matrix_refuses_a_users_matrix_before_running(tmp_path):
    """``memkit audit --matrix --out ci/`` over the user's own matrix.json and matrix.md:
    refused at once (run_matrix's early check), both files unchanged."""
    from evaluators.targets.matrix import run_matrix

    out = make(tmp_path / "ci", LOOKALIKES["audit"])
    before = snapshot(tmp_path)
    with pytest.raises(NotARunDirectoryError, match="is not empty"):
        run_matrix(n=1, out=out)
    assert snapshot(tmp_path) == before


@pytest.mark.timeout(120)
def test_memkit_audit_matrix_refuses_a_users_matrix(tmp_path):
    out = make(tmp_path / "ci", LOOKALIKES["audit"])
    before = snapshot(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "evaluators.cli", "audit", "--matrix", "--out", str(out)],
                          capture_output=True, text=True, timeout=100)
    assert proc.returncode == 2 and "is not empty" in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(tmp_path) == before
