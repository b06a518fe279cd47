"""Four runners writing one PostgreSQL history store at once, and a writer killed mid-session.

    python benchmarks/history_fleet.py --url postgresql://USER@127.0.0.1:PORT/DB [--writers 4] [--sessions 50]

Each writer appends SESSIONS sessions of 20 cells as one fleet (its shard K/N), each session
twice (a retry adds nothing). Then a fifth writer is killed with SIGKILL while it appends;
the store must still open and hold every session it finished. Prints what it found.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import time

from pytest_mxperf.history.store import open_store


def _doc(name: str, i: int, shard: str, cells: int = 20):
    records = [{"key": f"score/model{c}/b8/cpu:0/float32/threads=auto", "status": "ok", "metric": "throughput",
                "unit": "img/s", "median": 100.0, "process_medians": [99.0, 100.0, 101.0],
                "runs": [{"status": "ok", "median": v, "figures": {}, "meta": {}} for v in (99.0, 100.0, 101.0)]}
               for c in range(cells)]
    return {"machine": {"id": f"runner-{name}"}, "records": records,
            "session": {"id": f"{name}-{i}", "started": time.time(), "fleet_id": "fleet-1", "shard": shard,
                        "software": {"mxnet_version": "1.9.1"}, "verdicts": {}}}


def _writer(url: str, name: str, n: int, shard: str, pipe=None) -> None:
    with open_store(url) as store:
        for i in range(n):
            store.append(_doc(name, i, shard))
            store.append(_doc(name, i, shard))
            if pipe is not None:
                pipe.send(i)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--sessions", type=int, default=50)
    args = ap.parse_args()
    ctx = multiprocessing.get_context("spawn")
    t0 = time.perf_counter()
    procs = [ctx.Process(target=_writer, args=(args.url, f"w{k}", args.sessions, f"{k + 1}/{args.writers}"))
             for k in range(args.writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    took = time.perf_counter() - t0
    with open_store(args.url) as store:
        ids = [s for s in store.session_ids() if s.startswith("w")]
        fleet = store.fleet_session("fleet-1")
    print(f"{args.writers} writers x {args.sessions} sessions (each sent twice) in {took:.1f} s: "
          f"{len(ids)} sessions stored, {len(set(ids))} distinct; exit codes {[p.exitcode for p in procs]}; "
          f"fleet shards {fleet['shards']}, missing {fleet['missing_shards']}")
    parent, child = ctx.Pipe()
    victim = ctx.Process(target=_writer, args=(args.url, "victim", 1000, "1/1", child))
    victim.start()
    done = []
    while len(done) < 10:
        done.append(parent.recv())
    os.kill(victim.pid, signal.SIGKILL)
    victim.join()
    while parent.poll():
        done.append(parent.recv())
    with open_store(args.url) as store:
        kept = {s for s in store.session_ids() if s.startswith("victim-")}
        partial = [s for s in kept
                   if store._rows("SELECT count(*) FROM cell_results WHERE session_id = ?", (s,))[0][0] != 20]
    missing = [i for i in done if f"victim-{i}" not in kept]
    print(f"writer killed with SIGKILL after {len(done)} finished sessions: the store opens; {len(kept)} victim "
          f"sessions stored, finished ones missing: {missing}, partial sessions: {partial}")
    return 0 if len(ids) == len(set(ids)) == args.writers * args.sessions and not missing and not partial else 1


if __name__ == "__main__":
    sys.exit(main())
