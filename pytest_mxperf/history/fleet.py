"""Splitting one selection across the runners of a fleet: ``--perf-shard K/N``.

Each test is in exactly one shard, chosen from a SHA-256 of its pytest node id (not
Python's ``hash``, which differs between processes), so every runner that collects the same
tests makes the same split whatever the order it collects them in. The runners' sessions
share a fleet id (``--perf-fleet``, or the CI run) and the store holds them as one
(``HistoryStore.fleet_session``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Iterable, List, Tuple

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class ShardError(ValueError):
    pass


def parse_shard(text: str) -> Tuple[int, int]:
    """"K/N" -> (K, N), 1 <= K <= N."""
    m = _SHARD.match(text or "")
    if not m:
        raise ShardError(f"--perf-shard takes K/N (e.g. 2/4), not {text!r}")
    k, n = int(m.group(1)), int(m.group(2))
    if not 1 <= k <= n:
        raise ShardError(f"--perf-shard {text}: K must be 1..N")
    return k, n


def shard_of(key: str, n: int) -> int:
    """The shard (1..n) that ``key`` belongs to."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def select_shard(keys: Iterable[str], k: int, n: int) -> List[str]:
    return [key for key in keys if shard_of(key, n) == k]
