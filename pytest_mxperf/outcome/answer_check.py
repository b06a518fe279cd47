"""The answers stage of the end of a session: every cell whose processes kept answer
records (``workers/answers.py``) is compared with its reference's (the baseline's newest
recording that kept them, or in A/B mode the reference install's processes of the cell),
by ``judge/answers.compare``. Pure over the session's measured cells and the baseline: it
returns new verdicts, one a compared cell, under ``<cell key>#answers``.

A cell whose answers differ gets the verdict ``wrong-answers`` whatever its speed; the
failure policy ``answers`` (on by default, ``--perf-fail-on=-answers`` to report only)
fails the session on it.
"""

from __future__ import annotations

from typing import Dict, Optional

from pytest_mxperf.judge import answers as rule
from pytest_mxperf.judge import verdict as vd
from pytest_mxperf.output import reasons
from pytest_mxperf.measure.ledger import CellRecord
from pytest_mxperf.store.baselines import Baseline

#: the verdict kinds of the answers stage
KINDS = rule.VERDICT_KINDS
WRONG, SAME, NOT_COMPARED = KINDS[rule.DIFFERENT], KINDS[rule.SAME], KINDS[rule.NOT_COMPARED]
SUFFIX = rule.KEY_SUFFIX


def _version(runs) -> Optional[str]:
    return next((r.mxnet_version for r in runs if r.mxnet_version), None)


def _unavailable(runs) -> Optional[str]:
    """Why the MXNet of ``runs`` could not compute the cell's answers (one line), or None."""
    for r in runs:
        why = r.meta.answers_unavailable
        if why:
            return reasons.answers_unavailable(r.mxnet_version, why)
    return None


def answer_verdicts(cells: Dict[str, CellRecord], baseline: Optional[Baseline], ab: bool) -> Dict[str, vd.Verdict]:
    """The answers verdict of every cell that kept answers and has a reference to compare
    them with (``ab``: the cell's reference processes; else ``baseline``)."""
    out: Dict[str, vd.Verdict] = {}
    for key, rec in cells.items():
        cell = rec.cell
        runs = cell.ok_runs
        current = [r.answers for r in runs if r.answers]
        ref_runs = [r for r in (cell.reference or []) if r.ok] if ab else []
        cannot = _unavailable(runs) or _unavailable(ref_runs)
        if cannot:  # one side's release could not compute them: said, its speed judged all the same
            out[key + SUFFIX] = vd.Verdict(kind=NOT_COMPARED, reason=cannot, metric="answers",
                                           unit="relative difference")
            continue
        if not current:
            continue
        if ab:
            reference, ref_version = [r.answers for r in ref_runs if r.answers], _version(ref_runs)
        elif baseline is not None and key in baseline.keys():
            reference, ref_version = baseline.answers(key)
        else:
            continue
        version = _version(runs)
        check = rule.compare(current, reference, cell.workload.dtype,
                             same_release=bool(version and version == ref_version))
        out[key + SUFFIX] = vd.Verdict(
            kind=KINDS[check.kind], reason=reasons.answers_against(check.reason, ref_version), metric="answers",
            unit="relative difference", change=check.distance, threshold=check.tolerance,
            n_current=len(current), n_baseline=len(reference))
    return out
