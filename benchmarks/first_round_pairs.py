"""What a baseline session's first round against the recorded setup was expected to cost, cell by
cell, against what it took.

    python benchmarks/first_round_pairs.py REPORT_DIR/results.json SESSION.log MEASURED_MIN

The expected cost of a pair is the product's own (``planning.setup_pair_seconds``, from the
cell's measuring processes in results.json, as the session had them when it planned the
round); what a cell took is the time between its "re-measured i of n suspect cell(s)" line
and the one before (the first from ``MEASURED_MIN``, the minutes gone when the measuring
ended: the session's last "cell(s) measured" line), divided by its pairs (3 for a duet cell,
12 for process pairs: the first round of the default options). The session's log is what
pytest printed (``pytest perf_tests -m cpu ... > SESSION.log``).
"""

from __future__ import annotations

import json
import re
import sys
import types

from pytest_mxperf.measure import planning
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.options import PerfOptions

FIRST_ROUND_DUET_PAIRS = 3
FIRST_ROUND_PROCESS_PAIRS = 12


def first_round_minutes(log: str, measured_min: float) -> dict:
    """{cell key: minutes its first-round re-measuring took} from a session's printed lines."""
    first = log.split("measured again against the recorded setup", 2)[1]
    out, prev = {}, measured_min
    for m in re.finditer(r"re-measured \d+ of \d+ suspect cell\(s\) \(([^)]*)\), ([\d.]+) min gone", first):
        t = float(m.group(2))
        out[m.group(1)] = t - prev
        prev = t
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print("usage: " + next(ln.strip() for ln in __doc__.splitlines() if ln.strip().startswith("python ")),
              file=sys.stderr)
        return 2
    doc = json.loads(open(argv[0]).read())
    taken = first_round_minutes(open(argv[1]).read(), float(argv[2]))
    o = PerfOptions()
    predicted_s = taken_s = 0.0
    for r in doc["records"]:
        if r["key"] not in taken:
            continue
        runs = [RunResult.from_dict(x) for x in r["runs"]]
        measured = [x for x in runs if not x.meta.get("duet")]
        duets = any(x.meta.get("duet") for x in runs)
        rec = types.SimpleNamespace(duets=duets, cell=CellMeasurement(measured[0].workload, measured))
        pair = planning.setup_pair_seconds(rec, o)
        n = FIRST_ROUND_DUET_PAIRS if duets else FIRST_ROUND_PROCESS_PAIRS
        took = taken[r["key"]] * 60 / n
        predicted_s += pair * n
        taken_s += took * n
        print(f"{r['key'][:64]:<64} a pair: predicted {pair:5.1f} s, taken {took:5.1f} s ({100 * (pair / took - 1):+4.0f}%)")
    print(f"first round: predicted {predicted_s / 60:.1f} min, taken {taken_s / 60:.1f} min "
          f"({100 * (predicted_s / taken_s - 1):+.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
