"""Forget a user, not a canary and derived copies anywhere, values of any type,
the redacting design held to the matcher.

Users' turns are written as raw chunks with summaries derived from them (``source_ids``)
and an LLM-cache entry whose prompt quotes one turn. Verdicts are checked against what
plain ``sqlite3`` and ``open`` read back from the store's files, not only memkit's scan.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.outputs import Generation

from graphs.forget import build_forget_graph, forget, forget_user, user_namespaces
from memkit.residue.chroma import scan
from memkit.residue.fingerprint import NGRAM_N, fingerprint, load_turns
from memkit.store.cache import LLMCache
from memkit.store.langgraph import MemkitStore
from memkit.store.tiered import Chunk, TieredMemoryStore

ALICE = [
    {"role": "user", "content": "My email is alice.walker@example.org and my cat Pumpernickel hates thunderstorms."},
    {"role": "assistant", "content": "Noted: your cat dislikes storms."},
    {"role": "user", "content": "Call me at 415-555-0199 about the sourdough starter named Bubbles."},
]
BOB = [
    {"role": "user", "content": "My cat hates thunderstorms too, and I bake bread on Sundays."},
    {"role": "user", "content": "Bob here: my dog Rex chews the garden hose every single morning."},
]
CANARY = "XQ7-VIOLET-3829"


def _write(store: TieredMemoryStore, user: str, turns: list[dict], canary: str | None = None) -> None:
    chunks, sources = [], []
    for i, t in enumerate(turns):
        if t["role"] != "user":
            continue
        text = t["content"] + (f" My session token is {canary}." if canary and i == 0 else "")
        cid = f"raw-{user}-{i}"
        chunks.append(Chunk(id=cid, text=text, tier="raw", namespace=user, session_id=f"s-{user}", turn_index=i))
        sources.append(cid)
    # a summary in the user's namespace and a profile line in a shared namespace, both derived
    first = chunks[0].text
    chunks.append(Chunk(id=f"sum-{user}", text=first, tier="summary", namespace=user,
                        session_id=f"s-{user}", turn_index=-1, source_ids=sources))
    chunks.append(Chunk(id=f"profile-{user}", text=f"Profile: {first}", tier="summary", namespace="profiles",
                        session_id=f"s-{user}", turn_index=-1, source_ids=[sources[0]]))
    store.add(chunks)


@pytest.fixture()
def two_users(tmp_path, embedder):
    store = TieredMemoryStore(tmp_path / "store", embedder=embedder)
    _write(store, "alice", ALICE, canary=CANARY)
    _write(store, "bob", BOB)
    cache = LLMCache(tmp_path / "llm_cache.sqlite")
    cache.update(json.dumps([{"content": ALICE[2]["content"]}]), "model", [Generation(text="ok")])
    cache.update(json.dumps([{"content": BOB[1]["content"]}]), "model", [Generation(text="ok")])
    fp = fingerprint(ALICE, others=BOB, canaries=[CANARY])
    yield store, cache, fp, tmp_path
    store.close()


def _raw_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


# --------------------------------------------------------------------------- fingerprint


def test_fingerprint_holds_canary_pii_and_distinctive_phrases():
    fp = fingerprint(ALICE, others=BOB, canaries=[CANARY])
    assert fp[0] == CANARY
    assert "alice.walker@example.org" in fp
    assert any("555" in s and "0199" in s for s in fp)  # the phone number (scrubadub)
    assert "named bubbles" in " ".join(fp)  # a phrase only Alice wrote
    assert "my cat hates thunderstorms" not in fp  # Bob wrote it too
    assert "noted your cat dislikes" not in fp  # the assistant's words are not Alice's
    assert all(len(g.split()) == NGRAM_N for g in fp[3:] if " " in g and "@" not in g)
    assert len(fp) == len(set(fp))
    no_phrases = fingerprint(ALICE, others=BOB, cap=0)
    assert "alice.walker@example.org" in no_phrases and not any(len(s.split()) == NGRAM_N for s in no_phrases)


def test_load_turns_reads_users_and_names_bad_lines(tmp_path):
    path = tmp_path / "turns.jsonl"
    rows = [{**t, "user_id": "alice"} for t in ALICE] + [{**t, "user_id": "bob"} for t in BOB]
    rows.append({"canary": CANARY, "user_id": "alice"})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    mine, theirs, canaries = load_turns(path, "alice")
    assert len(mine) == 3 and len(theirs) == 2 and canaries == [CANARY]
    with pytest.raises(ValueError, match="several users"):
        load_turns(path)
    path.write_text('{"content": "x"}\nnot json\n')
    with pytest.raises(ValueError, match=r"turns.jsonl:2"):
        load_turns(path)


# --------------------------------------------------------------------------- forget_user


def test_forget_user_full_purge_leaves_no_fingerprint_anywhere(two_users):
    store, cache, fp, root = two_users
    assert user_namespaces(store, "alice") == [("alice",)]
    before = scan(store, secrets=fp, cache_paths=[cache.path], check_embeddings=False)
    assert before.total > 0
    result = forget_user(store, "alice", "full_purge", fingerprints=fp, cache=cache)
    assert result.remaining == {} and "compact" in result.steps
    assert "profile-alice" in result.deleted["summary"]  # derived in another namespace
    report = scan(store, secrets=fp, cache_paths=[cache.path], check_embeddings=False)
    assert report.total == 0, report.counts()
    assert all(row["total"] == 0 for row in report.per_secret())
    # independently of memkit: the literal strings are nowhere in the files
    data = _raw_bytes(Path(store.path)) + Path(cache.path).read_bytes()
    for s in (CANARY, "alice.walker@example.org", "Pumpernickel", "Bubbles"):
        assert s.encode() not in data, s
    # Bob is untouched
    assert {c.id for c in store.chunks(namespace="bob")} == {"raw-bob-0", "raw-bob-1", "sum-bob"}
    con = sqlite3.connect(cache.path)
    assert con.execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0] == 1
    con.close()


def test_forget_user_raw_only_reports_what_remains_by_surface(two_users):
    store, cache, fp, _ = two_users
    result = forget_user(store, "alice", "raw_only", fingerprints=fp, cache=cache)
    # the summaries (hers and the shared profile) and the cache still hold her data
    assert result.remaining.get("text_summary") == 2 and result.remaining.get("cache") == 1
    report = scan(store, secrets=fp, cache_paths=[cache.path], check_embeddings=False)
    left = {r["secret"]: r["counts"] for r in report.per_secret() if r["total"]}
    assert left and all("text_summary" in c or "cache" in c or c for c in left.values())
    assert report.counts()["text_raw"] == 0 and report.counts()["text_summary"] >= 2
    assert CANARY not in report.to_json()  # secrets are masked in the report


def test_forget_user_through_the_graph(two_users):
    store, cache, fp, _ = two_users
    graph = build_forget_graph(store, caches=[cache])
    out = graph.invoke({"mode": "full_purge", "user_id": "alice", "namespaces": ["alice"],
                        "fingerprints": fp, "secret": ""})
    assert out["result"].steps == ["delete_user_raw", "delete_user_all", "purge_user_caches", "compact"]
    assert out["result"].remaining == {}


def test_residue_cli_takes_a_secrets_file_and_user_turns(two_users, tmp_path):
    store, cache, fp, _ = two_users
    secrets = tmp_path / "secrets.txt"
    secrets.write_text(f"{CANARY}\nNOT-PRESENT-1234\n")
    cmd = [sys.executable, "-m", "evaluators.cli", "residue", str(store.path), "--secrets-file", str(secrets),
           "--json", "--no-embeddings"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    rows = json.loads(run.stdout)["per_secret"]
    assert rows[0]["total"] > 0 and rows[1]["total"] == 0 and CANARY not in run.stdout
    turns = tmp_path / "turns.jsonl"
    turns.write_text("\n".join(json.dumps({**t, "user_id": "alice"}) for t in ALICE) + "\n"
                     + "\n".join(json.dumps({**t, "user_id": "bob"}) for t in BOB) + "\n")
    forget_user(store, "alice", "full_purge", fingerprints=fp, cache=cache)
    run = subprocess.run([sys.executable, "-m", "evaluators.cli", "residue", str(store.path), "--user-turns",
                          str(turns), "--user", "alice", "--no-embeddings"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, run.stdout + run.stderr  # clean text, stale check skipped
    run = subprocess.run([sys.executable, "-m", "evaluators.cli", "residue", str(store.path), CANARY,
                          "--secrets-file", str(secrets)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("copy", ["alice token XQ7-VIOLET-3829", "alice token xq7 violet 3829"])
def test_full_purge_cascades_to_derived_chunks_in_other_namespaces(tmp_path, embedder, copy):
    store = TieredMemoryStore(tmp_path / "store", embedder=embedder)
    store.add([
        Chunk(id="raw-a", text=copy, tier="raw", namespace="alice", session_id="s", turn_index=0),
        Chunk(id="profile-a", text=f"profile: {copy}", tier="summary", namespace="profiles",
              session_id="s", turn_index=-1, source_ids=["raw-a"]),
    ])
    result = forget(store, CANARY, "full_purge", namespace="alice")
    assert "profile-a" in result.deleted["summary"] and result.remaining == {}
    assert scan(store, CANARY, check_embeddings=False).total == 0
    con = sqlite3.connect(Path(store.path) / "chroma.sqlite3")
    assert not any(CANARY.split("-")[1].lower() in str(r).lower()
                   for r in con.execute("SELECT * FROM embedding_fulltext_search"))
    con.close()
    store.close()


def test_raw_only_reports_a_derived_copy_in_another_namespace(tmp_path, embedder):
    store = TieredMemoryStore(tmp_path / "store", embedder=embedder)
    store.add([
        Chunk(id="raw-a", text=f"token {CANARY}", tier="raw", namespace="alice", session_id="s", turn_index=0),
        Chunk(id="profile-a", text=f"profile: token {CANARY}", tier="summary", namespace="profiles",
              session_id="s", turn_index=-1, source_ids=["raw-a"]),
    ])
    result = forget(store, CANARY, "raw_only", namespace="alice")
    assert result.remaining == {"text_summary": 1} and "text_summary" not in result.verified
    store.close()


@pytest.mark.parametrize("value", [{"pin": 44107731}, {"pins": [1, 44107731]}, {"a": {"pin": 44107731.0}},
                                   {"pin": "44107731"}])
def test_tombstone_redaction_redacts_numbers_and_keeps_the_shape(embedder, value):
    store = MemkitStore(TieredMemoryStore(embedder=embedder))
    store.put(("users", "u1"), "k", value)
    store.put(("users", "u1"), "other", {"note": "keep me", "n": 7})
    forget(store.tiered, "44107731", "tombstone_redaction", namespace=None)
    item = store.get(("users", "u1"), "k").value
    assert json.dumps(item).count("44107731") == 0
    assert item.keys() == value.keys()  # same shape
    flat = json.dumps(item)
    assert "[REDACTED]" in flat
    assert store.get(("users", "u1"), "other").value == {"note": "keep me", "n": 7}
    assert scan(store.tiered, "44107731", check_embeddings=False).total == 0


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "write to alice.walker@\u200bexample.org please",         # zero-width space after @
    "write to alice.walker\u2060@example.org please",         # word joiner before @
    "write to alice.walker@example.org please",               # plain
])
def test_redacting_design_leaves_no_copy_by_the_matcher(text):
    from graphs.designs import scrub_text
    from memkit.scan.matching import contains_secret

    out = scrub_text(text)
    assert not contains_secret(out, "alice.walker@example.org"), out
    assert "{{EMAIL}}" in out


# --------------------------------------------------------------------------- audit, user scope


def test_audit_reports_user_erasure(embedder):
    from evaluators.audit import audit
    from graphs.memory import build_read_graph, write_session

    def agent(store):
        read = build_read_graph(store)

        def ask(text, user_id):
            return read.invoke({"query": text, "namespace": user_id, "k": 3, "S": 0})["response"]

        def feed(turns, session_id, date, user_id):
            write_session(store, user_id, session_id, date, turns, S=0)

        return ask, feed

    reports = {}
    for mode in ("full_purge",):
        store = TieredMemoryStore(embedder=embedder)
        ask, feed = agent(store)
        res = audit(ask, feed=feed, forget_mode=mode, forget_scope="user", store=store, n=2, seed=3,
                    n_resamples=50, fingerprint_cap=10)
        reports[mode] = res
        store.close()
    full = reports["full_purge"].user_erasure
    assert full["remaining_fraction"] == 0.0 and full["by_surface"] == {}
    assert all(u["fingerprints"] > 1 for u in full["per_user"])
    assert "User erasure" in reports["full_purge"].report
    assert reports["full_purge"].to_dict()["user_erasure"]["ci"] == [0.0, 0.0]
    with pytest.raises(ValueError, match="forget_scope"):
        audit(lambda q, u: "", feed=lambda t, s, d, u: None, forget_scope="everything", n=1)
