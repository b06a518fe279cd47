"""``python -m pytest_mxperf.history``: the history store from the command line.

    import PATH...      append results.json files (or every one below a folder)
    changes [--cell K]  the change points of every cell (or one), with what changed
    publish OUT/        write the static trend pages
    summary RESULTS     a session as markdown for a CI job summary or a pull-request comment
    scrub               remove credentials (a store URL's password) from every stored row
    alert               one GitHub issue per standing regression's cause (or a webhook's
                        message): opened when new, commented on change, closed on recovery

``--store URL`` (an SQLite path or ``postgresql://...``; default ``$MXPERF_HISTORY`` or
``~/.local/share/pytest-mxperf/history.sqlite``) goes before or after the subcommand.
Errors are one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import List, Optional

from pytest_mxperf.history import alerts, changepoints, ingest, location, pages
from pytest_mxperf.history.store import HistoryError, describe, open_store
from pytest_mxperf.store.results import ResultsError, load_results, markdown_summary


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"{self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def _results_files(paths: List[str]) -> List[Path]:
    out = []
    for p in map(Path, paths):
        out += sorted(p.rglob("results.json")) if p.is_dir() else [p]
    return out


def _common_options(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument("--store", default=default,
                        help="SQLite path or postgresql:// URL (default: $MXPERF_HISTORY or "
                             "~/.local/share/pytest-mxperf/history.sqlite)")


def main(argv: Optional[List[str]] = None) -> int:
    ap = _Parser(prog="python -m pytest_mxperf.history")
    _common_options(ap, default=None)  # open_store(None): $MXPERF_HISTORY or the default path
    # the common options go before or after the subcommand: every subcommand takes them too,
    # with no default there (SUPPRESS), so that one given before the subcommand is kept
    common = argparse.ArgumentParser(add_help=False)
    _common_options(common, default=argparse.SUPPRESS)
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    p_imp = sub.add_parser("import", parents=[common])
    p_imp.add_argument("paths", nargs="+")
    p_ch = sub.add_parser("changes", parents=[common])
    p_ch.add_argument("--cell", default=None)
    p_pub = sub.add_parser("publish", parents=[common])
    p_pub.add_argument("out")
    p_sum = sub.add_parser("summary", parents=[common])
    p_sum.add_argument("results")
    sub.add_parser("scrub", parents=[common])
    p_alert = sub.add_parser("alert", parents=[common])
    alerts.add_arguments(p_alert)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "summary":
            print("\n".join(markdown_summary(load_results(args.results))))
            return 0
        with open_store(args.store) as store:
            if args.cmd == "import":
                files = _results_files(args.paths)
                if not files:
                    raise HistoryError(f"no results.json under {' '.join(args.paths)}")
                added = skipped = bad = 0
                for f in files:
                    try:
                        if store.append(load_results(f)):
                            added += 1
                        else:
                            skipped += 1
                    except (ResultsError, ingest.IngestError) as exc:
                        bad += 1
                        print(f"{f}: skipped: {exc}", file=sys.stderr)
                print(f"imported {added} session(s) into {describe(store.where)}; {skipped} already there; "
                      f"{bad} unusable")
                return 0 if added or skipped else 2
            if args.cmd == "changes":
                # each cell's direction (its Metric's, kept in the store): which sessions are
                # slow spells, and whether a step is worse or better
                higher = {c["key"]: c["higher_is_better"] for c in store.cells()}
                keys = [args.cell] if args.cell else list(higher)
                n = 0
                for key in keys:
                    for ch in changepoints.cell_changes(store.history(key), higher_is_better=higher.get(key, True)):
                        n += 1
                        print(f"{key}  {ch['machine_id']}  {pages.date_text(ch['started'])}  {ch['session']}  "
                              f"x{ch['ratio']:.3f} {'worse' if ch['worse'] else 'better'} "
                              f"({ch['before']:.4g} -> {ch['after']:.4g}, p={ch['p_value']:.2g}"
                              f"{'; its sides lie apart' if ch.get('apart') else ''}): "
                              + "; ".join(ch["changed"]))
                print(f"{n} change point(s) in {len(keys)} cell(s)")
                return 0
            if args.cmd == "alert":
                return alerts.run(store, args, os.environ, lambda line: print(line, flush=True))
            if args.cmd == "scrub":
                n = store.scrub(location.scrub_text)
                print(f"scrubbed {describe(store.where)}: {n} stored value(s) held credentials and were rewritten"
                      + ("; rotate any password that was in them" if n else ""))
                return 0
            if args.cmd == "publish":
                files = pages.publish(store, args.out,
                                      skipped=lambda line: print(f"python -m pytest_mxperf.history: {line}",
                                                                 file=sys.stderr))
                print(f"wrote {len(files)} page(s) to {args.out} (open {Path(args.out) / 'index.html'})")
                return 0
    except (HistoryError, ResultsError, OSError, json.JSONDecodeError) as exc:
        print(f"python -m pytest_mxperf.history: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
