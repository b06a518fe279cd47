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


def _umask() -> int:
    """This process's umask (read once: setting it back at once, before any thread starts)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()
TEMP_SUFFIX = ".tmp"


def temp_prefix(path: Path, pid: int) -> str:
    """The name a temporary file of ``path`` starts with, in the writing process ``pid``."""
    return f".{path.name}.{pid}."


def atomic_write_text(path: Union[str, Path], text: str) -> None:
    """A temporary file in the same directory, flush + fsync, ``os.replace``, fsync the dir.
    The file gets the mode a new file gets under the umask (``mkstemp``'s is 0600: another
    account could not read a shared ``baselines/``); a temporary file a killed writer leaves
    is named for its pid (``sweep_temporaries``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=temp_prefix(path, os.getpid()), suffix=TEMP_SUFFIX)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
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


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one that exists but is not ours counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temporaries(path: Union[str, Path]) -> int:
    """Remove the temporary files of ``path`` (``atomic_write_text``'s) whose writer is gone
    (killed between the temporary file and the rename); returns how many."""
    path = Path(path)
    removed = 0
    for tmp in path.parent.glob(f".{path.name}.*{TEMP_SUFFIX}"):
        pid = tmp.name[len(path.name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            try:
                tmp.unlink()
                removed += 1
            except OSError:
                pass
    return removed


def write_json(path: Union[str, Path], payload: Any, *, indent=None) -> None:
    """``payload`` as JSON (keys sorted), written atomically."""
    atomic_write_text(path, json.dumps(payload, sort_keys=True, indent=indent) + ("\n" if indent else ""))
