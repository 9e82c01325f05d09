"""scripts/constraints.txt (the versions set-up installs) agrees with pyproject.toml.

A dependency range changed in pyproject.toml without renewing the constraints
(``make constraints``) would make set-up fail in pip's resolver on a fresh machine; this
says which package and why, before CI does.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
# Installed by scripts/setup.sh itself, outside the constraints.
OWN = {"torch", "llama-cpp-python", "memkit"}


def _pins() -> dict[str, Version]:
    pins = {}
    for n, line in enumerate((REPO / "scripts" / "constraints.txt").read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        assert m, f"scripts/constraints.txt line {n}: not 'name==version': {line!r}"
        pins[canonicalize_name(m[1])] = Version(m[2])
    return pins


def test_every_requirement_is_pinned_inside_its_range() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra]
    pins = _pins()
    for r in reqs:
        name = canonicalize_name(r.name)
        if name in OWN:
            continue
        assert name in pins, f"{r}: not in scripts/constraints.txt (run `make constraints`)"
        assert pins[name] in r.specifier, (
            f"{r}: scripts/constraints.txt pins {pins[name]}, outside the range (run `make constraints`)")


def test_set_up_installs_under_the_constraints() -> None:
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert re.search(r"pip install [^\n]*-c scripts/constraints\.txt -e", setup)
