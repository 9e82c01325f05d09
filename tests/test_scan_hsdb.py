"""memkit.scan.hsdb: a database kept in the cache directory matches as the compiled one
does, and a damaged or foreign file is compiled again, never trusted."""

from __future__ import annotations

import hyperscan
import pytest

from memkit.scan import hsdb

PATTERNS = [b"XQ7-VIOLET", b"\\\\+u0031", b"[0-9]{4}-x"]
DATA = b"..XQ7-VIOLET.. \\\\\\u0031 2024-x 99-x"


def _matches(db) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    db.scan(DATA, match_event_handler=lambda i, a, b, f, c: out.append((i, b)))
    return out


def _compiled(flags: int) -> list[tuple[int, int]]:
    """The matches of the patterns compiled here, without the cache."""
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=PATTERNS, ids=[0, 1, 2], elements=3, flags=[flags] * 3)
    return _matches(db)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMKIT_CACHE_DIR", str(tmp_path))
    return tmp_path / "hyperscan"


def test_a_kept_database_matches_as_the_compiled_one_and_is_not_compiled_again(cache, monkeypatch):
    first = hsdb.compile_block(PATTERNS, [hyperscan.HS_FLAG_DOTALL] * 3)
    want = _matches(first)
    assert want == _compiled(hyperscan.HS_FLAG_DOTALL) and {i for i, _ in want} == {0, 1, 2}
    assert len(list(cache.glob("*.hsdb"))) == 1

    def no_compile(*_a, **_k):
        raise AssertionError("compiled again")

    monkeypatch.setattr(hyperscan, "Database", no_compile)
    assert _matches(hsdb.compile_block(PATTERNS, [hyperscan.HS_FLAG_DOTALL] * 3)) == want


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "another"])
def test_a_damaged_or_foreign_file_is_compiled_again(cache, damage):
    want = _matches(hsdb.compile_block(PATTERNS, 0))
    assert want == _compiled(0)
    (kept,) = cache.glob("*.hsdb")
    blob = kept.read_bytes()
    if damage == "truncate":
        kept.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":  # a byte Hyperscan's own checks let through (near the end)
        kept.write_bytes(blob[:-5] + bytes([blob[-5] ^ 0x55]) + blob[-4:])
    elif damage == "empty":
        kept.write_bytes(b"")
    else:  # another database's bytes under this name
        other = hsdb.compile_block([b"nothing-like-it"], 0)
        assert _matches(other) == []
        kept.write_bytes(next(p for p in cache.glob("*.hsdb") if p != kept).read_bytes())
    assert _matches(hsdb.compile_block(PATTERNS, 0)) == want
    assert kept.read_bytes() == blob  # kept again, whole


def test_an_unwritable_cache_only_costs_the_compile(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("MEMKIT_CACHE_DIR", str(blocker))
    assert _matches(hsdb.compile_block(PATTERNS, 0)) == _compiled(0)


def test_only_the_most_recently_used_are_kept(cache, monkeypatch):
    monkeypatch.setattr(hsdb, "KEEP", 3)
    for k in range(6):
        hsdb.compile_block([b"word%d" % k], 0)
    assert len(list(cache.glob("*.hsdb"))) == 3
