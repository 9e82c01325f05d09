"""Per-user data keys and encryption at rest for the tiered store (crypto-shredding).

Each namespace of a :class:`~memkit.store.tiered.TieredMemoryStore` (a user's memory) has its
own 256-bit data key. With ``TieredMemoryStore(..., keystore=KeyStore(dir))`` a chunk's
text and its extra metadata (every :attr:`~memkit.store.chunks.Chunk.extra` key and value,
as one JSON document) are sealed with AES-256-GCM (``cryptography``'s ``AESGCM``) under
the namespace's current key before they reach chroma, the chunk id and the field name
as associated data, so a sealed value cannot be moved to another record or field.

What stays in clear, because chroma filters and searches on it: the record id (a
hash of the text, :func:`memkit.store.chunks.chunk_id`), ``namespace``, ``tier``,
``session_id``, ``turn_index``, ``date``, ``source_ids``, and the vectors. What a
leftover vector still reveals is weighed by :mod:`memkit.residue.weigh`. The id is an
unkeyed hash of the text with its namespace, session, tier and position: a leftover id
confirms an exact guess of a deleted text.

Sealed value: ``"mkseal1:"`` + URL-safe base64 of ``key id (8 bytes) | nonce (12) |
ciphertext and tag``; the key id names the key it was sealed under.

Forgetting by destroying the key (:func:`shred_namespace`, :func:`rotate_namespace`;
the ``crypto_shred`` deletion mode of :mod:`graphs.forget`): every sealed copy the
store ever wrote -- in chroma's SQLite pages, its write-ahead log, freed pages,
backups -- becomes unreadable once the key that sealed it is gone, with no
compaction. Rotation re-seals the namespace's remaining chunks under a fresh key, then
destroys the old one, so one secret can be shredded while the rest of the user's
memory stays readable.

Key store: a directory of key files (mode 0600), one per key, named by the SHA-256 of
the namespace and the key id, holding a creation sequence number and the key. A
destroyed key's file is overwritten with zeros in place, flushed to the device
(``fsync``) and unlinked. On a copy-on-write file system or an SSD the device may keep
the old blocks; deployments keep keys in a KMS or HSM, whose own deletion is what
counts. ``KeyStore()`` without a directory keeps keys in process memory.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from dataclasses import replace
from pathlib import Path
from typing import Any

from memkit.errors import StoreError
from memkit.store.chunks import Chunk, from_record, to_metadata

__all__ = [
    "SEALED_KEY",
    "KeyDestroyed",
    "KeyMissing",
    "KeyStore",
    "is_sealed",
    "open_page",
    "open_record",
    "rotate_keys",
    "rotate_namespace",
    "seal_chunk",
    "shred_keys",
    "shred_namespace",
]

PREFIX = "mkseal1:"
SEALED_KEY = "memkit_sealed"
"""Metadata key holding a chunk's sealed extra metadata."""

_KEY_BYTES = 32
_ID_BYTES = 8
_NONCE_BYTES = 12


class KeyDestroyed(StoreError):
    """A value was sealed under a key that no longer exists (it was shredded)."""


class KeyMissing(StoreError):
    """A value was sealed under a key this key store neither holds nor destroyed (another
    key store's): it may still be readable elsewhere, so it is never counted as shredded."""


def is_sealed(value: Any) -> bool:
    """Whether ``value`` is a value sealed by a :class:`KeyStore`."""
    return isinstance(value, str) and value.startswith(PREFIX)


def _aes(key: bytes) -> Any:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


class KeyStore:
    """Data keys per namespace (module doc).

    Args:
        path: directory of the key files (created, mode 0700); ``None`` keeps keys in
            memory (they die with the process).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser().resolve() if path is not None else None
        self._mem: dict[str, dict[bytes, tuple[int, bytes]]] = {}
        self._gone: set[str] = set()  # in memory: "<namespace tag>.<key id hex>" of destroyed keys
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True, mode=0o700)

    def __repr__(self) -> str:
        return f"KeyStore({str(self.path) if self.path else 'memory'!r})"

    # ------------------------------------------------------------------ keys

    @staticmethod
    def _tag(namespace: str) -> str:
        return hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:32]

    def _keys(self, namespace: str) -> dict[bytes, tuple[int, bytes]]:
        """``{key id: (sequence, key)}`` of the namespace's live keys."""
        if self.path is None:
            return self._mem.get(namespace, {})
        out: dict[bytes, tuple[int, bytes]] = {}
        for f in self.path.glob(f"{self._tag(namespace)}.*.key"):
            data = f.read_bytes()
            if len(data) == 8 + _KEY_BYTES and any(data[8:]):
                out[bytes.fromhex(f.name.split(".")[1])] = (int.from_bytes(data[:8], "big"), data[8:])
        return out

    def key_ids(self, namespace: str) -> list[bytes]:
        """The namespace's live key ids, oldest first."""
        keys = self._keys(namespace)
        return sorted(keys, key=lambda k: keys[k][0])

    def _new(self, namespace: str) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        keys = self._keys(namespace)
        seq = max((s for s, _ in keys.values()), default=0) + 1
        kid, key = secrets.token_bytes(_ID_BYTES), AESGCM.generate_key(bit_length=8 * _KEY_BYTES)
        if self.path is None:
            self._mem.setdefault(namespace, {})[kid] = (seq, key)
            return kid
        f = self.path / f"{self._tag(namespace)}.{kid.hex()}.key"
        fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, seq.to_bytes(8, "big") + key)
            os.fsync(fd)
        finally:
            os.close(fd)
        return kid

    def current(self, namespace: str, *, create: bool = True) -> tuple[bytes, bytes] | None:
        """``(key id, key)`` the namespace seals with now: its newest key, created on
        first use when ``create``; ``None`` when it has none."""
        keys = self._keys(namespace)
        if not keys:
            if not create:
                return None
            kid = self._new(namespace)
            keys = self._keys(namespace)
            return kid, keys[kid][1]
        kid = max(keys, key=lambda k: keys[k][0])
        return kid, keys[kid][1]

    def rotate(self, namespace: str) -> bytes:
        """Create a new current key for ``namespace`` (the old ones stay until
        :meth:`destroy`); returns its id."""
        return self._new(namespace)

    def destroyed(self, namespace: str, kid: bytes) -> bool:
        """Whether this key store destroyed key ``kid`` of ``namespace`` (its register
        of destroyed key ids, file ``destroyed`` beside the keys: ids only, no key bytes)."""
        entry = f"{self._tag(namespace)}.{kid.hex()}"
        if self.path is None:
            return entry in self._gone
        register = self.path / "destroyed"
        return register.exists() and entry in register.read_text().split()

    def _register(self, entries: list[str]) -> None:
        if self.path is None:
            self._gone.update(entries)
            return
        with open(self.path / "destroyed", "a") as fh:
            fh.write("".join(f"{e}\n" for e in entries))
            fh.flush()
            os.fsync(fh.fileno())

    def destroy(self, namespace: str, *, keep: bytes | None = None) -> int:
        """Destroy the namespace's keys (but ``keep``): file bytes zeroed in place,
        flushed, unlinked (module doc), then their ids registered as destroyed (a key
        unlinked but not yet registered reads as missing, never as destroyed). Returns
        how many were destroyed."""
        tag = self._tag(namespace)
        if self.path is None:
            keys = self._mem.get(namespace, {})
            gone = [k for k in keys if k != keep]
            for k in gone:
                del keys[k]
            self._register([f"{tag}.{k.hex()}" for k in gone])
            return len(gone)
        n, entries = 0, []
        for f in sorted(self.path.glob(f"{tag}.*.key")):
            if keep is not None and f.name.split(".")[1] == keep.hex():
                continue
            fd = os.open(f, os.O_WRONLY)
            try:
                os.pwrite(fd, b"\0" * (8 + _KEY_BYTES), 0)
                os.fsync(fd)
            finally:
                os.close(fd)
            f.unlink()
            entries.append(f"{tag}.{f.name.split('.')[1]}")
            n += 1
        if entries:
            self._register(entries)
        if n:
            dfd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        return n

    # ------------------------------------------------------------------ values

    def seal(self, namespace: str, plaintext: str, aad: str) -> str:
        """``plaintext`` sealed under the namespace's current key (module doc)."""
        cur = self.current(namespace)
        assert cur is not None
        kid, key = cur
        nonce = secrets.token_bytes(_NONCE_BYTES)
        ct = _aes(key).encrypt(nonce, plaintext.encode("utf-8"), aad.encode("utf-8"))
        return PREFIX + base64.urlsafe_b64encode(kid + nonce + ct).decode("ascii")

    def open(self, namespace: str, token: str, aad: str) -> str:
        """The plaintext of a sealed value.

        Raises:
            KeyDestroyed: the key it was sealed under was destroyed by this key store.
            KeyMissing: this key store neither holds nor destroyed that key.
            StoreError: the value is damaged or was sealed for another record or field.
        """
        from cryptography.exceptions import InvalidTag

        try:
            raw = base64.urlsafe_b64decode(token[len(PREFIX):].encode("ascii"))
        except ValueError as exc:
            raise StoreError(f"a sealed value is not base64 ({exc})") from exc
        kid, nonce, ct = raw[:_ID_BYTES], raw[_ID_BYTES:_ID_BYTES + _NONCE_BYTES], raw[_ID_BYTES + _NONCE_BYTES:]
        found = self._keys(namespace).get(kid)
        if found is None:
            if self.destroyed(namespace, kid):
                raise KeyDestroyed(f"sealed under key {kid.hex()} of namespace {namespace!r}, which was destroyed")
            raise KeyMissing(f"sealed under key {kid.hex()} of namespace {namespace!r}, which {self!r} "
                             "neither holds nor destroyed (another key store's?)")
        try:
            return _aes(found[1]).decrypt(nonce, ct, aad.encode("utf-8")).decode("utf-8")
        except InvalidTag as exc:
            raise StoreError(f"a sealed value of namespace {namespace!r} does not authenticate "
                             "(damaged, or moved from another record)") from exc


# --------------------------------------------------------------------------- records


def seal_chunk(ks: KeyStore, c: Chunk) -> tuple[str, dict[str, Any]]:
    """The chroma document and metadata of chunk ``c`` with its text and extra
    metadata sealed (module doc)."""
    meta = to_metadata(replace(c, extra={}))
    meta[SEALED_KEY] = ks.seal(c.namespace, json.dumps(c.extra, sort_keys=True), f"{c.id}|extra")
    return ks.seal(c.namespace, c.text, f"{c.id}|text"), meta


def open_record(ks: KeyStore, cid: str, doc: str | None, meta: dict[str, Any] | None) -> Chunk | None:
    """The chunk of a chroma record, its sealed fields opened; ``None`` when its key was
    destroyed. A record written without sealing is returned as it is.

    Raises:
        KeyMissing: sealed under a key ``ks`` neither holds nor destroyed (the wrong key
            store: the record is not dropped as shredded).
    """
    c = from_record(cid, doc, meta)
    sealed = c.extra.pop(SEALED_KEY, None)
    try:
        if is_sealed(c.text):
            c.text = ks.open(c.namespace, c.text, f"{cid}|text")
        if is_sealed(sealed):
            c.extra.update(json.loads(ks.open(c.namespace, str(sealed), f"{cid}|extra")))
    except KeyDestroyed:
        return None
    return c


# --------------------------------------------------------------------------- shredding


def _need_keys(store: Any) -> KeyStore:
    ks = getattr(store, "keystore", None)
    if ks is None:
        raise StoreError("crypto_shred needs a store that encrypts at rest: "
                         "TieredMemoryStore(..., keystore=KeyStore(dir))")
    return ks


def rotate_namespace(store: Any, namespace: str) -> int:
    """Re-seal every chunk of ``namespace`` under a new key (vectors kept), then destroy
    every older key: whatever the old keys sealed, anywhere on disk, is unreadable.

    Returns:
        The number of keys destroyed.

    Raises:
        StoreError: the store does not encrypt at rest.
    """
    ks = _need_keys(store)
    with store._op():
        chunks, vecs = store._get(where={"namespace": namespace}, embeddings=True)
        new = ks.rotate(namespace)
        if chunks:
            assert vecs is not None
            store._put(chunks, vecs)
        return ks.destroy(namespace, keep=new)


def shred_namespace(store: Any, namespace: str) -> tuple[int, list[str]]:
    """Destroy every key of ``namespace`` and delete its records through the API.

    Returns:
        ``(keys destroyed, ids deleted)``.

    Raises:
        StoreError: the store does not encrypt at rest.
    """
    ks = _need_keys(store)
    with store._op():
        ids = store._collection.get(where={"namespace": namespace}, include=[])["ids"]
        n = ks.destroy(namespace)
        return n, store.delete(ids)


def open_page(ks: KeyStore | None, ids: list[str], docs: list[Any], metas: list[Any]
              ) -> tuple[dict[str, Chunk], int, int, int]:
    """The sealed records among chroma records ``(ids, docs, metas)`` opened with ``ks``.

    Returns:
        ``(opened, destroyed, missing, sealed)``: ``{id: chunk}`` of those whose key is
        live, how many were sealed under a key ``ks`` destroyed, how many under a key it
        neither holds nor destroyed (their text unread), how many were sealed in all
        (none is opened without a key store).
    """
    sealed = [i for i, d in enumerate(docs) if is_sealed(d)]
    if ks is None or not sealed:
        return {}, 0, 0, len(sealed)
    opened: dict[str, Chunk] = {}
    missing = 0
    for i in sealed:
        try:
            c = open_record(ks, ids[i], docs[i], metas[i])
        except KeyMissing:
            missing += 1
            continue
        if c is not None:
            opened[ids[i]] = c
    return opened, len(sealed) - len(opened) - missing, missing, len(sealed)


def zero_slack(store: Any) -> None:
    """HNSW files can carry the writing process's heap bytes (plaintext it handled) past
    their elements; shredding does not rewrite the files, so it zeroes those bytes
    (:func:`memkit.store.compaction.zero_hnsw_slack`; chroma can write heap bytes there
    again when it next persists the index, and the store zeroes them again on close)."""
    from memkit.store.compaction import zero_hnsw_slack

    if store.path is not None:
        with store.exclusive("crypto_shred: zeroing HNSW slack"):
            zero_hnsw_slack(store.path)


def rotate_keys(store: Any, namespaces: set[str]) -> int:
    """:func:`rotate_namespace` of each namespace, then :func:`zero_slack`; returns the
    keys destroyed."""
    n = sum(rotate_namespace(store, name) for name in sorted(namespaces))
    zero_slack(store)
    return n


def shred_keys(store: Any, mine: set[str], others: set[str]) -> tuple[int, list[str]]:
    """:func:`shred_namespace` of a user's namespaces ``mine`` and :func:`rotate_namespace`
    of ``others`` (namespaces the forget deleted derived chunks from), then
    :func:`zero_slack`: ``(keys destroyed, ids deleted)``."""
    n, ids = 0, []
    for name in sorted(mine):
        k, gone = shred_namespace(store, name)
        n, ids = n + k, ids + gone
    n += sum(rotate_namespace(store, name) for name in sorted(others))
    zero_slack(store)
    return n, ids
