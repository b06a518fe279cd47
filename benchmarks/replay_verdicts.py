"""Every replayed session's verdicts, kept, so that a change of the product's end of a
session can be shown to keep its behaviour (or where it does not).

Replays every corpus ``replay_lib`` loads through the end of a session (``outcome.finish.end_session``; before the core's rebuild, ``finish_session``):

* A/B mode: ``replay_lib.ab_session`` over the A/A corpora's duet pairs (``aa_corpora()``)
  and the regime file's 12 A/A process pairs (``load_regime_pairs()``);
* baseline mode: ``replay_lib.baseline_session`` over ``baseline_corpora()``;

at N = 6 and 24 cells, effects x1.00 and x0.90 on cell 0, ``--sessions`` sessions each,
session i of a combination seeded by its own string (``replay-verdicts-<mode>-<corpus>-<N>-
<effect>-<i>``: a session's draws do not depend on the sessions before it). The clock is
held (``replay_clock.fixed_clock``): the confirmation budget is exactly CONFIRM_FLOOR_S on
any machine, however fast it replays. Written per session: corpus, mode, N, effect,
session, failed, kinds, cell_kinds (every cell's verdict kind, cell 0 the changed one),
confirmed (``SessionResult.second_stage``) and units.

    .venv/bin/python benchmarks/replay_verdicts.py --out /tmp/before.json      # the code before a change
    .venv/bin/python benchmarks/replay_verdicts.py --out /tmp/after.json       # the code after it
    .venv/bin/python benchmarks/replay_verdicts.py --compare /tmp/before.json /tmp/after.json

``--compare BEFORE AFTER`` prints, per (mode, corpus, N, effect), the sessions and how many
have the same cell_kinds, failed and kinds in both files, with the first differing
sessions; it exits 1 when any differ (or a combination or session is in one file only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import replay_lib as L  # noqa: E402
from replay_clock import fixed_clock  # noqa: E402

SIZES = (6, 24)
EFFECTS = (1.0, 0.90)
SESSIONS = 20
SCHEMA = 1
#: what --compare requires to be the same in both files
SAME = ("cell_kinds", "failed", "kinds")
#: shown beside them (a change there is reported, not failed on)
ALSO = ("confirmed", "units")


def combinations() -> List[Tuple[str, L.Corpus]]:
    """(mode, corpus) of every corpus replay_lib loads, A/B first."""
    ab = [c.with_pairs() for c in L.aa_corpora()] + [L.load_regime_pairs()]
    return [("ab", c) for c in ab if c.pools] + [("baseline", c) for c in L.baseline_corpora()]


def seed(mode: str, corpus: str, n: int, effect: float, i: int) -> str:
    return f"replay-verdicts-{mode}-{corpus}-{n}-{effect}-{i}"


def run(sessions: int, sizes=SIZES, effects=EFFECTS, say=print) -> Dict[str, Any]:
    import random

    out: List[Dict[str, Any]] = []
    cpu: Dict[str, float] = {}
    t0 = time.process_time()
    # the replay's own simulated clock (replay_lib.ReplayClock) held still where it has one:
    # the session starts at 0 and no time passes, so the budget is CONFIRM_FLOOR_S
    fixed_before = getattr(L, "FIXED_BUDGET", None)
    if fixed_before is not None:
        L.FIXED_BUDGET = True
        say("replay_verdicts: replay_lib.FIXED_BUDGET held (the replayed session's clock stands at 0)")
    with fixed_clock(say=say) as clock:
        for mode, corpus in combinations():
            one = L.ab_session if mode == "ab" else L.baseline_session
            for n in sizes:
                for e in effects:
                    c0 = time.process_time()
                    rows = []
                    for i in range(sessions):
                        s = one(corpus, n, e, random.Random(seed(mode, corpus.name, n, e, i)))
                        rows.append({"corpus": corpus.name, "mode": mode, "n": n, "effect": e, "session": i,
                                     "failed": bool(s.failed), "kinds": list(s.kinds),
                                     "cell_kinds": list(s.cell_kinds), "confirmed": s.second_stage,
                                     "units": s.units})
                    out += rows
                    cpu[f"{mode} | {corpus.name} | N={n} | x{e:.2f}"] = round(time.process_time() - c0, 2)
                    say(summary_line(mode, corpus.name, n, e, rows) + f"  {cpu[list(cpu)[-1]]:6.1f} s CPU")
    if fixed_before is not None:
        L.FIXED_BUDGET = fixed_before
    budgets = sorted(set(clock.budgets))
    floor = _confirm_floor()
    if floor is not None and any(b != floor for b in budgets):
        say(f"replay_verdicts: confirmation budgets other than CONFIRM_FLOOR_S ({floor:g} s) were seen: {budgets} "
            "(the clock is read somewhere it is not held: see replay_clock.TARGETS)")
    return {"schema": SCHEMA,
            "what": "replay_verdicts: every replayed session's verdicts (benchmarks/replay_verdicts.py)",
            "commit": _commit(), "python": platform.python_version(), "cpu_model": cpu_model(),
            "sessions_per_combination": sessions, "sizes": list(sizes), "effects": list(effects),
            "clock": {"held": clock.patched, "skipped": clock.skipped,
                      "confirmation_budgets_seen": budgets, "confirmation_plans": len(clock.budgets)},
            "cpu_seconds": round(time.process_time() - t0, 1), "cpu_seconds_per_combination": cpu,
            "sessions": out}


def summary_line(mode: str, corpus: str, n: int, effect: float, rows: List[Dict[str, Any]]) -> str:
    failed = sum(r["failed"] for r in rows)
    kinds = Counter(k for r in rows for k in r["kinds"])
    by_kind = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "-"
    changed: Dict[str, int] = {}
    for r in rows:
        changed[str(r["cell_kinds"][0])] = changed.get(str(r["cell_kinds"][0]), 0) + 1
    ch = ", ".join(f"{k} {v}" for k, v in sorted(changed.items(), key=lambda kv: (-kv[1], kv[0])))
    confirmed = sum(r["confirmed"] for r in rows)
    return (f"{mode:<8} {corpus:<62} N={n:<3d} x{effect:.2f}  sessions {len(rows):3d}  failed {failed:3d} "
            f"({by_kind})  cell 0: {ch}  re-measured cells {confirmed}")


def _confirm_floor():
    try:
        from pytest_mxperf.outcome import judging
    except ImportError:
        return None
    return getattr(judging, "CONFIRM_FLOOR_S", None)


def cpu_model() -> str:
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit() -> str:
    try:
        r = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(HERE.parent), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return r.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


# ----------------------------------------------------------------------------- compare

def _key(r: Dict[str, Any]) -> Tuple[str, str, int, float]:
    return (r["mode"], r["corpus"], int(r["n"]), float(r["effect"]))


def _brief(r: Dict[str, Any]) -> str:
    return (f"failed={r['failed']} kinds={','.join(r['kinds']) or '-'} confirmed={r['confirmed']} units={r['units']} "
            f"cells={_cells(r['cell_kinds'])}")


def _cells(kinds: List[Any]) -> str:
    """cell kinds, runs of the same kind shortened: unchanged x5, regression, ..."""
    out: List[str] = []
    for k in kinds:
        k = str(k)
        if out and out[-1][0] == k:
            out[-1][1] += 1
        else:
            out.append([k, 1])
    return "[" + ", ".join(k if n == 1 else f"{k} x{n}" for k, n in out) + "]"


def compare(before_path: Path, after_path: Path, show: int = 3, say=print) -> int:
    before = json.loads(Path(before_path).read_text())
    after = json.loads(Path(after_path).read_text())
    groups: Dict[Tuple, Dict[str, Dict[int, Dict[str, Any]]]] = {}
    for side, doc in (("before", before), ("after", after)):
        for r in doc["sessions"]:
            groups.setdefault(_key(r), {"before": {}, "after": {}})[side][int(r["session"])] = r
    say(f"before: {before_path} (commit {before.get('commit')})")
    say(f"after:  {after_path} (commit {after.get('commit')})")
    for side, doc in (("before", before), ("after", after)):
        clock = doc.get("clock") or {}
        if clock.get("skipped"):
            say(f"{side}: clock not held at: {'; '.join(clock['skipped'])}")
    say("")
    w = max([len(k[1]) for k in groups] + [6])
    say(f"{'mode':<8} {'corpus':<{w}} {'N':>3} {'effect':>6}  {'sessions':>8}  {'same':>5}  {'differ':>6}  "
        f"also differ in confirmed/units")
    bad = 0
    details: List[str] = []
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2], -k[3])):
        g = groups[key]
        idx = sorted(set(g["before"]) | set(g["after"]))
        same = differ = only = also = 0
        shown = 0
        for i in idx:
            b, a = g["before"].get(i), g["after"].get(i)
            if b is None or a is None:
                only += 1
                if shown < show:
                    details.append(f"  {key[0]} {key[1]} N={key[2]} x{key[3]:.2f} session {i}: only in "
                                   f"{'after' if b is None else 'before'}")
                    shown += 1
                continue
            if all(b[f] == a[f] for f in SAME):
                same += 1
                also += any(b.get(f) != a.get(f) for f in ALSO)
            else:
                differ += 1
                if shown < show:
                    details.append(f"  {key[0]} {key[1]} N={key[2]} x{key[3]:.2f} session {i}:\n"
                                   f"      before {_brief(b)}\n      after  {_brief(a)}")
                    shown += 1
        bad += differ + only
        sessions = f"{len(g['before'])}/{len(g['after'])}" if len(g["before"]) != len(g["after"]) else str(len(idx))
        say(f"{key[0]:<8} {key[1]:<{w}} {key[2]:>3} {key[3]:>6.2f}  {sessions:>8}  {same:>5}  "
            f"{differ + only:>6}  {also if also else ''}")
    say("")
    if details:
        say("first differing sessions (at most %d a combination):" % show)
        for d in details:
            say(d)
        say("")
    total = sum(len(set(g["before"]) | set(g["after"])) for g in groups.values())
    say(f"{total - bad} of {total} sessions the same (cell_kinds, failed, kinds); {bad} differ")
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=SESSIONS, help="sessions a combination")
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--effects", type=float, nargs="+", default=list(EFFECTS))
    ap.add_argument("--out", type=Path, default=None, help="the JSON file to write")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"),
                    help="compare two files written by this tool; exit 1 when any session differs")
    a = ap.parse_args(argv)
    if a.compare:
        return compare(*a.compare)
    if a.out is None:
        ap.error("--out FILE (or --compare BEFORE AFTER)")
    doc = run(a.sessions, a.sizes, a.effects)
    doc["command"] = "python " + " ".join(
        [os.path.relpath(Path(sys.argv[0]).resolve(), HERE.parent)] + list(argv if argv is not None else sys.argv[1:]))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=None, separators=(",", ":")).replace('},{"corpus"', '},\n{"corpus"') + "\n")
    print(f"{len(doc['sessions'])} sessions, {doc['cpu_seconds']} s CPU; confirmation budgets seen: "
          f"{doc['clock']['confirmation_budgets_seen']} in {doc['clock']['confirmation_plans']} plan(s); "
          f"clock held at {', '.join(doc['clock']['held']) or 'nothing'}; written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
