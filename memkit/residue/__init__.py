"""Where does a secret still live? memkit's residue scanner.

:func:`scan` reads a Chroma store (:mod:`memkit.residue.chroma`), its side files
(:mod:`memkit.residue.files`, opening containers: :mod:`memkit.residue.containers`;
full-text indexes: :mod:`memkit.residue.fulltext`; in worker processes:
:mod:`memkit.residue.pool`), LLM caches and LangGraph checkpoints
(:mod:`memkit.residue.checkpoints`) into one :class:`ResidueReport`, with a coverage
record per file (:mod:`memkit.residue.coverage`). :mod:`memkit.residue.fingerprint`
lists the strings that identify a user's data.
"""

from memkit.residue.checkpoints import scan_checkpoints, threads_with_copies
from memkit.residue.chroma import (
    HNSW_FILES,
    SURFACES,
    Hit,
    Limits,
    NotAChromaDirectory,
    ResidueReport,
    scan,
    secret_bytes_regex,
    side_file_kind,
)

__all__ = ["HNSW_FILES", "SURFACES", "Hit", "Limits", "NotAChromaDirectory", "ResidueReport", "scan",
           "scan_checkpoints", "secret_bytes_regex", "side_file_kind", "threads_with_copies"]
