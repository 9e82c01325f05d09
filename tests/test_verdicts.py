"""Forget verdicts that hold: one secret matcher, coherent search, forgets
that finish or refuse. Copies are planted in ways the code under test did not choose:
other encodings (Unicode dashes, zero-width characters, JSON escapes written by the
json module and by LangChain), other handles, another process, and a real
``chroma run`` server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from graphs.forget import DISK_SURFACES, forget
from memkit.residue.chroma import scan
from memkit.scan.matching import contains_secret, matcher, redact_json, redact_text, skeleton
from memkit.store.cache import LLMCache
from memkit.store.langgraph import MemkitStore
from memkit.store.tiered import Chunk, StoreError, TieredMemoryStore

SECRET = "XQ7-VIOLET-3829"


def raw(ns: str, session: str, i: int, text: str) -> Chunk:
    return Chunk(id=f"raw-{ns}-{session}-{i}", text=text, tier="raw", namespace=ns, session_id=session,
                 turn_index=i)


def summary(ns: str, session: str, text: str, sources: list[str]) -> Chunk:
    return Chunk(id=f"summary-{ns}-{session}", text=text, tier="summary", namespace=ns,
                 session_id=session, turn_index=-1, source_ids=sources)


# --------------------------------------------------------------------------- the matcher

# Each spelling below is written by hand; the comment says which class it exercises.
SPELLINGS = [
    "XQ7-VIOLET-3829",                          # verbatim
    "xq7 violet 3829",                          # case, spaces
    "XQ7\u2013VIOLET\u20133829",                # en dash U+2013
    "XQ7\u2010VIOLET\u20153829",                # hyphen U+2010, horizontal bar U+2015
    "XQ7\u2212VIOLET\u00ad3829",                # minus sign, soft hyphen
    "XQ7-VIO\u200bLET-3829",                    # zero-width space inside a run
    "X\u200cQ7\u200d-\u2060VIOLET\ufeff-3829",  # ZWNJ, ZWJ, word joiner, BOM
    "\uff38\uff31\uff17\uff0d\uff36\uff29\uff2f\uff2c\uff25\uff34\uff0d\uff13\uff18\uff12\uff19",  # fullwidth
    "XQ7\tVIOLET\n3829",                        # tab, newline
    "XQ7\u00a0VIOLET\u30003829",                # no-break space, ideographic space
    "XQ7.VIOLET/3829",                          # dot, slash
    "XQ7_VIOLET_3829",                          # underscore
    "XQ7VIOLET3829",                            # no separator at all
    "**XQ7\\-VIOLET\\-3829**",                  # markdown escapes and emphasis
    "XQ7&nbsp;VIOLET&#45;3829",                 # HTML entities
    "XQ7%2DVIOLET%2D3829",                      # percent-encoding
    "XQ7<b>VIOLET</b>3829",                     # HTML tags
    "XQ7\ufe0f-VIOLET\u3164-3829",              # variation selector, Hangul filler
    "X\u0301Q7-VIOLET-3829",                    # a combining mark (zalgo text)
]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_class_is_the_same_secret(spelling):
    m = matcher(SECRET)
    assert m.search(f"my private session token is {spelling}, keep it")
    assert m.bytes.search(f"...{spelling}...".encode())
    redacted = redact_text(f"a {spelling} b", SECRET)
    assert redacted.replace("*", "") == "a [REDACTED] b" and not m.search(redacted)


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_json_escaped_copies_are_found_and_redaction_keeps_json_valid(spelling, ensure_ascii):
    doc = json.dumps({"content": f"token {spelling}!", "n": 1}, ensure_ascii=ensure_ascii)
    assert contains_secret(doc, SECRET)
    assert matcher(SECRET).bytes.search(doc.encode())
    nested = json.dumps({"prompt": doc}, ensure_ascii=ensure_ascii)  # JSON in JSON: \\n, \\u2013
    assert contains_secret(nested, SECRET) and matcher(SECRET).search(nested)
    scrubbed = redact_text(nested, SECRET)
    content = json.loads(json.loads(scrubbed)["prompt"])["content"]
    assert content.replace("*", "") == "token [REDACTED]!" and not matcher(SECRET).search(scrubbed)


def test_surrogate_pair_escapes_and_accents():
    secret = "\U0001d417Q7-Zo\u00eb-12"  # mathematical bold X, an accented letter
    assert skeleton(secret) == "xq7zoë12"
    m = matcher(secret)
    assert m.search(json.dumps("xq7 ZOE\u0308 12"))            # NFD accent, escaped \\u0308
    assert m.search(json.dumps("X\u200bQ7-zo\u00eb-12"))       # plain X, escaped ZWSP
    assert m.search(json.dumps(secret))                        # \\ud835\\udc17 surrogate pair
    assert not m.search("xq7 zoe 12")                          # an accent is not decoration


@pytest.mark.parametrize(("secret", "text"), [
    ("pa\\ss-7731", "pw pa\\ss-7731"),            # a backslash inside the secret
    ('say "hi" 4417', 'x say "hi" 4417'),          # quotes inside the secret
    ("STRASSE-99", "lives at Stra\u00dfe-99"),     # one character for two: ß for SS
    ("Stra\u00dfe-99", "lives at STRASSE-99"),
    ("\ufb01re-7731", "\ufb01re-7731"),               # a ligature in the secret, verbatim
    ("\ufb01re-7731", "FIRE 7731"),
    ("fire-7731", "\ufb01re-7731"),
    ("\u0130STANBUL-42", "pw \u0130stanbul-42"),     # dotted capital I
    ("KIWI-42", "K\u0130W\u0130-42"),
    ("XII-7731", "\u216b-7731"),                     # Roman numeral twelve
])
def test_secrets_spelled_with_characters_that_fold_to_several(secret, text):
    assert matcher(secret).search(text)
    assert not matcher(secret).search(redact_text(text, secret))


def test_redaction_never_reassembles_the_secret():
    for replacement in ("", "***", "-"):
        out = redact_text("XQ7-VIOLXQ7-VIOLET-3829ET-3829", SECRET, replacement)
        assert not matcher(SECRET).search(out), (replacement, out)


def test_near_misses_are_not_the_secret():
    m = matcher(SECRET)
    for text in ["XQ7-VIOLET-3828", "XQ7-VIOLENT-3829", "XQ7-VIOLE-3829", "XQ7-VIOLET-382"]:
        assert not m.search(text), text


def test_redact_json_redacts_decoded_values_and_keys():
    value = {"content": "my token XQ7\nVIOLET-3829", "tags": ["xq7\u2013violet\u20133829"],
             "XQ7-VIOLET-3829": 1}
    out = redact_json(value, SECRET)
    assert out == {"content": "my token [REDACTED]", "tags": ["[REDACTED]"], "[REDACTED]": 1}
    with pytest.raises(ValueError, match="replacement"):
        redact_json(value, SECRET, replacement="xq7violet3829")


_ALNUM = st.sampled_from(list("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789\u00e9\u00fc\u00c5\u00df"))
_SEPS = st.sampled_from(["-", "\u2013", "\u2014", "\u2212", " ", "\u00a0", "\u200b", "\u2060", "\ufeff", "\u00ad",
                         "\uff0d", ".", "/", "_", "\n", "\t", ""])


@st.composite
def secrets_and_copies(draw):
    runs = draw(st.lists(st.text(_ALNUM, min_size=2, max_size=6), min_size=2, max_size=4))
    secret = "-".join(runs)
    # a secret worth auditing has some entropy: "00-00" matches by chance in binary files
    assume(len(set(skeleton(secret))) >= 4 and len(skeleton(secret)) >= 6)
    seps = [draw(_SEPS) for _ in runs[1:]]
    copy = runs[0] + "".join(s + r for s, r in zip(seps, runs[1:], strict=True))
    form = draw(st.sampled_from(["NFC", "NFD", "NFKC", "NFKD"]))
    case = draw(st.sampled_from([str.upper, str.lower, lambda x: x]))
    copy = unicodedata.normalize(form, case(copy))
    placement = draw(st.sampled_from(["plain", "json", "json_ascii", "json_in_json"]))
    text = f"my private session token is {copy} ok"
    if placement == "json":
        text = json.dumps({"content": text}, ensure_ascii=False)
    elif placement == "json_ascii":
        text = json.dumps({"content": text})
    elif placement == "json_in_json":
        text = json.dumps({"prompt": json.dumps([text])})
    return secret, text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secrets_and_copies())
def test_property_every_planted_copy_is_found_and_redacted(case):
    secret, text = case
    m = matcher(secret)
    assert m.search(text), (secret, text)
    assert m.bytes.search(text.encode("utf-8")), (secret, text)
    assert not m.search(redact_text(text, secret)), (secret, text)


# --------------------------------------------------------------------------- forget on every surface


def _planted_store(path: Path, embedder, copy: str) -> TieredMemoryStore:
    store = TieredMemoryStore(path, embedder=embedder)
    r = raw("u1", "s1", 0, f"my private session token is {copy}")
    store.add([r, raw("u1", "s1", 1, "I walk my dog every morning.")])
    store.add([summary("u1", "s1", f"The user's token is {copy}.", [r.id])])
    return store


@pytest.mark.parametrize("mode", ["full_purge", "tombstone_redaction"])
@pytest.mark.parametrize("copy", ["XQ7\u2013VIOLET\u20133829", "XQ7-VIO\u200bLET-3829"],
                         ids=["en-dash", "zero-width"])
def test_lookalike_copies_are_reported_then_forgotten(tmp_path, embedder, copy, mode):
    store = _planted_store(tmp_path / "db", embedder, copy)
    before = scan(store, SECRET)
    assert before.counts()["text_raw"] == 1 and before.counts()["text_summary"] == 1
    assert before.counts()["disk_sqlite"] > 0
    result = forget(store, SECRET, mode, namespace="u1")
    assert set(result.verified) >= {"text_raw", "text_summary", "metadata"} and not result.remaining
    assert result.rewritten == list(DISK_SURFACES) and not result.unverified
    store.close()
    after = scan(tmp_path / "db", SECRET)
    assert after.clean, {k: v for k, v in after.counts().items() if v}


def _memkit_item_store(path: Path, embedder) -> MemkitStore:
    tiered = TieredMemoryStore(path, embedder=embedder)
    store = MemkitStore(tiered, index={"fields": ["content"]})
    store.put(("memories", "u1"), "m1", {"content": "my token is XQ7\nVIOLET-3829", "kind": "fact"})
    store.put(("memories", "u1"), "m2", {"content": "I like hiking", "kind": "fact"})
    return store


@pytest.mark.parametrize("mode", ["full_purge", "tombstone_redaction"])
def test_secret_split_by_a_newline_inside_a_stored_json_value(tmp_path, embedder, mode):
    store = _memkit_item_store(tmp_path / "db", embedder)
    before = scan(store.tiered, SECRET)
    assert before.counts()["text_raw"] == 1  # the indexed content
    assert before.counts()["metadata"] >= 1  # the stored value, as JSON with a \n escape
    forget(store.tiered, SECRET, mode, namespace=None)
    if mode == "tombstone_redaction":
        item = store.get(("memories", "u1"), "m1")
        assert item is not None and item.value == {"content": "my token is [REDACTED]", "kind": "fact"}
    assert store.get(("memories", "u1"), "m2").value["content"] == "I like hiking"
    store.tiered.close()
    after = scan(tmp_path / "db", SECRET)
    assert after.clean, {k: v for k, v in after.counts().items() if v}


def test_accented_secret_in_a_langchain_llm_cache(tmp_path, embedder):
    """LangChain serialises the prompt itself (with its own JSON escaping); the cache,
    the scanner and the purge must all see the secret in it."""
    from graphs.nodes import make_responder
    from memkit.models.chat import chat_model

    secret = "ZO\u00cb-Q7-4821"
    cache = LLMCache(tmp_path / "llm.sqlite")
    respond = make_responder(chat_model("extractive"), cache=cache)
    memory = raw("u1", "s1", 0, "Remember: my private session token is zo\u00eb\u2013q7\u20134821.")
    respond("What is my session token?", [memory])
    assert len(cache) == 1
    store = _planted_store(tmp_path / "db", embedder, "nothing here")
    before = scan(store, secret, cache_paths=[cache.path])
    assert before.counts()["cache"] >= 1 and before.counts()["cache_disk"] >= 1
    result = forget(store, secret, "full_purge", namespace="u1", cache=cache)
    assert result.cache_entries_purged == 1 and "cache" in result.verified
    store.close()
    assert scan(tmp_path / "db", secret, cache_paths=[cache.path]).clean


def test_records_without_documents_are_listed_as_not_checked(tmp_path, embedder):
    """Another memory layer keeps its text in metadata: the stale-embedding check cannot
    compare those vectors with their text, and the scan must say so, not count 0."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(tmp_path / "db"), settings=Settings(anonymized_telemetry=False))
    col = client.create_collection("mem0")
    col.add(ids=["a"], embeddings=embedder.encode(["I like tea"]), metadatas=[{"data": "I like tea"}])
    client.close()
    report = scan(tmp_path / "db", SECRET)
    # (chromadb's own writer can copy heap bytes of this process, which holds the secret,
    # into HNSW slack: copies may be found, but "clean" must never be said.)
    assert not report.clean and report.verdict in ("incomplete", "copies remain")
    assert "stale_embedding" in report.unchecked and "no document" in report.unchecked["stale_embedding"][0]


# --------------------------------------------------------------------------- coherent search


def test_search_never_returns_what_another_handle_deleted(tmp_path, embedder):
    path = tmp_path / "db"
    a = TieredMemoryStore(path, embedder=embedder)
    a.add([raw("u1", "s1", 0, f"my token is {SECRET}"), raw("u1", "s1", 1, "I walk my dog")])
    assert a.search("what is my token", 1, namespace="u1")[0].id == "raw-u1-s1-0"
    b = TieredMemoryStore(path, embedder=embedder)  # a second object, the same directory
    b.delete(["raw-u1-s1-0"])
    assert a.get(["raw-u1-s1-0"]) == []
    assert [c.id for c in a.search("what is my token", 5, namespace="u1")] == ["raw-u1-s1-1"]
    # A write through the raw chroma collection of the first handle.
    a.add([raw("u1", "s1", 2, f"again {SECRET}")])
    assert a.search("token", 1, namespace="u1")[0].id == "raw-u1-s1-2"
    a.collection.delete(ids=["raw-u1-s1-2"])
    assert all(SECRET not in c.text for c in a.search("token", 5, namespace="u1"))
    b.close()
    a.close()


def test_search_never_returns_what_another_process_deleted(tmp_path, embedder):
    path = tmp_path / "db"
    a = TieredMemoryStore(path, embedder=embedder)
    a.add([raw("u1", "s1", 0, f"my token is {SECRET}"), raw("u1", "s1", 1, "I walk my dog")])
    assert a.search("token", 2, namespace="u1")[0].id == "raw-u1-s1-0"
    code = (
        "import chromadb; from chromadb.config import Settings;"
        f"c = chromadb.PersistentClient(path={str(path)!r}, settings=Settings(anonymized_telemetry=False));"
        "c.get_collection('memkit').delete(ids=['raw-u1-s1-0']); c.close()"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120,
                   env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    assert [c.id for c in a.search("token", 5, namespace="u1")] == ["raw-u1-s1-1"]
    a.close()


def test_one_store_object_per_directory(tmp_path, embedder):
    a = TieredMemoryStore.open(tmp_path / "db", embedder=embedder)
    assert TieredMemoryStore.open(tmp_path / "db" / ".." / "db") is a
    a.close()
    b = TieredMemoryStore.open(tmp_path / "db", embedder=embedder)
    assert b is not a
    b.close()


# --------------------------------------------------------------------------- a real chroma server


@pytest.fixture
def chroma_server(tmp_path, free_port, serve):
    """A real `chroma run` server process on 127.0.0.1 (chromadb's own CLI)."""
    exe = Path(sys.executable).with_name("chroma")
    port = free_port()
    with serve([str(exe), "run", "--path", str(tmp_path / "server"), "--host", "127.0.0.1",
                "--port", str(port)], port, what="chroma run", timeout=60, log=tmp_path / "chroma.log",
               env={**os.environ, "ANONYMIZED_TELEMETRY": "False"}):
        yield port, tmp_path / "server"


@pytest.mark.slow
def test_forget_on_a_chroma_server_refuses_or_reports_never_half(chroma_server, embedder):
    port, server_dir = chroma_server
    store = TieredMemoryStore.http("127.0.0.1", port, collection="srv", embedder=embedder)
    r = raw("u1", "s1", 0, f"my private session token is {SECRET}")
    store.add([r, raw("u1", "s1", 1, "I walk my dog")])
    store.add([summary("u1", "s1", f"The token is {SECRET}.", [r.id])])
    for mode in ("full_purge", "tombstone_redaction"):
        with pytest.raises(StoreError, match="refused before changing anything"):
            forget(store, SECRET, mode, namespace="u1")
        assert store.count() == 3  # untouched
        assert any(SECRET in c.text for c in store.search("token", 3, tiers=("raw", "summary"), namespace="u1"))
    result = forget(store, SECRET, "full_purge", namespace="u1", unverified_ok=True)
    assert "compact" not in result.steps
    assert set(result.unverified) == set(DISK_SURFACES) and "server" in result.unverified["disk_sqlite"]
    assert {"text_raw", "text_summary", "metadata"} <= set(result.verified) and not result.rewritten
    assert all(SECRET not in c.text for c in store.search("token", 5, tiers=("raw", "summary"), namespace="u1"))
    report = scan(store, SECRET)
    assert report.total == 0 and report.verdict == "incomplete"
    # the server's files, and the leftover vectors in them, are out of reach: not checked
    assert set(report.unchecked) == set(DISK_SURFACES) | {"stale_vector"}
    # What the server keeps on its own disk is what the verdict could not promise.
    assert scan(server_dir, SECRET, check_embeddings=False).total > 0


# --------------------------------------------------------------------------- HNSW files at rest


@pytest.mark.slow
def test_stress_full_purge_leaves_no_copy_even_with_the_secret_in_the_heap(tmp_path, embedder):
    """40 cycles of write, search, forget with full_purge and close, while this process
    keeps many copies of the secret alive in its heap (chroma and hnswlib write
    uninitialised memory into HNSW file slack). After every cycle an independent byte
    search (the secret's bytes, any case; not memkit's matcher) finds nothing in any
    file; every 10th cycle memkit's full scan (every surface) is clean too. (Without
    the zeroing of HNSW slack the heap's copies reach the files in the first cycles:
    40 cycles show the fault; 200 only made the test five times longer.)"""
    alive = [f"my private session token is {SECRET} #{i}" for i in range(500)]  # held in the heap
    needles = [SECRET.encode(), SECRET.lower().encode(), b"VIOLET", b"violet"]
    for cycle in range(40):
        path = tmp_path / f"store{cycle}"
        store = TieredMemoryStore(path, embedder=embedder)
        turns = [f"turn {i} of cycle {cycle}: I went hiking near the lake" for i in range(8)]
        turns[cycle % 8] = f"turn {cycle % 8} of cycle {cycle}: my token is {SECRET}"
        store.add([raw("u1", f"s{cycle}", i, t) for i, t in enumerate(turns)])
        store.search(alive[cycle], 3, namespace="u1")
        forget(store, SECRET, "full_purge", namespace="u1")
        store.close()
        for f in path.rglob("*"):
            if f.is_file():
                data = f.read_bytes()
                assert not any(n in data for n in needles), (cycle, f.name)
        if cycle % 10 == 9:
            report = scan(path, SECRET)
            assert report.clean, (cycle, {k: v for k, v in report.counts().items() if v})
        shutil.rmtree(path)
    assert len(alive) == 500


def test_copies_in_hnsw_slack_are_counted_and_named_as_heap_bytes(tmp_path):
    """chromadb's own client (another process) writes an HNSW index of 8 elements; the
    secret is then written into one element's vector bytes and into the bytes past the
    elements (where hnswlib leaves heap memory). Both are copies; only the second is named
    as bytes past the elements (offsets from hnswlib's header layout, read here)."""
    import struct

    code = (
        "import chromadb\n"
        "from chromadb.config import Settings\n"
        f"c = chromadb.PersistentClient(path={str(tmp_path / 'db')!r}, settings=Settings(anonymized_telemetry=False))\n"
        "col = c.create_collection('notes', embedding_function=None,"
        " configuration={'hnsw': {'sync_threshold': 2, 'batch_size': 2}})\n"
        "col.add(ids=[f'r{i}' for i in range(8)], embeddings=[[float(i + 1)] * 64 for i in range(8)],"
        " documents=[f'note {i}' for i in range(8)])\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    [header] = [h for h in (tmp_path / "db").rglob("header.bin")
                if struct.unpack_from("<IQQQQ", h.read_bytes())[3] > 0]
    _, _, capacity, count, size = struct.unpack_from("<IQQQQ", header.read_bytes())
    data = header.with_name("data_level0.bin")
    raw = bytearray(data.read_bytes())
    assert count == 8 and len(raw) > count * size
    inside, past = 2 * size + 16, count * size + 40
    for at in (inside, past):
        raw[at:at + len(SECRET)] = SECRET.encode()
    data.write_bytes(bytes(raw))
    report = scan(tmp_path / "db", SECRET, check_embeddings=False)
    name = f"{header.parent.name}/data_level0.bin"
    assert {h.location for h in report.surfaces["disk_hnsw"]} == {f"{name}@{inside}", f"{name}@{past}"}
    [note] = [n for n in report.notes if "past the index's elements" in n]
    assert note.startswith(f"{name}: 1 of its copies")


# --------------------------------------------------------------------------- copies in odd places


@pytest.mark.parametrize("where", ["numeric metadata", "metadata key", "source_ids", "namespace",
                                   "backslash secret"])
def test_full_purge_finds_copies_outside_the_text(tmp_path, embedder, where):
    secret = {"numeric metadata": "4417-2231-9988", "backslash secret": "pa\\ss-7731"}.get(where, SECRET)
    chunk = {
        "numeric metadata": Chunk(id="c2", text="payment details", tier="raw", namespace="u1",
                                  session_id="s1", turn_index=1, extra={"card": 441722319988}),
        "metadata key": Chunk(id="c2", text="hello", tier="raw", namespace="u1", session_id="s1",
                              turn_index=1, extra={SECRET: "x"}),
        "source_ids": Chunk(id="c2", text="a summary", tier="summary", namespace="u1", session_id="s1",
                            turn_index=-1, source_ids=[f"note-{SECRET}"]),
        "namespace": Chunk(id="c2", text="hello", tier="raw", namespace=f"user-{SECRET}", session_id="s1",
                           turn_index=1),
        "backslash secret": Chunk(id="c2", text="hello", tier="raw", namespace="u1", session_id="s1",
                                  turn_index=1, extra={"note": f"pw {secret}"}),
    }[where]
    store = TieredMemoryStore(tmp_path / "db", embedder=embedder)
    store.add([raw("u1", "s1", 0, "I walk my dog"), chunk])
    assert scan(store, secret).counts()["metadata"] >= 1
    result = forget(store, secret, "full_purge", namespace=None)
    assert "c2" in [i for ids in result.deleted.values() for i in ids] and not result.remaining
    store.close()
    after = scan(tmp_path / "db", secret)
    assert after.clean, {k: v for k, v in after.counts().items() if v}


def test_tombstone_redaction_rewrites_keys_numbers_and_sources(tmp_path, embedder):
    store = TieredMemoryStore(tmp_path / "db", embedder=embedder)
    store.add([Chunk(id="c1", text="hello", tier="summary", namespace="u1", session_id="s1", turn_index=-1,
                     source_ids=[f"n-{SECRET}"], extra={SECRET: "k", "n": 73829})])
    forget(store, "XQ7-VIOLET-73829".replace("XQ7-VIOLET-", ""), "tombstone_redaction", namespace="u1")
    c = store.get(["c1"])[0]
    assert c.extra["n"] == "[REDACTED]"
    forget(store, SECRET, "tombstone_redaction", namespace="u1")
    c = store.get(["c1"])[0]
    assert c.source_ids == ["n-[REDACTED]"] and "[REDACTED]" in c.extra and SECRET not in c.extra
    store.close()
    assert scan(tmp_path / "db", SECRET).clean


def test_forget_does_not_call_other_collections_clean(tmp_path, embedder):
    store = TieredMemoryStore(tmp_path / "db", embedder=embedder)
    store.add([raw("u1", "s1", 0, f"pw {SECRET}")])
    other = store.client.get_or_create_collection("notes", embedding_function=None)
    other.add(ids=["n1"], documents=[f"pw {SECRET}"], embeddings=[[0.1] * 384])
    result = forget(store, SECRET, "full_purge", namespace=None)
    assert result.remaining == {"text_other": 1} and "text_other" not in result.verified
    store.close()
    assert scan(tmp_path / "db", SECRET).counts()["text_other"] == 1


def test_in_memory_search_after_a_delete_through_the_client(embedder):
    store = TieredMemoryStore(embedder=embedder)
    store.add([raw("u1", "s1", 0, f"the cat has token {SECRET}"), raw("u1", "s1", 1, "dogs bark loudly")])
    assert store.search("cat", 1, namespace="u1")[0].id == "raw-u1-s1-0"
    col = store.client.get_collection(store.collection_name)
    col.delete(ids=["raw-u1-s1-0"])  # count restored by an add: a count check alone would miss it
    col.add(ids=["z"], documents=["x"], embeddings=[[0.0] * 383 + [1.0]],
            metadatas=[{"tier": "raw", "namespace": "u1", "session_id": "s1", "turn_index": 2, "date": ""}])
    assert all(SECRET not in c.text for c in store.search("cat", 3, namespace="u1"))
    store.close()


# --------------------------------------------------------------------------- side files


def test_side_files_are_scanned_and_labelled_by_what_they_are(tmp_path, embedder):
    """Files another memory layer keeps beside its vector store, written by other
    libraries (sqlite3, json, pickle): each copy is reported on its own surface, and a
    row deleted from the history database is found in its freed pages if they keep it."""
    import pickle
    import sqlite3

    store = TieredMemoryStore(tmp_path / "db", embedder=embedder)
    store.add([raw("u1", "s1", 0, "I walk my dog")])
    store.close()
    side = tmp_path / "side"
    side.mkdir()
    con = sqlite3.connect(side / "history.db")
    con.execute("CREATE TABLE history (id TEXT, old_memory TEXT, new_memory TEXT, event TEXT)")
    con.execute("INSERT INTO history VALUES ('1', NULL, ?, 'ADD')", ("token XQ7\u2013VIOLET\u20133829",))
    con.execute("INSERT INTO history VALUES ('2', NULL, ?, 'ADD')", (f"second copy {SECRET}",))
    con.commit()
    con.execute("DELETE FROM history WHERE id = '2'")
    con.commit()
    con.close()
    (side / "memories.json").write_text(json.dumps({"m": "token XQ7\u2013VIOLET\u20133829"}))  # \u2013 escaped
    (side / "log.jsonl").write_text(json.dumps({"msg": "xq7\nviolet 3829"}) + "\n")
    (side / "state.pkl").write_bytes(pickle.dumps({"m": f"my token {SECRET}"}, protocol=5))
    (side / "notes.txt").write_text("XQ7 VIOLET 3829\n")
    report = scan(tmp_path / "db", SECRET, also=[side])
    counts = report.counts()
    assert counts["side_sqlite"] == 1          # the live row
    # the live row as bytes, and the deleted one too where this SQLite build leaves
    # freed cells as they were (an independent byte search decides which)
    freed = SECRET.encode() in (side / "history.db").read_bytes()
    assert counts["side_disk"] == 1 + int(freed)
    assert counts["side_json"] == 2 and counts["side_pickle"] == 1 and counts["side_file"] == 1
    assert counts["cache"] == 0 == counts["cache_disk"]  # not labelled as an LLM cache
    assert not report.clean
    clean = scan(tmp_path / "db", "ABSENT-VALUE-0000", also=[side])
    assert clean.clean


def test_residue_cli_takes_side_files(tmp_path, embedder):
    from typer.testing import CliRunner

    from evaluators.cli import app

    store = TieredMemoryStore(tmp_path / "db", embedder=embedder)
    store.add([raw("u1", "s1", 0, "I walk my dog")])
    store.close()
    (tmp_path / "h.json").write_text(json.dumps({"m": f"pw {SECRET}"}))
    res = CliRunner().invoke(app, ["residue", str(tmp_path / "db"), SECRET, "--also", str(tmp_path / "h.json"),
                                   "--json"])
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout)["counts"]["side_json"] == 1
    missing = CliRunner().invoke(app, ["residue", str(tmp_path / "db"), SECRET, "--also", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "side file not found" in missing.output


# --------------------------------------------------------------------------- checkpoints


def _example1():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "examples" / "01_audit_react_agent.py"
    spec = importlib.util.spec_from_file_location("memkit_example_01_ckpt", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # LangGraph resolves the nodes' type hints through it
    spec.loader.exec_module(mod)
    return mod


def test_audit_reports_canaries_in_the_agents_checkpoints(embedder):
    """Example 1's agent keeps every conversation in its checkpointer: after full_purge
    the store is clean but the threads still hold canaries, until they are deleted."""
    from evaluators.audit import audit, store_forgetter

    ex1 = _example1()
    results = {}
    for delete in (False, True):
        store = MemkitStore(TieredMemoryStore(embedder=embedder), index={"fields": ["content"]},
                            tiers={("memories", "*", "facts"): "summary"})
        agent = ex1.build_agent(store)
        res = audit(agent, feed=ex1.build_memory_writer(store), forget=store_forgetter(store, "full_purge"),
                    forget_mode="full_purge", store=store, n=2, seed=0, n_resamples=50, delete_threads=delete)
        results[delete] = res
        # an independent count: every checkpoint whose messages show a canary verbatim
        values = [c["value"] for c in res.canaries]
        holders = {value for value in values for tup in agent.checkpointer.list(None)
                   for msg in tup.checkpoint["channel_values"].get("messages", []) if value in str(msg.content)}
        assert res.residue["checkpoint"] == len(holders)
        others = {k: v for k, v in res.residue.items() if v and k != "checkpoint"}
        assert others == {}
        store.close()
    assert results[False].residue["checkpoint"] == 2 and results[False].checkpoint_residue_kept_threads is None
    assert results[True].checkpoint_residue_kept_threads == 2 and results[True].residue["checkpoint"] == 0
    assert "after deleting their threads" in results[True].report


def test_sqlite_checkpointer_on_disk(tmp_path, embedder):
    """A real SqliteSaver: its threads are scanned through the saver during the audit;
    memkit leaves no synthetic user's thread in a database it did not create (the live
    rows hold no canary afterwards, read with plain SQL), while the file's freed pages
    still hold the bytes until VACUUM (`memkit residue --also`)."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from evaluators.audit import audit, store_forgetter
    from memkit.residue.chroma import scan_checkpoints

    ex1 = _example1()
    db = tmp_path / "checkpoints.sqlite"
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    store = MemkitStore(TieredMemoryStore(tmp_path / "store", embedder=embedder), index={"fields": ["content"]})
    agent = ex1.build_agent(store, checkpointer=saver)
    res = audit(agent, feed=ex1.build_memory_writer(store), forget=store_forgetter(store, "full_purge"),
                forget_mode="full_purge", store=store, n=2, seed=0, n_resamples=50)
    secret = res.canaries[0]["value"]
    assert res.surface_scans["before"]["checkpoint"]["holders"] == 2  # the audit saw them in the saver
    assert res.surface_scans["before"]["sqlite_rows"]["holders"] == 2  # ... and in the saver's rows
    saver.conn.commit()
    assert not scan_checkpoints(saver, secret).surfaces["checkpoint"]
    con = sqlite3.connect(db)
    live = sum(bytes(v).count(secret.encode()) for t in ("checkpoints", "writes")
               for row in con.execute(f"SELECT * FROM {t}") for v in row if isinstance(v, bytes))
    con.close()
    assert live == 0
    disk = scan(tmp_path / "store", secret, also=[db])
    assert disk.counts()["side_sqlite"] == 0 and disk.counts()["side_disk"] > 0  # freed pages
    saver.conn.close()
    store.close()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(case=secrets_and_copies(), mode=st.sampled_from(["full_purge", "tombstone_redaction"]))
def test_property_two_handles_then_forget_leaves_nothing(tmp_path_factory, embedder, case, mode):
    """Generated secrets and spellings, planted as raw text and as a summary: a second
    handle deletes the raw chunk, the first never returns it again; the forget then
    leaves no copy on any surface."""
    secret, text = case
    path = tmp_path_factory.mktemp("two") / "db"
    a = TieredMemoryStore(path, embedder=embedder)
    r = raw("u1", "s1", 0, text)
    a.add([r, raw("u1", "s1", 1, "I walk my dog every morning")])
    a.add([summary("u1", "s1", f"The user said: {text}", [r.id])])
    before = scan(a, secret, check_embeddings=False)
    assert before.counts()["text_raw"] >= 1 and before.counts()["text_summary"] >= 1
    assert r.id in {c.id for c in a.search(text, 3, namespace="u1")}
    b = TieredMemoryStore(path, embedder=embedder)
    b.delete([r.id])
    b.close()
    assert r.id not in {c.id for c in a.search(text, 3, namespace="u1")}
    forget(a, secret, mode, namespace="u1")
    a.close()
    after = scan(path, secret)
    assert after.clean, {k: v for k, v in after.counts().items() if v}


# --------------------------------------------------------------------------- second adversarial round


@pytest.mark.parametrize(("secret", "text"), [
    (SECRET, '{"k": "XQ7-VIOLET-382\\u0039"}'),       # an ASCII character JSON-escaped
    (SECRET, "xq7-v\u0131olet-3829"),                    # dotless i (Turkish lower-casing)
    ("5551234567", "phone \u0665\u0665\u0665\u0661\u0662\u0663\u0664\u0665\u0666\u0667"),  # Arabic-Indic
    (SECRET, "XQ7-VIOLET-\u0969\u096e\u0968\u096f"),      # Devanagari digits
    (SECRET, "XQ7-VIOLET-382&#57;"),                    # an HTML numeric entity for a character
    (SECRET, "&#x58;Q7-VIOLET-3829"),
    (SECRET, "%58Q7-VIOLET-3829"),                      # percent-encoding of a character
    (SECRET, "XQ7<!-- c -->-VIOLET-3829"),              # an HTML comment
    (SECRET, "XQ7&nbsp-VIOLET-3829"),                   # an entity without its semicolon
    (SECRET, "\x1b[1mXQ7\x1b[0m-VIOLET-3829"),          # ANSI colour codes
    (SECRET, "XQ7<span style='" + "a" * 70 + "'>-VIOLET-3829"),  # a long tag
    (SECRET, "xq7-\u1d20\u026a\u1d0f\u029f\u1d07\u1d1b-3829"),   # small capitals
    (SECRET, "\u24b3\u24ac\u247avioLET3829"),              # parenthesized letters and digit
])
def test_more_spellings_a_reader_recognises(secret, text):
    m = matcher(secret)
    assert m.search(text) and m.bytes.search(text.encode())
    assert not m.search(redact_text(text, secret))


def test_unrelated_text_is_not_a_copy():
    m = matcher(SECRET)
    for text in ["hello world about table 2012", "XQ7 is a code; VIOLET is a colour", "3829 XQ7 VIOLET"]:
        assert not m.search(text) and not m.bytes.search(text.encode())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("filler", ["\\", "<q>", "&#7;", "-", "\\u2013", "%2D", "\u200b"])
def test_long_separator_runs_are_no_trap(filler):
    """A run of 30,000 characters between two near-miss characters: the answer is
    'no copy' (quadratic backtracking would take minutes here; see
    benchmarks/bench_matcher.py for the timing)."""
    m = matcher(SECRET)
    text = "XQ7" + filler * (30_000 // len(filler)) + "Z"
    assert not m.search(text) and not m.bytes.search(text.encode())


def test_cache_purge_and_verify_read_the_model_string_too(tmp_path, embedder):
    from langchain_core.outputs import Generation

    store = TieredMemoryStore(tmp_path / "db", embedder=embedder)
    store.add([raw("u1", "s1", 0, f"code {SECRET}")])
    cache = LLMCache(tmp_path / "c.db")
    cache.update("hello", json.dumps({"model": "m", "stop": [SECRET]}), [Generation(text="hi")])
    result = forget(store, SECRET, "full_purge", namespace=None, cache=cache)
    assert result.cache_entries_purged == 1 and "cache" in result.verified
    store.close()
    assert scan(tmp_path / "db", SECRET, cache_paths=[cache.path]).clean


def test_cache_purge_catches_a_folded_spelling(tmp_path):
    """A secret with ``SS`` answered back as ``ß`` (a case fold of several letters) is a
    copy for the scanner, so the forget's cache purge must remove it too. Before the
    purge used the same matcher method as the scanner, it kept this entry and the
    audit reported cache residue after forget. The entry is written by LangChain's own
    cache interface, as a chat model would write it."""
    from langchain_core.outputs import Generation

    secret = "STRASSE-4821"
    cache = LLMCache(tmp_path / "llm.sqlite")
    cache.update("where do I live?", "model-a", [Generation(text="You live at straße-4821.")])
    cache.update("what is my pet's name?", "model-a", [Generation(text="Rex.")])
    cache.update('[{"content": "Straße\\n4821"}]', "model-b", [Generation(text="noted")])
    assert contains_secret("You live at straße-4821.", secret)  # decided by hand: ß folds to ss
    assert cache.purge(secret) == 2
    assert [r[0] for r in cache.entries()] == ["what is my pet's name?"]
    store_dir = tmp_path / "store"
    TieredMemoryStore(store_dir).close()
    report = scan(store_dir, secret, cache_paths=[tmp_path / "llm.sqlite"], check_embeddings=False)
    assert report.counts()["cache"] == 0 and report.counts()["cache_disk"] == 0


def test_a_json_escaped_spelling_in_a_cache_is_found_then_purged(tmp_path):
    """LangChain stores prompts as JSON, where ``ß`` can be the escape ``\\u00df``. The
    cache surface decodes JSON as the purge does: the copy is counted before the purge
    and gone after it (written with the sqlite3 module, not memkit's cache)."""
    import sqlite3 as sql

    secret = "STRASSE-4411"
    LLMCache(tmp_path / "llm.sqlite")  # creates the table
    con = sql.connect(tmp_path / "llm.sqlite")
    con.execute("INSERT INTO llm_cache (key, prompt, llm_string, response) VALUES (?, ?, ?, ?)",
                ("k1", json.dumps([{"content": "I live at Straße 4411"}]), "model", "[]"))
    con.commit()
    con.close()
    store_dir = tmp_path / "store"
    TieredMemoryStore(store_dir).close()
    before = scan(store_dir, secret, cache_paths=[tmp_path / "llm.sqlite"], check_embeddings=False)
    assert "\\u00df" in (tmp_path / "llm.sqlite").read_bytes().decode("latin-1")
    assert before.counts()["cache"] == 1
    assert LLMCache(tmp_path / "llm.sqlite").purge(secret) == 1
    after = scan(store_dir, secret, cache_paths=[tmp_path / "llm.sqlite"], check_embeddings=False)
    assert after.counts()["cache"] == 0
