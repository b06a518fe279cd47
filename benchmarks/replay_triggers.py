"""Which trigger could send a hidden -10% change to the duet against the recorded setup in 95%
of sessions, and what each costs an unchanged session (issue 35, parts 1, 2 and 5).

Baseline mode measures a cell again against the recorded setup only when its figures against
the baseline make it a suspect (``outcome/judging.setup_suspects``). In the default
selection's corpus, a duet that runs catches a -10% cell in about 98% of sessions, but the
changed cell often never reaches one: the session's processes read "unchanged" against a
baseline recorded in another of the VM's speed regimes. This replays baseline-mode sessions
(``replay_lib.baseline_session``, mode ``setup``: the product's end of a session, the corpus's
A/A duet pairs as the pairs against the recorded setup) under triggers that send more cells:

* ``trigger T``: the rule before ``thresholds.SETUP_CLEARANCE`` (turned off), with
  ``thresholds.SETUP_TRIGGER`` = T (an unchanged figure worse than the session's common shift
  minus T x the minimum effect is a suspect; 0.5 is the product's);
* ``clearance K``: the product's rule with ``thresholds.SETUP_CLEARANCE`` = K (1.645 is the
  product's): also every unchanged figure whose reading, less the session's common gain,
  does not clear -min_effect by K x the scale of the resolution its baseline states (the
  drift between sessions the baseline knows of): the baseline settles a cell alone only when
  it can exclude a slowdown of the minimum effect. (``resolution K`` in the results files of
  2026-11-27 to 2026-11-29: the same rule tried here before the product had it, the common
  gain taken off the log reading unlogged);
* ``provisional-clears K``: ``clearance K`` with a one-session baseline's provisional
  resolution clearing cells too (``thresholds.PROVISIONAL_CLEARS`` on: the product's rule from
  dbe65db until it was turned off);
* ``every cell``: mode ``setup-visible`` (the setup visibly changed: every cell to the duet),
  the most any trigger can send;
* ``without improvements`` / ``without busy baselines`` / ``shift only``: the product's rule
  with one or both of its other parts off (``thresholds.SUSPECT_IMPROVEMENTS``,
  ``thresholds.SUSPECT_BUSY_BASELINES``): what each part costs an unchanged session and what it
  catches.

And, for the product's rule, a change of the setup that slows several cells at once (2, a third
and all of them x0.90, unseen by the suite): the share of sessions it failed.

For each: unchanged sessions that fail, the -10% cell caught, the cells an unchanged session
sends to the duet, their pairs and the cost model's minutes for them.

    .venv/bin/python benchmarks/replay_triggers.py --sizes 6 25 --sessions 150 --sessions-25 59
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import replay_lib as L  # noqa: E402
from pytest_mxperf.judge import thresholds  # noqa: E402

SEED = 20261125
PRODUCT_TRIGGER = thresholds.SETUP_TRIGGER
PRODUCT_CLEARANCE = thresholds.SETUP_CLEARANCE
PRODUCT_PROVISIONAL = thresholds.PROVISIONAL_CLEARS


def rule(name: str):
    """(replay mode, how to set the product's trigger) of a rule's name."""
    kind, _, value = name.partition(" ")
    if kind == "every":
        return "setup-visible", lambda: None
    if kind == "trigger":
        return "setup", lambda: (setattr(thresholds, "SETUP_TRIGGER", float(value)),
                                 setattr(thresholds, "SETUP_CLEARANCE", None))
    if kind == "clearance":
        return "setup", lambda: setattr(thresholds, "SETUP_CLEARANCE", float(value))
    if kind == "provisional-clears":  # the rule of 2026-11-29 before thresholds.PROVISIONAL_CLEARS
        return "setup", lambda: (setattr(thresholds, "SETUP_CLEARANCE", float(value)),
                                 setattr(thresholds, "PROVISIONAL_CLEARS", True))
    parts = {"without improvements": ("SUSPECT_IMPROVEMENTS",), "without busy baselines": ("SUSPECT_BUSY_BASELINES",),
             "shift only": ("SUSPECT_IMPROVEMENTS", "SUSPECT_BUSY_BASELINES")}
    if name in parts:
        return "setup", lambda: [setattr(thresholds, part, False) for part in parts[name]]
    raise ValueError(name)


PRODUCT_PARTS = {"SUSPECT_IMPROVEMENTS": thresholds.SUSPECT_IMPROVEMENTS,
                 "SUSPECT_BUSY_BASELINES": thresholds.SUSPECT_BUSY_BASELINES}


def reset() -> None:
    thresholds.SETUP_TRIGGER = PRODUCT_TRIGGER
    thresholds.SETUP_CLEARANCE = PRODUCT_CLEARANCE
    thresholds.PROVISIONAL_CLEARS = PRODUCT_PROVISIONAL
    for part, value in PRODUCT_PARTS.items():
        setattr(thresholds, part, value)


def misses(corpus, n: int, sessions: int) -> collections.Counter:
    """The product's rule: a -10% cell missed, by whether it reached the duet."""
    seen = collections.Counter()
    orig = L.run_session
    pairs = [0]

    def counting(c, measures, **kw):
        first = measures[0]

        def m(k, paired=False):
            if paired:
                pairs[0] += k
            return first(k, paired)
        return orig(c, [m] + list(measures[1:]), **kw)
    L.run_session = counting
    try:
        rng = random.Random(f"{SEED}-misses-{n}")
        for _ in range(sessions):
            pairs[0] = 0
            s = L.baseline_session(corpus, n, 0.9, rng, setup=True)
            seen[("caught" if s.caught else "missed", "to the duet" if pairs[0] else "never paired")] += 1
    finally:
        L.run_session = orig
    return seen


def wide(corpus, n: int, sessions: int, changed: int) -> float:
    """The product's rule: the share of sessions in which ``changed`` cells x0.90 (a change of
    the setup that slows many cells at once) failed the session through one of them."""
    rng = random.Random(f"{SEED}-wide-{n}-{changed}")
    return sum(L.baseline_session(corpus, n, 0.9, rng, setup=True, changed_cells=changed).caught
               for _ in range(sessions)) / sessions


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[6, 25])
    ap.add_argument("--sessions", type=int, default=150)
    ap.add_argument("--sessions-25", type=int, default=59, help="sessions at the largest size")
    ap.add_argument("--rules", nargs="*", default=["trigger 0.5", "trigger -1", "clearance 1",
                                                   "clearance 1.645", "every cell"])
    a = ap.parse_args(argv)
    corpus = [c.with_fresh(L.MIN_FRESH).with_pairs() for c in L.aa_corpora() if "default" in c.name][0]
    print(f"corpus {corpus.name}, seed {SEED}; rows: unchanged failed | -10% caught | an unchanged session "
          f"to the duet: cells, pairs, minutes (the cost model's duet pair)")
    t0 = time.process_time()
    for n in a.sizes:
        sessions = a.sessions_25 if n == max(a.sizes) and len(a.sizes) > 1 else a.sessions
        seen = misses(corpus, n, sessions)
        print(f"N={n} the product's rule, a -10% cell in {sessions} sessions: "
              + ", ".join(f"{k[0]} ({k[1]}) {v}" for k, v in sorted(seen.items())), flush=True)
        for changed in sorted({2, max(2, n // 3), n}):
            print(f"N={n} the product's rule, {changed} of the {n} cells x0.90: the session failed through one of "
                  f"them in {100 * wide(corpus, n, sessions, changed):.1f}% of {sessions}", flush=True)
        for name in a.rules:
            mode, apply = rule(name)
            apply()
            try:
                same = L.rates(mode, corpus, n, 1.0, sessions, SEED)
                slow = L.rates(mode, corpus, n, 0.9, sessions, SEED)
            finally:
                reset()
            print(f"N={n:<3d} {name:<18} sessions {sessions:4d}  unchanged failed {100 * same.failed_rate:5.1f}%  "
                  f"-10% caught {100 * slow.caught_rate:5.1f}%  to the duet {same.to_setup:5.2f} cells "
                  f"{same.setup_pairs:6.1f} pairs {same.setup_seconds / 60:5.1f} min", flush=True)
    print(f"took {time.process_time() - t0:.0f} s of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
