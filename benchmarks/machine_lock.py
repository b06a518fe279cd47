"""The machine lock the measuring scripts hold while a session runs, so that other work
waits (``flock PATH cmd``) instead of disturbing it."""

from __future__ import annotations

import contextlib
import fcntl
from typing import Iterator, Optional


@contextlib.contextmanager
def machine_lock(path: Optional[str]) -> Iterator[None]:
    """Hold ``path`` locked (no lock when None). The wait is in the kernel (a blocking
    flock), as ``flock PATH cmd`` waits: a polling lock (filelock's) nearly always loses the
    lock to waiters blocked in the kernel, and a campaign could wait for an hour."""
    if not path:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
