"""The route of the session object through the end of a session: which modules it stops
in, in call order, and how often that route climbs back up to a higher floor
(docs/architecture.md's floors) or returns to a module it had left.

A session of stand-in processes (no worker starts: the figures are made here, the profile
worker answers "unavailable") is recorded as a baseline, then measured again with one cell
8% slower (so that a suspect is confirmed through the session) and two tests measuring one
cell; ``outcome/finish.end_session`` of that second session is traced with
``sys.setprofile``: every call of a function of the package that has the session among its
arguments or locals is a stop.

    python scripts/session_route.py            # this checkout
    PYTHONPATH=<other checkout> python scripts/session_route.py   # another commit
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from unittest import mock

FLOORS = [
    {"model", "zoo", "workers"}, {"proc"}, {"machine"}, {"judge"}, {"store", "history"},
    {"measure"}, {"output"}, {"outcome"}, {"cli"}, {"plugin", "command_line", "hookspecs", ""},
]


def floor(module: str) -> int:
    part = module.split(".")[1] if "." in module else ""
    return next(i for i, names in enumerate(FLOORS) if part in names)


def _session(tmp: Path, *, record: bool, slow: float):
    from pytest_mxperf.measure.session import CellRecord, PerfSession
    from pytest_mxperf.model.measurement import CellMeasurement, RunResult
    from pytest_mxperf.model.options import PerfOptions
    from pytest_mxperf.model.workload import Workload

    options = PerfOptions(machine_probe=False, update_baselines=record, baselines_dir=str(tmp / "bl"),
                          report_dir=str(tmp / ("rec" if record else "rep")), history=str(tmp / "h.sqlite"))
    session = PerfSession(options, environ={})
    session.machine = {"id": "route-box", "hardware": {}}
    if not record:
        session.baseline = session.store.load("route-box")
    cells = [("lenet", 1.0, "t::a"), ("alexnet", slow, "t::b"), ("mlp", 1.0, "t::c"), ("mlp", 1.0, "t::d")]
    for i, (model, factor, nodeid) in enumerate(cells):
        w = Workload(model, mode="score", batch_size=8)

        def runs(n, factor=factor, w=w, seed=i):
            return [RunResult(w, "ok", batches_per_round=1,
                              round_seconds=[8.0 / (100.0 * factor * (1.0 + 0.004 * ((j * 7 + seed) % 5)))],
                              meta={"env": {}, "mxnet_version": "1.9.1", "peak_rss_bytes": 10 ** 9})
                    for j in range(n)]
        n = 5 if record else 2
        session.add(CellRecord(nodeid, CellMeasurement(w, runs(n)), outcome="passed",
                               remeasure=lambda k, runs=runs, w=w: CellMeasurement(w, runs(k))))
    return session


def route(session) -> list:
    from pytest_mxperf.outcome import finish
    stops = []

    def prof(frame, event, arg):
        if event != "call":
            return
        name = frame.f_globals.get("__name__", "")
        if not name.startswith("pytest_mxperf"):
            return
        if any(v is session for v in frame.f_locals.values()):
            caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
            stops.append((name, frame.f_code.co_name, caller))
    sys.setprofile(prof)
    try:
        finish.end_session(session)
    finally:
        sys.setprofile(None)
    return stops


def summarise(stops) -> dict:
    modules = [m for m, _, _ in stops]
    # a call from a module of a lower floor into one of a higher floor (a callback up the layers)
    upward = [(c, m) for m, _, c in stops if c.startswith("pytest_mxperf") and floor(m) > floor(c)]
    climbs = sum(floor(b) > floor(a) for a, b in zip(modules, modules[1:]))
    left, returns, prev = set(), 0, None
    for m in modules:
        if m != prev:
            if m in left:
                returns += 1
            if prev is not None:
                left.add(prev)
        prev = m
    return {"stops": len(stops), "modules": len(set(modules)), "climbs": climbs, "returns": returns,
            "upward": upward}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print every stop")
    args = ap.parse_args(argv)
    from pytest_mxperf.measure import profiling

    def unavailable(*a, **k):
        return {"status": "unavailable", "message": "stand-in session: no worker", "operators": []}
    with tempfile.TemporaryDirectory() as d, mock.patch.object(profiling, "run_profile", unavailable):
        tmp = Path(d)
        from pytest_mxperf.outcome import finish
        finish.end_session(_session(tmp, record=True, slow=1.0))
        session = _session(tmp, record=False, slow=0.92)
        stops = route(session)
        s = summarise(stops)
        if args.list:
            for m, f, c in stops:
                print(f"  {floor(m)} {m}.{f}  (from {c})")
        print(f"stops {s['stops']} in {s['modules']} modules; climbs back up {s['climbs']}; "
              f"returns to a module already left {s['returns']}; calls up a floor {len(s['upward'])} "
              f"{sorted(set(s['upward']))}; outcome: "
              + ", ".join(sorted({v.kind for v in session.outcome.verdicts.values()})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
