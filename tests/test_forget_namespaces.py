"""Whose namespaces forget_user erases (graphs.forget.forget_user / user_namespaces):
namespaces compare as tuples of labels, never as joined strings or parts of a label.

Colliding ids: ``7`` / ``17`` / a memkit namespace ``orgs.7`` / LangGraph's
``("orgs", "7", "notes")``, and ``alice`` / ``alice.smith@example.com``. Every item is
written by the test with its owner labelled by hand (:data:`OWNER`); what survives a
forget is read back with chromadb's own client (the collection's ids) and, for the
LangGraph items, compared with LangGraph's ``InMemoryStore`` given the same items and
the same deletions (``InMemoryStore.delete`` of the hand-labelled owner's items).
"""

from __future__ import annotations

import pytest
from langgraph.store.base import InvalidNamespaceError
from langgraph.store.memory import InMemoryStore

from graphs.forget import forget_user, user_namespaces
from memkit.store.langgraph import MemkitStore, chunk_namespace, item_chunk_id
from memkit.store.tiered import Chunk, TieredMemoryStore

USERS = ("7", "17", "alice", "alice.smith@example.com")
PLAIN = {  # memkit namespaces (memkit's own writers: the namespace is a user or org id) -> owner
    "7": "7", "17": "17", "orgs.7": "org orgs.7", "alice": "alice",
    "alice.smith@example.com": "alice.smith@example.com",
}
LANGGRAPH = {  # LangGraph namespaces (MemkitStore items) -> owner
    ("orgs", "7", "notes"): "org 7", ("orgs", "7"): "org 7",
    ("memories", "7"): "7", ("memories", "7", "facts"): "7", ("memories", "17"): "17",
    ("memories", "alice"): "alice", ("memories", "alice", "facts"): "alice",
    ("memories", "alice-smith"): "alice-smith", ("alice", "notes"): "alice (other layout)",
    ("7",): "7",
}
WORDS = ["amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron", "inlet", "juniper",
         "kestrel", "lagoon", "meadow", "nectar", "orchid", "prairie", "quartz", "raven"]


def _text(i: int) -> str:
    return f"note {WORDS[i % len(WORDS)]} {WORDS[(i * 7 + 3) % len(WORDS)]} number {i}"


def build(root, embedder) -> tuple[MemkitStore, dict[str, tuple[str, ...]], dict[str, str]]:
    """A store holding every namespace above; ``(store, {chunk id: labels}, {chunk id: owner})``."""
    tiered = TieredMemoryStore(root, embedder=embedder)
    labels, owner = {}, {}
    chunks = []
    for i, (ns, who) in enumerate(PLAIN.items()):
        cid = f"raw-{i}"
        chunks.append(Chunk(id=cid, text=_text(i), tier="raw", namespace=ns, session_id=f"s{i}", turn_index=0))
        labels[cid], owner[cid] = (ns,), who
    tiered.add(chunks)
    store = MemkitStore(tiered, index={"fields": ["content"]})
    for j, (ns, who) in enumerate(LANGGRAPH.items(), start=100):
        store.put(ns, f"k{j}", {"content": _text(j)})
        cid = item_chunk_id(ns, f"k{j}")
        labels[cid], owner[cid] = ns, who
    return store, labels, owner


def oracle() -> InMemoryStore:
    mem = InMemoryStore()
    for j, ns in enumerate(LANGGRAPH, start=100):
        mem.put(ns, f"k{j}", {"content": _text(j)})
    return mem


def test_user_namespaces_are_exact_label_tuples(tmp_path, embedder):
    store, labels, _ = build(tmp_path / "s", embedder)
    try:
        assert {chunk_namespace(c) for c in store.tiered.chunks()} == set(labels.values())
        t = store.tiered
        assert user_namespaces(t, "7") == [("7",), ("memories", "7"), ("memories", "7", "facts")]
        assert user_namespaces(t, "17") == [("17",), ("memories", "17")]
        assert user_namespaces(t, "alice") == [("alice",), ("memories", "alice"), ("memories", "alice", "facts")]
        assert user_namespaces(t, "alice.smith@example.com") == [("alice.smith@example.com",)]
        assert user_namespaces(t, "orgs") == [] and user_namespaces(t, "memories") == []
        assert user_namespaces(t, "alice", namespace_for=lambda u: (u,)) == [("alice",), ("alice", "notes")]
        assert user_namespaces(t, "7", namespace_for=lambda u: ("orgs", u)) == [("orgs", "7"), ("orgs", "7", "notes")]
        with pytest.raises(ValueError, match="namespace_for"):
            user_namespaces(t, "7", namespace_for=lambda u: ())
    finally:
        store.close()


@pytest.mark.parametrize("user", USERS)
def test_forget_user_erases_that_user_and_no_one_else(tmp_path, embedder, user):
    store, labels, owner = build(tmp_path / "s", embedder)
    try:
        result = forget_user(store.tiered, user, "full_purge")
        assert result.steps[-1] == "compact"
        left = set(store.tiered.collection.get(include=[])["ids"])  # chromadb's own read
        assert left == {cid for cid, who in owner.items() if who != user}
        # the LangGraph view: what InMemoryStore holds after deleting the user's items
        mem = oracle()
        for j, (ns, who) in enumerate(LANGGRAPH.items(), start=100):
            if who == user:
                mem.delete(ns, f"k{j}")
        # (InMemoryStore keeps listing a namespace whose last item went: listed from its items)
        assert store.list_namespaces(limit=1000) == sorted({tuple(i.namespace) for i in mem.search((), limit=1000)})
        for ns in LANGGRAPH:
            got = {(tuple(i.namespace), i.key, i.value["content"]) for i in store.search(ns, limit=100)}
            want = {(tuple(i.namespace), i.key, i.value["content"]) for i in mem.search(ns, limit=100)}
            assert got == want, ns
    finally:
        store.close()


def test_tombstone_redaction_rewrites_only_the_users_chunks(tmp_path, embedder):
    """A memkit namespace ``"orgs.kx.notes"`` (one label, an org's) and the LangGraph
    namespace ``("orgs", "kx", "notes")`` (user kx's, by ``namespace_for``) share one
    joined string and hold the same code: the user's copy is redacted, the org's kept."""
    tiered = TieredMemoryStore(tmp_path / "s", embedder=embedder)
    store = MemkitStore(tiered, index={"fields": ["content"]})
    try:
        tiered.add([Chunk(id="org-note", text="door code SHARED-CODE-4411", tier="raw", namespace="orgs.kx.notes",
                          session_id="s", turn_index=0)])
        store.put(("orgs", "kx", "notes"), "n", {"content": "door code SHARED-CODE-4411"})
        mine = item_chunk_id(("orgs", "kx", "notes"), "n")
        assert user_namespaces(tiered, "kx", namespace_for=lambda u: ("orgs", u)) == [("orgs", "kx", "notes")]
        forget_user(tiered, "kx", "tombstone_redaction", fingerprints=["SHARED-CODE-4411"],
                    namespace_for=lambda u: ("orgs", u))
        got = tiered.collection.get(include=["documents"])
        texts = dict(zip(got["ids"], got["documents"], strict=True))
        assert texts == {"org-note": "door code SHARED-CODE-4411", mine: "door code [REDACTED]"}
        assert store.get(("orgs", "kx", "notes"), "n").value == {"content": "door code [REDACTED]"}
    finally:
        store.close()


def test_a_dotted_label_is_refused_as_langgraph_refuses_it(embedder):
    """("memories", "alice.smith@example.com") cannot be stored: LangGraph's own store
    refuses a label with "." and so does MemkitStore, so no label tuple is ever read
    from a joined string that another tuple also gives."""
    store = MemkitStore(TieredMemoryStore(embedder=embedder))
    try:
        for s in (InMemoryStore(), store):
            with pytest.raises(InvalidNamespaceError):
                s.put(("memories", "alice.smith@example.com"), "k", {"content": "x"})
    finally:
        store.close()


def test_items_written_before_the_labels_were_kept_still_read(embedder):
    """An item as MemkitStore wrote it before ``lg_namespace`` metadata (its labels only
    in the joined namespace) reads back with the same labels and is forgotten by its
    owner only."""
    tiered = TieredMemoryStore(embedder=embedder)
    old = Chunk(id=item_chunk_id(("memories", "alice"), "old"), text="I live in Lyon.", tier="raw",
                namespace="memories.alice", session_id="old", turn_index=0, date="2024-01-01T00:00:00+00:00",
                extra={"lg_key": "old", "lg_value": '{"content": "I live in Lyon."}',
                       "lg_created": "2024-01-01T00:00:00+00:00", "lg_updated": "2024-01-01T00:00:00+00:00",
                       "lg_seq": 1, "lg_indexed": True})
    tiered.add([old])
    store = MemkitStore(tiered, index={"fields": ["content"]})
    try:
        assert store.get(("memories", "alice"), "old").value == {"content": "I live in Lyon."}
        assert store.list_namespaces() == [("memories", "alice")]
        assert [i.key for i in store.search(("memories", "alice"), query="where do I live")] == ["old"]
        assert user_namespaces(tiered, "alice") == [("memories", "alice")]
        assert user_namespaces(tiered, "memories") == []
        store.put(("memories", "alice"), "old", {"content": "I live in Paris."})  # rewritten: labels kept
        (chunk,) = tiered.chunks()
        assert chunk_namespace(chunk) == ("memories", "alice") and chunk.extra["lg_namespace"] == '["memories", "alice"]'
    finally:
        store.close()
