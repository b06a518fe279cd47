"""What a change of the package's structure must not change, printed from one tree of the code so
that two trees' outputs can be diffed (issue 77: the registry of kinds of cell): the figures,
keys and metric keys of recorded session results; a recorded baseline as it is read; the
offline comparison of two results files (its lines and exit status); and replayed sessions
through the real end of a session (``replay_lib.rates``, every mode, unchanged and x0.90) on
the committed corpora. Deterministic: the same tree prints the same text on any machine.

    python benchmarks/same_outputs.py --tree OLD_CHECKOUT --results A.json B.json --baseline BL.json > old.txt
    python benchmarks/same_outputs.py --tree . --results A.json B.json --baseline BL.json > new.txt
    diff old.txt new.txt
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import io
import json
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", required=True, help="the checkout whose package and benchmarks/ are read")
    ap.add_argument("--results", nargs="*", default=[], help="results.json files (.gz read too)")
    ap.add_argument("--baseline", nargs="*", default=[], help="baseline files")
    ap.add_argument("--sessions", type=int, default=20)
    a = ap.parse_args()
    tree = Path(a.tree).resolve()
    sys.path[:0] = [str(tree), str(tree / "benchmarks")]
    import replay_lib as L
    from pytest_mxperf.cli import compare
    from pytest_mxperf.model.measurement import CellMeasurement, metric_key
    from pytest_mxperf.store.baselines import Baseline
    import pytest_mxperf
    for module in (L, pytest_mxperf):  # the tree's own code, not an installed copy
        assert Path(module.__file__).resolve().is_relative_to(tree), module.__file__

    def read(path: str) -> dict:
        raw = Path(path).read_bytes()
        return json.loads(gzip.decompress(raw) if path.endswith(".gz") else raw)

    for path in a.results:
        print(f"== results {Path(path).name}")
        for rec in read(path)["records"]:
            cell = CellMeasurement.from_dict(rec)
            names = [m.name for m in cell.metrics()]
            keys = [metric_key(rec["key"], n, cell.workload.mode) for n in names]
            print(rec["key"], cell.workload.key() == rec["key"], cell.primary.name, names, keys,
                  sorted(rec.get("verdicts") or {}))
    for path in a.baseline:
        print(f"== baseline {Path(path).name}")
        b = Baseline.load(path)
        print(b.dumps())
    for old, new in zip(a.results, a.results[1:]):
        plain = [p for p in (old, new) if not p.endswith(".gz")]
        if len(plain) < 2:
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                code = compare.main([old, new])
            except SystemExit as exc:
                code = exc.code
        print(f"== compare {Path(old).name} {Path(new).name}: exit {code}")
        print(out.getvalue())
    quiet = L.load_aa_corpus(L.DATA_DIR / "aa-corpus-amd-epyc-2c-9e858421-quiet.json")
    default = L.load_aa_corpus(next(iter(sorted(L.DATA_DIR.glob("aa-corpus-intel-*-default.json")))))
    for corpus in (quiet.with_fresh(L.MIN_FRESH).with_pairs(), default.with_fresh(L.MIN_FRESH).with_pairs()):
        for mode in ("ab", "ab-history", "baseline", "setup"):
            for effect in (1.0, 0.90):
                r = L.rates(mode, corpus, 6, effect, a.sessions, 20261125)
                # without ``seconds``: what the judging took this process, not what it decided
                print(f"== replay {corpus.name} {mode} x{effect}: {dataclasses.replace(r, seconds=0.0)}")


if __name__ == "__main__":
    main()
