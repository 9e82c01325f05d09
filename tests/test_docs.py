"""The repository's map holds: docstrings cite only files in the repository, and
docs/design.md's data-path walk names functions that exist."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("memkit", "graphs", "evaluators", "benchmarks", "examples", "scripts", "tests")

# A markdown file by name, or a path with a folder ending in a source/data suffix.
_MD = re.compile(r"(?<![\w/.:-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
_PATH = re.compile(r"(?<![\w/.:-])((?:[\w.-]+/)+[\w.-]+\.(?:py|json|toml|csv))\b")


# Names that are not repository files on purpose: files a run writes, and files of
# other projects cited by their project's name.
NOT_REPO_FILES = {
    "compare.md", "OUT/compare.md", "report.md",  # outputs of memkit compare / report
    "src/evaluation/evaluate_qa.py",  # LongMemEval's scorer (xiaowu0162/LongMemEval)
    "matrix.md", "dir/file.json", "benchmarks/NAME.py",  # outputs and placeholder paths
    ".memkit/compaction.json",  # the compaction journal beside a store (memkit/store/compaction.py)
    "evaluation/_runner.py",  # LangSmith's evaluate() (langchain-ai/langsmith-sdk)
}


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if (REPO / line).exists()]


def _docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((getattr(node, "lineno", 1), doc))
    return out


def test_docstrings_cite_only_files_in_the_repository() -> None:
    files = _tracked()
    names = {Path(f).name for f in files}
    paths = set(files)
    missing = []
    for f in files:
        if not f.endswith(".py") or not f.startswith(PACKAGES):
            continue
        for lineno, doc in _docstrings(REPO / f):
            for ref in _MD.findall(doc):
                if ref in NOT_REPO_FILES:
                    continue
                if ref not in paths and Path(ref).name not in names:
                    missing.append(f"{f}:{lineno}: {ref}")
            for ref in _PATH.findall(doc):
                if ref in NOT_REPO_FILES:
                    continue
                if ref not in paths and not any(p.endswith("/" + ref) for p in paths):
                    missing.append(f"{f}:{lineno}: {ref}")
    assert not missing, "docstrings cite files that are not in the repository:\n" + "\n".join(missing)


def _walk_refs() -> list[tuple[str, str]]:
    text = (REPO / "docs" / "design.md").read_text()
    return sorted(set(re.findall(r"`((?:memkit|graphs|evaluators)/[\w/]+\.py):(\w+)`", text)))


def test_design_walk_names_functions_that_exist() -> None:
    refs = _walk_refs()
    assert len(refs) >= 15, refs  # the walk names each step's function
    for path, name in refs:
        module = path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        obj = getattr(importlib.import_module(module), name, None)
        assert obj is not None, f"docs/design.md names {path}:{name}, which does not exist"
        assert callable(obj), f"docs/design.md names {path}:{name}, which is not a function or class"


@pytest.mark.parametrize("package", ["memkit", "graphs", "evaluators"])
def test_modules_stay_small_or_say_why(package: str) -> None:
    """No module over 600 lines unless its docstring says why ("Why this module is long")."""
    long = []
    for path in sorted((REPO / package).rglob("*.py")):
        n = len(path.read_text().splitlines())
        if n > 600:
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            if "Why this module is long" not in doc:
                long.append(f"{path.relative_to(REPO)}: {n} lines")
    assert not long, "modules over 600 lines without a reason in their docstring:\n" + "\n".join(long)


def test_library_modules_do_not_import_typer() -> None:
    """Commands live in evaluators/cli/; the library does not import typer."""
    offenders = []
    for package in ("memkit", "graphs", "evaluators"):
        for path in sorted((REPO / package).rglob("*.py")):
            if "cli" in path.relative_to(REPO).parts:
                continue
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                        else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(m == "typer" or m.startswith("typer.") for m in mods):
                    offenders.append(str(path.relative_to(REPO)))
    assert not offenders, f"library modules import typer: {sorted(set(offenders))}"
