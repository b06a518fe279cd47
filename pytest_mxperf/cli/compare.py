"""Offline, benchstat-like comparison of two session results, and baseline promotion.

    python -m pytest_mxperf.cli.compare OLD.json NEW.json [--min-effect 0.05] [--fdr 0.05]
    python -m pytest_mxperf.cli.compare promote RESULT.json [--baselines-dir D] [--machine NAME]

The comparison uses exactly the statistics of ``verdict.judge_session`` (per-process
figures of every judged metric, machine-state labels, threshold ``max(min_effect, noise
allowance)``, one-sided Mann-Whitney, Benjamini-Hochberg across the compared figures); the
files' processes are all there is, so an unclear slowdown is "unresolved". Exit codes:
0 nothing failing, 1 at least one regression or unresolved slowdown, 2 bad input
(one-line message on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from typing import Any, Dict, List, Optional, Sequence

from pytest_mxperf.judge import context_diff, machine_states, thresholds
from pytest_mxperf.judge import verdict as V
from pytest_mxperf.model.measurement import (
    CellMeasurement,
    metric_key,
    split_metric_key,
)
from pytest_mxperf.store.results import Results, ResultsError


def _spread_pct(rec: Dict[str, Any]) -> str:
    sp = rec.get("spread") or {}
    rel = sp.get("rel")
    return f"±{100 * rel:.0f}%" if isinstance(rel, (int, float)) else "    "


def _fmt_side(rec: Optional[Dict[str, Any]], metric: str = "") -> str:
    if not rec:
        return "-"
    if metric:
        vals = _cell(rec).values(metric)
        return f"{statistics.median(vals):.4g} n={len(vals)}" if vals else "-"
    if rec.get("median") is None:
        return "-"
    return f"{rec['median']:.4g} {_spread_pct(rec)} n={len(rec.get('process_medians') or [])}"


def _first_meta(rec: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    for run in (rec or {}).get("runs", []):
        if run.get("status") == "ok":
            return run.get("meta") or {}
    return {}


def _cell(rec: Optional[Dict[str, Any]]):
    return CellMeasurement.from_dict(rec) if rec else None


def compare_results(old: Results, new: Results, *, min_effect: float = thresholds.MIN_EFFECT,
                    q: float = thresholds.FDR_Q) -> Dict[str, V.Verdict]:
    """Verdicts for every judged figure of every cell in ``new`` against the same cell in
    ``old`` (key = cell key, ``#metric`` for figures besides the primary one)."""
    olds, news = old.by_key(), new.by_key()
    comparisons = {}
    for k, rec in news.items():
        cur, base = _cell(rec), _cell(olds.get(k))
        for m in cur.metrics():
            if not m.judged:
                continue
            ok_c = [r for r in cur.ok_runs if r.value(m.name) is not None]
            ok_b = [r for r in (base.ok_runs if base else []) if r.value(m.name) is not None]
            comparisons[metric_key(k, m.name, cur.workload.mode)] = V.Comparison(
                m, [r.value(m.name) for r in ok_c], [r.value(m.name) for r in ok_b],
                machine_states.states(ok_c), machine_states.states(ok_b), screened=cur.workload.device != "gpu", confirmed=True)
    out = V.judge_session(comparisons, min_effect=min_effect, q=q)
    for k, v in list(out.items()):
        mo, mn = _first_meta(olds.get(k)), _first_meta(news.get(k))
        if mo and mn:
            diff = context_diff.env_diff(mn.get("env"), mo.get("env")) + context_diff.version_diff(
                {"mxnet_version": mn.get("mxnet_version")}, {"mxnet_version": mo.get("mxnet_version")})
            out[k] = dataclasses.replace(v, env_diff=diff)
    return out


def comparison_table(old: Results, new: Results, verdicts: Dict[str, V.Verdict]) -> str:
    olds, news = old.by_key(), new.by_key()
    rows = [("figure", "unit", "old", "new", "change", "p", "verdict")]
    for k, v in verdicts.items():
        cell_key, metric = split_metric_key(k)
        rows.append((k, v.unit, _fmt_side(olds.get(cell_key), metric), _fmt_side(news.get(cell_key), metric),
                     "-" if v.change is None else f"{100 * v.change:+.1f}%",
                     "-" if v.p_value is None else f"{v.p_value:.3g}", v.kind))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    for k, v in verdicts.items():
        if v.kind in ("regression", "improvement", "unresolved", "not-gated") or v.env_diff:
            lines.append(f"{k}: {v.reason}")
            lines.extend(f"    {d}" for d in v.env_diff)
    gone = sorted(set(olds) - set(news))
    if gone:
        lines.append(f"only in old: {', '.join(gone)}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        at = _first_positional(argv)
        if at is not None and argv[at] == "promote":  # its options may come before the word too
            return _promote(argv[:at] + argv[at + 1:])
        return _compare(argv)
    except (ResultsError, ValueError) as exc:
        print(f"pytest_mxperf.cli.compare: {str(exc).splitlines()[0] if str(exc) else exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # BaselineError and anything else: one line, exit 2
        from pytest_mxperf.store.baselines import BaselineError
        if isinstance(exc, BaselineError):
            print(f"pytest_mxperf.cli.compare: {exc}", file=sys.stderr)
            return 2
        raise


# every option of either command takes a value (besides -h)
_VALUED_OPTIONS = ("--min-effect", "--fdr", "--baselines-dir", "--machine")


def _first_positional(argv: List[str]) -> Optional[int]:
    """The index of the first argument that is neither an option nor an option's value, before
    any ``--`` (``compare -- promote NEW.json`` compares a file named promote)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return None
        if arg.startswith("-") and len(arg) > 1:
            # "--opt VALUE" (or an abbreviation of it, as argparse takes) skips the value
            if "=" not in arg and any(o.startswith(arg) for o in _VALUED_OPTIONS if arg.startswith("--")):
                i += 1
            i += 1
            continue
        return i
    return None


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage otherwise)
        print(f"pytest_mxperf.cli.compare: {message}", file=sys.stderr)
        raise SystemExit(2)


def _compare(argv: List[str]) -> int:
    ap = _Parser(prog="python -m pytest_mxperf.cli.compare",
                 description="Compare two pytest-mxperf results.json files (old, new).",
                 epilog="python -m pytest_mxperf.cli.compare promote RESULT.json [--baselines-dir D] "
                        "[--machine NAME]: record a results.json into the baseline (promote --help).")
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--min-effect", type=float, default=thresholds.MIN_EFFECT)
    ap.add_argument("--fdr", type=float, default=thresholds.FDR_Q, help="Benjamini-Hochberg rate")
    args = ap.parse_args(argv)
    old, new = Results.load(args.old), Results.load(args.new)
    verdicts = compare_results(old, new, min_effect=args.min_effect, q=args.fdr)
    print(comparison_table(old, new, verdicts))
    return 1 if any(v.failed for v in verdicts.values()) else 0


def _promote(argv: List[str]) -> int:
    from pytest_mxperf.store.baseline_store import promote
    ap = _Parser(prog="python -m pytest_mxperf.cli.compare promote",
                 description="Record a CI run's results.json into the baseline without measuring again.")
    ap.add_argument("results")
    ap.add_argument("--baselines-dir", default=None)
    ap.add_argument("--machine", default=None, help="machine id (default: the one in the results file)")
    args = ap.parse_args(argv)
    out = promote(args.results, baselines_dir=args.baselines_dir, machine_id=args.machine)
    print(f"promoted {len(out['promoted'])} cell(s) into {out['path']}"
          + (f"; skipped {len(out['skipped'])} without a successful process" if out["skipped"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
