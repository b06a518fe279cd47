"""One way to write JSON files: atomically, so a reader sees the old or the new content.

Used on both sides of the process boundary (a worker's result, the baseline store, the
results file); standard library only.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Union


def atomic_write_text(path: Union[str, Path], text: str) -> None:
    """A temporary file in the same directory, flush + fsync, ``os.replace``, fsync the dir."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(str(path.parent), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - some filesystems refuse directory fsync
        pass


def write_json(path: Union[str, Path], payload: Any, *, indent=None) -> None:
    """``payload`` as JSON (keys sorted), written atomically."""
    atomic_write_text(path, json.dumps(payload, sort_keys=True, indent=indent) + ("\n" if indent else ""))
