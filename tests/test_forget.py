"""The forget ladder (graphs/forget.py) on a persistent store, one test per deletion mode.

Setup: the real session of LongMemEval instance 6b168ec8 with the canary sentence
"By the way, my private session token is XQ7-VIOLET-3829." appended to the 4th user
turn (turn index 6), as memkit.dataset.canaries.plant weaves it at a sentence boundary. The
memory is written at S=1 by the extractive backend *through its chat model* with an
LLMCache, so the canary sits in a raw turn, in the summary fact derived from it and in
the cache (the summarizer's prompt and reply, and one probe's prompt and reply).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphs.forget import DELETION_MODES, LADDER, build_forget_graph, forget
from graphs.memory import retrieve, write_session
from graphs.nodes import make_responder, make_summarizer
from memkit.models.extractive import ExtractiveChatModel
from memkit.store.cache import LLMCache, contains_secret
from memkit.store.tiered import TieredMemoryStore

CANARY = "XQ7-VIOLET-3829"
CANARY_SENTENCE = f"By the way, my private session token is {CANARY}."
NS = "6b168ec8"
PROBE = "What is my private session token?"
# the other fact of the planted turn (a self-disclosing sentence of user turn 4)
SIBLING_FACT = ("I've been thinking about getting a bike lock with a GPS tracker to keep my bikes "
                "safe when I'm not around them.")


class Memory:
    """A written memory: store, cache, summarizer and the ids the tests reason about."""

    def __init__(self, root: Path, session: tuple[str, str, list[dict]]) -> None:
        sid, date, turns = session
        turns = [dict(t) for t in turns]
        turns[6] = {**turns[6], "content": f"{turns[6]['content']} {CANARY_SENTENCE}"}
        self.turns = turns
        self.store = TieredMemoryStore(root / "store")
        self.cache = LLMCache(root / "llm_cache.sqlite")
        self.summarizer = make_summarizer(ExtractiveChatModel(), cache=self.cache)
        self.ids = write_session(self.store, NS, sid, date, turns, 1, self.summarizer)
        raw = self.store.get(self.ids["raw_ids"])
        self.canary_raw = next(c for c in raw if c.turn_index == 6)
        facts = self.store.get(self.ids["summary_ids"])
        self.canary_fact = next(c for c in facts if c.text == CANARY_SENTENCE)
        self.sibling_fact = next(c for c in facts if c.text == SIBLING_FACT)
        # one probe through the responder, so the cache also holds a reply with the canary
        responder = make_responder(ExtractiveChatModel(), cache=self.cache)
        self.probe_reply = responder(PROBE, retrieve(self.store, PROBE, 3, ("summary",), NS))

    def holding(self, tier: str) -> list[str]:
        return [c.id for c in self.store.find_containing(CANARY, namespace=NS, tiers=[tier])]


@pytest.fixture(scope="module")
def session(sample_path):
    data = json.loads(sample_path.read_text())
    inst = next(x for x in data if x["question_id"] == NS)
    return inst["haystack_session_ids"][0], inst["haystack_dates"][0], inst["haystack_sessions"][0]


@pytest.fixture()
def memory(tmp_path, session) -> Memory:
    m = Memory(tmp_path, session)
    # preconditions, by construction of the setup
    assert m.holding("raw") == [m.canary_raw.id]
    assert m.holding("summary") == [m.canary_fact.id]
    assert m.canary_fact.source_ids == [m.canary_raw.id]
    assert m.sibling_fact.source_ids == [m.canary_raw.id]
    assert CANARY in m.probe_reply
    assert len(m.cache) == 2 and all(contains_secret(p, CANARY) for p, _, _ in m.cache.entries())
    return m


def _residue_surfaces(m: Memory) -> list[str]:
    """Surfaces where memkit.residue.chroma.scan still finds the canary."""
    from memkit.residue.chroma import scan

    report = scan(m.store, CANARY, cache_paths=[m.cache.path])
    return sorted(s for s, n in report.counts().items() if n)


def test_ladder_order_and_routes() -> None:
    assert DELETION_MODES == ("none", "raw_only", "raw_plus_resummarize", "full_purge",
                              "tombstone_redaction", "crypto_shred")
    assert list(LADDER) == list(DELETION_MODES)


def test_none_keeps_everything(memory) -> None:
    before = memory.store.count(namespace=NS)
    result = forget(memory.store, CANARY, "none", namespace=NS, S=1, cache=memory.cache)
    assert result.steps == [] and result.deleted == {"raw": [], "summary": []}
    assert memory.holding("raw") == [memory.canary_raw.id]
    assert memory.holding("summary") == [memory.canary_fact.id]
    assert memory.store.count(namespace=NS) == before and len(memory.cache) == 2
    # the scanner sees the canary where the setup put it (so "no surface" below means something)
    assert {"text_raw", "text_summary", "cache", "cache_disk", "disk_sqlite"} <= set(
        _residue_surfaces(memory))


def test_raw_only_leaves_the_summary_copy(memory) -> None:
    n_raw = memory.store.count(namespace=NS, tiers=["raw"])
    result = forget(memory.store, CANARY, "raw_only", namespace=NS, S=1, cache=memory.cache)
    assert result.steps == ["delete_raw"]
    assert result.deleted == {"raw": [memory.canary_raw.id], "summary": []}
    assert result.affected_sessions == [memory.canary_raw.session_id]
    assert memory.holding("raw") == []
    assert memory.holding("summary") == [memory.canary_fact.id]
    assert memory.store.count(namespace=NS, tiers=["raw"]) == n_raw - 1
    # the surviving fact's provenance now points at a chunk that no longer exists
    assert memory.store.get(memory.canary_fact.source_ids) == []
    surfaces = _residue_surfaces(memory)
    assert "text_summary" in surfaces and "text_raw" not in surfaces


def test_raw_plus_resummarize_carries_the_secret_through_the_prior_summary(memory) -> None:
    n_facts = memory.store.count(namespace=NS, tiers=["summary"])
    misses = memory.cache.misses
    result = forget(memory.store, CANARY, "raw_plus_resummarize", namespace=NS, S=1,
                    summarizer=memory.summarizer, cache=memory.cache)
    assert result.steps == ["delete_raw", "resummarize"]
    assert result.deleted["raw"] == [memory.canary_raw.id]
    assert len(result.deleted["summary"]) == n_facts == len(result.created["summary"])
    assert memory.holding("raw") == []
    # What happens, and why: the rolling summarizer is given the prior fact list as
    # context and keeps the facts that are "still true" (the extractive one keeps every
    # prior fact, as an LLM told to update a list tends to). The canary fact was in the
    # prior summary, so it is written again although its raw turn is gone -- the study's
    # point that re-summarization reduces but does not remove residue.
    survivors = memory.store.find_containing(CANARY, namespace=NS, tiers=["summary"])
    assert [c.text for c in survivors] == [CANARY_SENTENCE]
    assert survivors[0].id in result.created["summary"]
    # Its new provenance is an attribution to the nearest *remaining* turn, which does not
    # hold the secret: a later provenance cascade from the secret's turn would miss it.
    sources = memory.store.get(survivors[0].source_ids)
    assert len(sources) == 1 and memory.canary_raw.id not in survivors[0].source_ids
    assert CANARY not in sources[0].text
    # re-summarizing sent the secret to the model once more (a new cache entry holds it)
    assert memory.cache.misses == misses + 1
    assert sum(contains_secret(p, CANARY) for p, _, _ in memory.cache.entries()) == 3


def test_full_purge_leaves_no_residue(memory) -> None:
    graph = build_forget_graph(memory.store, summarizer=memory.summarizer, caches=[memory.cache])
    state = graph.invoke({"secret": CANARY, "mode": "full_purge", "namespace": NS, "S": 1})
    result = state["result"]
    assert result.steps == ["delete_raw", "cascade", "purge_caches", "compact"]
    assert result.deleted["raw"] == [memory.canary_raw.id]
    # the cascade takes both facts derived from the planted turn, innocent or not
    assert sorted(result.deleted["summary"]) == sorted([memory.canary_fact.id, memory.sibling_fact.id])
    assert result.cache_entries_purged == 2 and len(memory.cache) == 0
    assert result.bytes_before > 0 and result.bytes_after > 0 and result.compaction_seconds >= 0
    assert memory.holding("raw") == [] and memory.holding("summary") == []
    assert _residue_surfaces(memory) == []


def test_tombstone_redaction_leaves_no_residue(memory) -> None:
    graph = build_forget_graph(memory.store, summarizer=memory.summarizer, caches=[memory.cache])
    state = graph.invoke({"secret": CANARY, "mode": "tombstone_redaction", "namespace": NS})
    result = state["result"]
    assert result.steps == ["redact", "tombstone", "purge_caches", "compact"]
    assert result.redacted == {"raw": [memory.canary_raw.id], "summary": [memory.canary_fact.id]}
    assert result.deleted == {"raw": [], "summary": []}
    # the turn is kept, redacted in place
    (raw,) = memory.store.get([memory.canary_raw.id])
    assert raw.text == memory.turns[6]["content"].replace(CANARY, "[REDACTED]")
    (fact,) = memory.store.get([memory.canary_fact.id])
    assert fact.text == "By the way, my private session token is [REDACTED]."
    tomb = result.tombstone
    assert sorted(tomb["chunk_ids"]) == sorted([memory.canary_raw.id, memory.canary_fact.id])
    assert not contains_secret(json.dumps(tomb), CANARY)
    assert memory.store.matches_tombstone(CANARY, tomb)
    assert result.cache_entries_purged == 2
    assert _residue_surfaces(memory) == []


def test_graph_and_plain_function_agree(tmp_path, session) -> None:
    a = Memory(tmp_path / "a", session)
    b = Memory(tmp_path / "b", session)
    plain = forget(a.store, CANARY, "raw_only", namespace=NS, S=1)
    graph = build_forget_graph(b.store).invoke(
        {"secret": CANARY, "mode": "raw_only", "namespace": NS, "S": 1})["result"]
    assert plain.to_dict() == graph.to_dict()
    for mode in ("none",):
        assert build_forget_graph(b.store).invoke(
            {"secret": CANARY, "mode": mode, "namespace": NS})["result"].steps == []


def test_bad_mode_and_secret_raise(memory) -> None:
    with pytest.raises(ValueError, match="unknown deletion mode 'erase'"):
        forget(memory.store, CANARY, "erase", namespace=NS)
    with pytest.raises(ValueError, match="unknown deletion mode 'erase'"):
        build_forget_graph(memory.store).invoke({"secret": CANARY, "mode": "erase", "namespace": NS})
    with pytest.raises(ValueError, match="non-empty string"):
        forget(memory.store, "  ", "raw_only", namespace=NS)
    assert memory.holding("raw") == [memory.canary_raw.id]  # nothing was touched


def test_a_forgets_re_read_is_the_one_residue_report(memory) -> None:
    """What a forget re-read, what memkit.residue scans and what a target's scan_all
    returns are one type, read back the one way (report[surface])."""
    from memkit.residue.chroma import scan
    from memkit.residue.report import ResidueReport, SurfaceResult

    result = forget(memory.store, CANARY, "raw_only", namespace=NS, S=1, cache=memory.cache)
    report = result.verification
    assert isinstance(report, ResidueReport) and isinstance(scan(memory.store, CANARY), ResidueReport)
    # the summary fact still holds the canary (the setup derived it from the raw turn)
    assert report["text_summary"].status == "checked"
    assert report["text_summary"].copies("<forgotten>") == 1
    assert report["text_raw"].copies("<forgotten>") == 0
    # raw_only does not compact: the files are not checked, so the re-read is never clean
    assert report["disk_sqlite"].status == "not_checked" and report["disk_sqlite"].reason
    assert not report.clean and report.verdict == "copies remain"
    assert all(isinstance(r, SurfaceResult) for r in report.results().values())
    # full_purge's re-read is clean: every surface checked or rebuilt, none holds a copy
    purged = forget(memory.store, CANARY, "full_purge", namespace=NS, S=1, cache=memory.cache).verification
    assert purged.clean, purged.to_dict()


def test_every_targets_scan_is_a_residue_report() -> None:
    """A target's surfaces scan into the same report: copies, n/a and unreadable."""
    from evaluators.targets.base import FunctionSurface, NotApplicable, scan_all
    from memkit.residue.report import ResidueReport, SurfaceResult

    def held(secrets):
        r = SurfaceResult("rows")
        r.add(secrets[0], "table t, row 3")
        return r

    def none_kept(secrets):
        raise NotApplicable("no cache")

    def unreadable(secrets):
        raise PermissionError("pg_wal: permission denied")

    report = scan_all([FunctionSurface("rows", held), FunctionSurface("cache", none_kept),
                       FunctionSurface("disk", unreadable)], [CANARY], "mine")
    assert isinstance(report, ResidueReport)
    assert report["rows"].copies(CANARY) == 1 and CANARY not in report["rows"].hits[CANARY][0]
    assert report["cache"].status == "n/a" and report["disk"].status == "not_checked"
    assert "permission denied" in report["disk"].reason and not report.clean
