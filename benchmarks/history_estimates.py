"""What the first line's estimate from history would have said for each session of a kind on a
machine, from the sessions before it: the last 3 of the kind whatever their setup, against the
last 3 of the same setup (``planning.same_setup``), each made by the product's ``known_from``
as the first line makes it when every test of the session is known (the median time of each
test and of the time outside the tests). A session's setup is read from its row as its probe
would read it: its workers' recorded variables without the thread count the suite fills
(``OMP_NUM_THREADS`` = ``--cores``).

    python benchmarks/history_estimates.py --machine amd-epyc-2c-9e858421 --kind baseline --cores 2
"""
from __future__ import annotations

import argparse
import datetime

from pytest_mxperf.history.store import default_location, open_store
from pytest_mxperf.measure import planning


def first_line_seconds(rows) -> float:
    known = planning.known_from(rows[:3])
    return (known.overhead or 0.0) + sum(t for _, t in known.tests)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None, help="history store (default: the suite's)")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--kind", default="baseline")
    ap.add_argument("--cores", type=int, required=True, help="the thread count the suite fills on that machine")
    args = ap.parse_args(argv)
    with open_store(args.store or default_location()) as store:
        rows = store.durations(args.machine, args.kind, 10_000)[::-1]  # oldest first
        started = {s["id"]: s["started"] for s in store.sessions()}
    print("| session start (UTC) | setup | pytest wall, min | last 3, any setup (off) | last 3 of the setup (off) |")
    print("|---|---|---|---|---|")
    for i, row in enumerate(rows):
        before = rows[:i][::-1]
        if not before:
            continue
        env = {k: v for k, v in row["setup"]["environment"].items()
               if not (k in planning.SUITE_FILLED and v == str(args.cores))}
        setup = {**row["setup"], "environment": env}
        same = [b for b in before if planning.same_setup(b["setup"], setup)]
        wall = row["wall_seconds"]
        any_s, same_s = first_line_seconds(before), first_line_seconds(same or before)
        when = datetime.datetime.fromtimestamp(started[row["session"]], datetime.timezone.utc).strftime("%m-%d %H:%M")
        words = ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "as recorded"
        print(f"| {when} | MXNet {setup['mxnet_version']}, {words} | {wall / 60:.1f} | {any_s / 60:.1f} "
              f"({any_s / wall - 1:+.0%}) | {same_s / 60:.1f} ({same_s / wall - 1:+.0%})"
              f"{'' if same else ', none of the setup before: any'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
