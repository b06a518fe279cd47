"""Which changed cell a replayed session missed (issue 35): sessions of the default selection's
corpus (``replay_lib``), one cell x0.90, counted by the changed cell's key and whether it was
caught, with its verdict. Modes: ``visible`` (every process ran with a recorded variable the
baseline's did not: every cell goes to the duet), ``hidden`` (only suspects do), ``ab``.

    .venv/bin/python benchmarks/replay_misses.py visible 6 150
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["visible", "6", "150"]))
