"""One clear line for an operating-system error (no traceback), shared by every command."""

from __future__ import annotations

import errno

_HINTS = {
    errno.EACCES: "check the permissions, or copy the run to a directory you can write and give that",
    errno.EPERM: "check the permissions, or copy the run to a directory you can write and give that",
    errno.EROFS: "the file system is read-only: copy the run to a writable directory and give that",
    errno.ENOSPC: "the disk is full: free space (results.jsonl and stores/ are the large files) and rerun",
    errno.EDQUOT: "the disk quota is exhausted: free space and rerun",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.EISDIR: "give a file, not a directory",
}


def os_error_line(exc: OSError) -> str:
    """``exc`` as one line: what failed, on which path, and what to do.

    Args:
        exc: any :class:`OSError` (``PermissionError``, ``FileNotFoundError`` ...).

    Returns:
        e.g. ``"cannot write runs/x/report.md: Permission denied (check the permissions, ...)"``;
        an ``OSError`` without ``errno`` (memkit's own messages) is returned as its text.
    """
    if exc.errno is None or not exc.strerror:
        return str(exc)
    path = exc.filename
    where = f" {path}" if path else ""
    if exc.filename2:
        where += f" -> {exc.filename2}"
    hint = _HINTS.get(exc.errno)
    return f"cannot access{where}: {exc.strerror}" + (f" ({hint})" if hint else "")
