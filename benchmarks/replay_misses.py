"""Which changed cell a replayed session missed (issue 35): sessions of the default selection's
corpus (``replay_lib``), one cell x0.90, counted by the changed cell's key and whether it was
caught, with its verdict. Modes: ``visible`` (every process ran with a recorded variable the
baseline's did not: every cell goes to the duet), ``hidden`` (only suspects do), ``ab``.

    .venv/bin/python benchmarks/replay_misses.py visible 6 150
    .venv/bin/python benchmarks/replay_misses.py hidden 6 237 --test-seed

``--test-seed``: the sessions of ``replay_lib.rates`` with tests/test_error_rates.py's seed, in
its order (its first n are the test's n sessions); says which sessions missed, and how many
misses the first 59, 93, 124 ... hold, against error_claims' rule.
"""

import collections
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import replay_lib as L  # noqa: E402


def main(argv) -> int:
    mode, n, sessions = argv[0], int(argv[1]), int(argv[2])
    c = [a.with_fresh(L.MIN_FRESH).with_pairs() for a in L.aa_corpora() if "default" in a.name][0]
    if "--test-seed" in argv:
        return _as_the_test(c, mode, n, sessions)
    rng = random.Random(7)
    by = collections.defaultdict(collections.Counter)
    for _ in range(sessions):
        if mode == "ab":
            s = L.ab_session(c.with_pairs(), n, 0.9, rng)
        else:
            s = L.baseline_session(c, n, 0.9, rng, setup=True, visible=(mode == "visible"))
        by[s.changed_key.split("/threads")[0]][(s.caught, s.changed_kind)] += 1
    for k, v in sorted(by.items()):
        print(k, dict(v))
    return 0


TEST_SEED = 20261125  # tests/test_error_rates.py's SEED


def _as_the_test(c, mode, n, sessions) -> int:
    import error_claims as E
    # the rng replay_lib.rates makes for these arguments: the test's sessions, in its order
    mode_name = {"hidden": "setup", "visible": "setup-visible"}.get(mode, mode)
    rng = random.Random(f"{TEST_SEED}-{mode_name}-{c.name}-{n}-0.9")
    missed = []
    for i in range(sessions):
        if mode == "ab":
            s = L.ab_session(c.with_pairs(), n, 0.9, rng)
        else:
            s = L.baseline_session(c, n, 0.9, rng, setup=True, visible=(mode == "visible"))
        if not s.caught:
            missed.append(i)
            print(f"session {i + 1}: missed {s.changed_key.split('/threads')[0]} ({s.changed_kind})")
    k = 0
    while E.sessions_needed(k) <= sessions:
        m = E.sessions_needed(k)
        got = sum(1 for i in missed if i < m)
        print(f"first {m} sessions: {got} missed; the rule allows {k}: {'supported' if got <= k else 'not supported'}")
        k += 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["visible", "6", "150"]))
