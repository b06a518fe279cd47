"""A replay corpus of the default selection's cells, from real sessions' reports (issue 35,
part 2: "a corpus of the default selection's cells recorded for it").

``collect_aa_corpus.py`` records four scoring cells; the default selection (``pytest
perf_tests -m cpu``) also has latency, training, multi-device, input pipeline, kvstore,
distributed and time-to-accuracy cells, each measured its own way. Their real processes are in
the reports (``--perf-report DIR``: ``DIR/results.json``) of sessions that ran the default
selection on this machine with nothing changed:

* **fresh processes** (baseline mode's): a record's runs without ``meta["duet"]`` and
  without a pair (``pair_of``), in the order the sessions ran (``--session`` in time order,
  then the order within the record);
* **A/A pairs**: a record's runs paired with a ``reference_runs`` entry (``pair_of``) where
  both sides ran the same MXNet build: a baseline-mode session's suspects settled against
  the recorded setup when the session's setup *is* the recorded one (an unchanged daily
  session), or an A/A A/B session (``--perf-reference`` the same install). Duet pairs keep
  ``meta["duet"]`` (the replay's ``Pool.duet``); process pairs (distributed, time to
  accuracy) do not.

Only reports of unchanged setups belong here: the script refuses a report whose pairs name
two MXNet builds (``meta["mxnet_version"]`` or libmxnet's features differ), and one whose
session environment sets a variable the others do not (a changed setup's session).
Written in ``collect_aa_corpus.py``'s format (schema 1), so ``replay_lib.load_aa_corpus``
reads it and every replay mode picks it up (``benchmarks/data/aa-corpus-*.json``).

    .venv/bin/python benchmarks/corpus_from_sessions.py --tag default \\
        --session /tmp/daily2/s00-unchanged /tmp/daily2/s02-unchanged ... --pairs-from /tmp/aa-default

A cell whose way of pairing changed gets new pairs in an existing corpus (its fresh processes
and the other cells kept; the corpus's ``sources.pairs_replaced`` says which, from where):

    .venv/bin/python benchmarks/corpus_from_sessions.py --replace-pairs benchmarks/data/aa-corpus-X.json \\
        --pairs-from /tmp/aa-tta/r1 /tmp/aa-tta/r2 ...
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pytest_mxperf.model.jsonio import atomic_write_text  # noqa: E402

SCHEMA = 1
RUN_META = ("duet", "machine_state", "peak_rss_bytes", "mxnet_version")
COMMON_META = ("env", "env_defaults_applied", "threads")


def run_doc(r: Dict[str, Any]) -> Dict[str, Any]:
    """What the judge reads of one run of a report (``collect_aa_corpus.run_doc``'s fields)."""
    meta = r.get("meta") or {}
    d = {"status": r.get("status"), "batches_per_round": r.get("batches_per_round"),
         "round_seconds": [float(f"{x:.7g}") for x in r.get("round_seconds") or []],
         "figures": {k: float(f"{v:.7g}") for k, v in (r.get("figures") or {}).items()},
         "wall_seconds": r.get("wall_seconds") or 0.0, "meta": {k: meta[k] for k in RUN_META if k in meta}}
    if r.get("status") != "ok":
        d["message"] = r.get("message", "")
    return d


def _build(r: Dict[str, Any]):
    meta = r.get("meta") or {}
    return meta.get("mxnet_version"), tuple(meta.get("features") or ())


class Refused(ValueError):
    pass


def records(report: Path) -> List[Dict[str, Any]]:
    doc = json.loads((report / "results.json").read_text())
    return doc["records"]


def gather(sessions: List[Path], pairs_from: List[Path]) -> Dict[str, Any]:
    cells: Dict[str, Dict[str, Any]] = {}
    machine: Optional[Dict[str, Any]] = None
    env0: Optional[Dict[str, str]] = None
    t = 0.0
    for i, report in enumerate(list(sessions) + list(pairs_from)):
        doc = json.loads((report / "results.json").read_text())
        m = doc.get("machine") or {}
        if machine is None:
            machine = m
        elif m.get("id") != machine.get("id"):
            raise Refused(f"{report}: machine {m.get('id')}, not {machine.get('id')}")
        for rec in doc["records"]:
            runs = rec.get("runs") or []
            refs = rec.get("reference_runs") or []
            if not runs or rec.get("workload") is None:
                continue
            cell = cells.setdefault(rec["key"], {"workload": rec["workload"], "meta_common": None,
                                                 "pairs": [], "fresh": []})
            by_process = {r.get("process"): r for r in runs}
            paired = {(ref.get("meta") or {}).get("pair_of") for ref in refs}
            for r in runs:
                if r.get("status") == "ok" and cell["meta_common"] is None:
                    cell["meta_common"] = {k: (r.get("meta") or {}).get(k) for k in COMMON_META}
                    env = cell["meta_common"].get("env") or {}
                    if env0 is None:
                        env0 = env
            if report in sessions:
                for j, r in enumerate(runs):
                    if "duet" in (r.get("meta") or {}) or r.get("process") in paired:
                        continue
                    t += 1.0
                    cell["fresh"].append({"round": i, "t": t, "loadavg": None, "run": run_doc(r)})
            for j, ref in enumerate(refs):
                c = by_process.get((ref.get("meta") or {}).get("pair_of"))
                if c is None:
                    continue
                if c.get("status") == "ok" and ref.get("status") == "ok" and _build(c) != _build(ref):
                    raise Refused(f"{report}: {rec['key']}: the pair's sides ran two builds "
                                  f"({_build(c)[0]} and {_build(ref)[0]}): not an unchanged setup")
                t += 1.0
                cell["pairs"].append({"round": i, "t": t, "candidate_first": bool(
                    ((c.get("meta") or {}).get("duet") or {}).get("ran_first", j % 2 == 0)),
                    "loadavg": None, "bracket": None, "candidate": run_doc(c), "reference": run_doc(ref)})
    if machine is None:
        raise Refused("no report given")
    return {"machine": machine, "cells": cells}


def replace_pairs(corpus: Path, pairs_from: List[Path], command: str) -> Dict[str, Any]:
    """The corpus ``corpus`` with the A/A pairs of every cell the reports ``pairs_from`` hold
    in place of its own (its fresh processes and its other cells kept): how a cell whose way of
    pairing changed (time to accuracy, from process pairs to duet pairs) gets pairs measured
    the new way. The reports must be of the corpus's machine."""
    data = json.loads(corpus.read_text())
    got = gather([], pairs_from)
    if got["machine"].get("id") != data["machine"]["id"]:
        raise Refused(f"the reports are of machine {got['machine'].get('id')}, the corpus of {data['machine']['id']}")
    replaced = {}
    for key, cell in got["cells"].items():
        if not cell["pairs"]:
            continue
        if key not in data["cells"]:
            raise Refused(f"{key}: not a cell of {corpus.name}")
        data["cells"][key]["pairs"] = cell["pairs"]
        replaced[key] = len(cell["pairs"])
    if not replaced:
        raise Refused("the reports hold no A/A pair")
    data.setdefault("sources", {}).setdefault("pairs_replaced", []).append(
        {"cells": replaced, "pairs_from": [str(x) for x in pairs_from],
         "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "command": command})
    return data


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--replace-pairs"]:
        ap = argparse.ArgumentParser(description="replace the A/A pairs of the cells the reports hold")
        ap.add_argument("--replace-pairs", type=Path, required=True, metavar="CORPUS")
        ap.add_argument("--pairs-from", nargs="+", type=Path, required=True)
        args = ap.parse_args(argv)
        try:
            data = replace_pairs(args.replace_pairs, args.pairs_from,
                                 "python benchmarks/corpus_from_sessions.py " + " ".join(argv))
        except (Refused, OSError, KeyError, json.JSONDecodeError) as e:
            print(f"corpus_from_sessions: {e}", file=sys.stderr)
            return 2
        atomic_write_text(args.replace_pairs, json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n")
        for key, n in data["sources"]["pairs_replaced"][-1]["cells"].items():
            print(f"{key}: its pairs replaced by {n} from the reports")
        print(f"wrote {args.replace_pairs}")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--session", nargs="+", type=Path, required=True,
                    help="report directories of unchanged baseline-mode sessions, in the order they ran")
    ap.add_argument("--pairs-from", nargs="*", type=Path, default=[],
                    help="report directories of A/A A/B sessions (their pairs only)")
    ap.add_argument("--tag", default="default")
    ap.add_argument("--out-dir", type=Path, default=HERE / "data")
    args = ap.parse_args(argv)
    try:
        got = gather(args.session, args.pairs_from)
    except (Refused, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"corpus_from_sessions: {e}", file=sys.stderr)
        return 2
    m = got["machine"]
    hw = m.get("hardware") or {}
    out = args.out_dir / f"aa-corpus-{m['id']}-{args.tag}.json"
    data = {
        "schema": SCHEMA,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"id": m["id"], "cpu_model": hw.get("cpu_model") or m.get("cpu_model"),
                    "logical_cpus": hw.get("logical_cpus") or m.get("logical_cpus"), "hardware": hw},
        "command": "python benchmarks/corpus_from_sessions.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "note": ("The default selection's cells (pytest perf_tests -m cpu) from real sessions' reports on this "
                 "machine: fresh = the processes of unchanged baseline-mode sessions, in the order the sessions "
                 "ran; pairs = A/A pairs (the session's setup against the same recorded setup, or an A/A A/B "
                 "session). t orders them, in no unit; no load bracket was recorded."),
        "mxnet_version": "1.9.1",
        "features": None,
        "sources": {"sessions": [str(p) for p in args.session], "pairs_from": [str(p) for p in args.pairs_from]},
        "cells": got["cells"],
        "finished_rounds": len(args.session) + len(args.pairs_from),
    }
    atomic_write_text(out, json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n")
    for key, c in sorted(got["cells"].items()):
        print(f"{key}: {len(c['fresh'])} processes, {len(c['pairs'])} pairs")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
