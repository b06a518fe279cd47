"""Every line the end of a session says, rendered from its outcome (``model/outcome.py``):
the slowdowns the baseline cannot decide (the headline), each changed figure and its notes,
the failures by the policy, the advice, what was recorded and written, the new steps in the
history; and what the session says while it settles suspects. Plain functions of values:
nothing here decides anything (the exit status is the outcome's)."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from pytest_mxperf.judge import answers as answers_rule
from pytest_mxperf.judge import thresholds
from pytest_mxperf.judge.resolution import percent_text
from pytest_mxperf.measure import profiling
from pytest_mxperf.measure.ledger import DUET_FALLBACK, NOT_REACHED, unmeasured
from pytest_mxperf.model.options import duration_text
from pytest_mxperf.model.outcome import WRITER, SessionOutcome

PREFIX = "mxperf: "
#: verdict kinds the terminal says one line each of, with their notes (the others are counted
#: in the session's first line; the slowdowns the baseline cannot decide are its headline)
SAID = ("regression", "improvement", "suspect", "unresolved", answers_rule.VERDICT_KINDS[answers_rule.DIFFERENT])
#: verdict kinds the full report says a line of (the terminal does not)
DETAILED = ("not-gated", answers_rule.VERDICT_KINDS[answers_rule.SAME], answers_rule.VERDICT_KINDS[answers_rule.NOT_COMPARED])
ADVICE = "advice: "


#: what the summary says of each kind of change both setups of a duet against the recorded
#: setup agree on (``outcome/judging.against_recorded_setup``): (kind, its heading, what moved)
BOTH_AGREE = (("machine-differs", "MACHINE DIFFERS", "the machine's probes moved with them against the baseline's "
               "recorded probes (another host, or a slower spell of this one)"),
              ("system-differs", "SYSTEM DIFFERS", "the machine's probes did not move with them, so the system "
               "both sides share (kernel, libraries, preloads)"),
              ("unexplained", "UNEXPLAINED", "nothing tells the machine from the system (no probe readings on "
               "one side, or another measuring method recorded the baseline)"))

def _agree_policy(kind: str, count: int, failure: Any, fail_on) -> str:
    """Whether the ``count`` figures of a both-agree ``kind`` fail: where the kind fails on
    slowdowns only (``policy.SLOWDOWNS_ONLY``), ``failure`` counts the slower ones."""
    if kind not in fail_on:
        return f" (not failing; --perf-fail-on +{kind} fails on them)"
    failing = failure.count if failure is not None else 0
    if failing == count:
        return f" (failing; --perf-fail-on -{kind} lets them pass)"
    if failing == 0:
        return f" (not failing: all faster, and {kind} fails on slowdowns only)"
    return (f" ({failing} slower: failing, {count - failing} faster: not; --perf-fail-on -{kind} lets the "
            "slower pass)")


def _verdict_line(key: str, v: Any) -> str:
    line = f"{PREFIX}{v.kind.upper()} {key}: {v.reason}"
    return line + ("; changed: " + ", ".join(v.env_diff) if v.env_diff else "")


def _against(outcome: SessionOutcome) -> str:
    ctx = outcome.context
    return f"reference {ctx.comparison.reference}" if ctx.comparison.ab else f"baseline {ctx.machine.get('id')}"


# ----------------------------------------------------------------------------- the headline

def _reference_hint(baseline, keys: Sequence[str]) -> str:
    """How to settle what the baseline cannot: an A/B run against the install it recorded."""
    from pytest_mxperf.store.baselines import BaselineError
    try:
        req = baseline.recorded_requirement(keys) if baseline is not None else None
    except BaselineError:
        req = None
    against = f" ({req}, the install the baseline was recorded with)" if req else ""
    return f"use A/B: --perf-reference baseline{against}, or --perf-reference REQ for another install"


def headline(outcome: SessionOutcome, prefix: str = PREFIX) -> List[str]:
    """First in the summary (baseline mode): slowdowns the baseline cannot decide (below this
    machine's resolution; beyond it but not significant across the session), whether the
    resolution is provisional, and whether the policy fails them."""
    ctx = outcome.context
    if ctx.comparison.ab:
        return []
    from pytest_mxperf.model.measurement import cell_of
    o = ctx.options
    verdicts = outcome.verdicts
    below = {k: v for k, v in verdicts.items() if v.kind == "below-resolution"}
    unclear = {k: v for k, v in verdicts.items() if v.kind == "unclear"}
    undecided = [cell_of(k) for k in list(below) + list(unclear)]
    tested = sum(v.resolution is not None for v in verdicts.values())   # the figures BH ran over
    lines: List[str] = []

    def item(k: str, v) -> str:
        res = v.resolution or {}
        where = ("provisional" if res.get("provisional") else f"{res.get('sessions')} sessions") if res else "?"
        r = percent_text(res["value"]) if isinstance(res.get("value"), (int, float)) else "?"
        ch = f"{100 * v.change:+.1f}%" if v.change is not None else "?"
        return f"{prefix}  {k}: {ch} ({v.unit}), resolution {r} ({where})"

    if below:
        widest = max((v.resolution or {}).get("value") or 0.0 for v in below.values())
        lines.append(f"{prefix}BELOW RESOLUTION: {len(below)} slowdown(s) below this machine's resolution of up to "
                     f"{percent_text(widest)} (for one of this session's {tested} tested figure(s)): the baseline cannot "
                     f"tell them from the machine's drift between sessions; {_reference_hint(ctx.baseline, undecided)}"
                     + ("" if "below-resolution" in o.fail_on
                        else " (not failing; --perf-fail-on +below-resolution fails on them)"))
        lines += [item(k, v) for k, v in below.items()]
    if unclear:
        lines.append(f"{prefix}UNCLEAR: {len(unclear)} slowdown(s) beyond the resolution but not significant across "
                     f"the session's {tested} tested figure(s) (false discovery rate {thresholds.FDR_Q}); re-run, or "
                     f"{_reference_hint(ctx.baseline, undecided)}"
                     + ("" if "unclear" in o.fail_on else " (not failing; --perf-fail-on +unclear fails on them)"))
        lines += [item(k, v) for k, v in unclear.items()]
    for kind, head, what in BOTH_AGREE:
        agree = {k: v for k, v in verdicts.items() if v.kind == kind}
        if agree:
            lines.append(f"{prefix}{head}: {len(agree)} change(s) beyond the resolution that a duet against the "
                         f"recorded setup does not show (both setups agree: not the MXNet install, not the recorded "
                         f"variables): {what}"
                         + _agree_policy(kind, len(agree), outcome.failure(kind), o.fail_on))
            lines += [item(k, v) for k, v in agree.items()]
    judged = [v for v in verdicts.values() if v.resolution]
    provisional = [v for v in judged if v.resolution.get("provisional")]
    if provisional:
        lines.append(f"{prefix}resolution provisional for {len(provisional)} of {len(judged)} figure(s): the baseline "
                     "holds one recorded session of them, so how far this machine drifts between sessions is "
                     "unknown (a slow spell of a shared VM can outlast a recording); measure it: record again "
                     "later, at another time of day, with --perf-update-baselines=add")
    for kind, what in (("below-resolution", "below this machine's resolution"),
                       ("unclear", "unclear across the session"),
                       ("unexplained", "that the recorded setup does not explain"),
                       ("machine-differs", "that the machine explains"),
                       ("system-differs", "of the system both setups share")):
        f = outcome.failure(kind)
        if f is not None:
            lines.append(f"{prefix}failing the session: {f.count} slowdown(s) {what} (--perf-fail-on {kind})")
    return lines


# ----------------------------------------------------------------------------- the end's lines

def end_lines(outcome: SessionOutcome) -> List[str]:
    """What the end of the session says after the first line, in order: tests not reached,
    nothing measured, the headline, no baseline, cells whose duets fell back to process
    pairs, advice, each changed figure, the failures, what was recorded and written."""
    ctx = outcome.context
    o = ctx.options
    lines: List[str] = []
    not_reached = [e.subject for e in outcome.events if e.kind == NOT_REACHED]
    if not_reached:
        lines.append(f"{PREFIX}{len(not_reached)} measuring test(s) not reached before --perf-deadline "
                     f"({o.deadline:g} s): {', '.join(not_reached[:5])}" + (" ..." if len(not_reached) > 5 else ""))
        if outcome.failure("not-reached"):
            lines.append(f"{PREFIX}failing the session: tests not reached (--perf-fail-on=-not-reached to allow)")
    why = unmeasured(outcome.cells, outcome.skips, outcome.events)
    if why is not None:
        lines.append(f"{PREFIX}nothing was measured ({'; '.join(why)})")
        if outcome.failure("none-measured"):
            lines.append(f"{PREFIX}failing the session: nothing was measured (--perf-fail-on none-measured)")
    if not any(r.cell.ok_runs for r in outcome.cells.values()):
        return lines + writer_lines(outcome)
    lines += headline(outcome)
    lines += no_baseline_lines(outcome)
    lines += [f"{PREFIX}{e.text}" for e in outcome.events if e.kind == DUET_FALLBACK]
    lines += advice_lines(outcome)
    lines += verdict_lines(outcome)
    lines += recorded_lines(outcome)
    lines += written_lines(outcome)
    return lines


def no_baseline_lines(outcome: SessionOutcome) -> List[str]:
    ctx = outcome.context
    if ctx.comparison.ab or ctx.baseline is not None:
        return []
    mid = ctx.machine.get("id")
    if ctx.options.update_baselines:
        return [f"{PREFIX}no baseline existed for this machine ({mid}); this run records the first one"]
    lines = [f"{PREFIX}no baseline for this machine ({mid}): nothing was compared with a previous measurement; "
             f"record one with --perf-update-baselines (writes {ctx.store.path(mid)}), or compare two MXNet installs "
             "with --perf-reference"]
    if outcome.failure("no-baseline"):
        lines.append(f"{PREFIX}failing the session: no baseline (--perf-fail-on no-baseline)")
    return lines


def advice_lines(outcome: SessionOutcome) -> List[str]:
    """Each piece of advice once, with the cells it concerns."""
    out = []
    for a in outcome.advice:
        which = f"{len(a.cells)} cell(s)" + (f", {a.failing} of them failing" if a.failing else "")
        out.append(f"{PREFIX}advice ({which}): {a.text}")
    return out


def verdict_lines(outcome: SessionOutcome) -> List[str]:
    """Each changed figure with its notes (not its advice: said once above), how many cells were
    measured again, then the failures by the policy."""
    ctx = outcome.context
    o = ctx.options
    lines: List[str] = []
    for key, v in outcome.verdicts.items():
        if v.kind in SAID:
            lines.append(_verdict_line(key, v))
            lines += [f"{PREFIX}note {key}: {note}" for note in v.notes if not note.startswith(ADVICE)]
    if outcome.confirmed:
        setup = ctx.comparison.setup
        if not ctx.comparison.ab and setup is not None and setup.ready:
            lines.append(f"{PREFIX}{outcome.confirmed} suspect cell(s) measured again in pairs against the recorded "
                         f"setup ({setup.requirement}) before judging")
        else:
            what = "pairs" if ctx.comparison.ab else "processes"
            lines.append(f"{PREFIX}{outcome.confirmed} unclear cell(s) re-measured with more {what} before judging")
    if outcome.count("improvement"):
        lines.append(f"{PREFIX}improvements found; consider --perf-update-baselines")
    against = _against(outcome)
    f = outcome.failure("regression")
    if f is not None:
        lines.append(f"{PREFIX}failing the session: {f.count} confirmed regression(s) against {against} (minimum "
                     f"effect {100 * o.min_effect:.0f}%, false discovery rate {thresholds.FDR_Q})")
    f = outcome.failure("unresolved")
    if f is not None:
        lines.append(f"{PREFIX}failing the session: {f.count} slowdown(s) could not be confirmed or ruled out "
                     f"({f.busy} on a busy machine): re-run; --perf-fail-on=-unresolved to report them without failing")
        if f.busy and not ctx.comparison.ab:
            # seen here: a 2-vCPU VM whose slow spells last minutes left every unchanged
            # session's AlexNet cell unresolved against a baseline recorded in one fast spell
            lines.append(f"{PREFIX}on a machine that switches speed for minutes at a time, record the baseline over "
                         "several sessions (--perf-update-baselines=add) so it spans its spells, or gate an upgrade "
                         "with an A/B run (--perf-reference), which needs no baseline")
    f = outcome.failure("answers")
    if f is not None:
        lines.append(f"{PREFIX}failing the session: {f.count} cell(s) computed something else than {against} "
                     "(--perf-fail-on=-answers to report them without failing)")
    if o.smoke and outcome.count("suspect"):
        lines.append(f"{PREFIX}--perf-smoke: suspects are not re-measured and do not fail the session")
    return lines


def recorded_lines(outcome: SessionOutcome) -> List[str]:
    """What recording the baseline says: where, how, and the machine's resolution."""
    rec = outcome.written.recorded
    if rec is None:
        return []
    lines = [f"{PREFIX}recorded {len(rec.cells)} cell(s) into {rec.path} ({rec.pool}: "
             + ("a new comparison set" if rec.pool == "replace" else "pooled with the recordings since the last replace")
             + ")"]
    if rec.slowed:
        lines.append(f"{PREFIX}warning: {rec.slowed} of {rec.processes} recorded processes ran on a slowed machine "
                     "(they are labelled and left out of comparisons; re-record on a quiet machine for a tighter "
                     "baseline)")
    if rec.few:
        lines.append(f"{PREFIX}{len(rec.few)} cell(s) recorded with fewer than {thresholds.MIN_BASELINE_PROCESSES} "
                     "processes will be shown, not gated: " + ", ".join(rec.few[:5])
                     + (" ..." if len(rec.few) > 5 else ""))
    summ = rec.resolution or {}
    if summ.get("cells"):
        spread = (f"median {percent_text(summ['median'])}, largest {percent_text(summ['largest'])} "
                  f"({summ['largest_key']})")
        if summ["provisional"] == summ["cells"]:
            lines.append(f"{PREFIX}resolution provisional: {spread}, from the spread of each cell's processes in this "
                         "one session; how far this machine drifts between sessions is unknown: record again later, "
                         "at another time of day, with --perf-update-baselines=add to measure it")
        else:
            lines.append(f"{PREFIX}resolution (the smallest slowdown a later session can tell from this machine's drift "
                         f"between sessions): {spread}, from up to {summ['sessions']} pooled sessions"
                         + (f"; provisional for {summ['provisional']} cell(s) recorded in one session"
                            if summ["provisional"] else "")
                         + "; a smaller slowdown is reported below the resolution: gate it with an A/B run")
    if rec.requirement:
        lines.append(f"{PREFIX}recorded with {rec.requirement} (--perf-reference baseline runs an A/B against it)")
    inst = rec.install or {}
    if inst.get("libmxnet_sha256"):
        source = (f"from {(inst.get('direct_url') or {}).get('url')}" if inst.get("direct_url")
                  else "from a package index")
        lines.append(f"{PREFIX}its build: {inst.get('name')} {inst.get('version')} {source}, {inst.get('libmxnet')} "
                     f"sha256 {inst['libmxnet_sha256'][:16]}…, numpy {inst.get('numpy_version')}")

    return lines


def written_lines(outcome: SessionOutcome) -> List[str]:
    """Where the report went, the new steps in the history, and the writers that failed."""
    from pathlib import Path
    w = outcome.written
    o = outcome.context.options
    lines: List[str] = []
    if w.report_files:
        lines.append(f"{PREFIX}report written to {o.report_dir} ({', '.join(Path(p).name for p in w.report_files)})")
    for st in w.steps:
        lines.append(f"{PREFIX}{st.key}: a new step in its history, x{st.ratio:.3f} ({st.before:.4g} -> {st.after:.4g}), "
                     "began " + ("in this session" if st.ago == 0 else f"{st.ago} session(s) ago ({st.session[:12]})")
                     + ": " + "; ".join(st.changed))
    return lines + writer_lines(outcome)


#: what a failed writer's line names
WRITERS = {"baseline": "the baseline was not recorded", "history": "the history store was not written",
           "report": "the report files were not written"}


def writer_lines(outcome: SessionOutcome) -> List[str]:
    """One line a writer that failed: what was not written and why; the rest was."""
    return [f"{PREFIX}{WRITERS.get(f.subjects[0] if f.subjects else '', 'a writer failed')}: {f.detail} "
            "(the rest was written; exit status 6 unless the session failed on its verdicts)"
            for f in outcome.failures if f.kind == WRITER]


def detail_lines(outcome: SessionOutcome) -> List[str]:
    """What the full report says of the verdicts the terminal does not: each figure not gated,
    the notes on figures not said there, each failing figure's advice, the profiles of cells
    that did not fail, and where the history store keeps the session."""
    lines: List[str] = []
    for key, v in outcome.verdicts.items():
        if v.kind in DETAILED:
            lines.append(_verdict_line(key, v))
        lines += [f"{PREFIX}note {key}: {note}" for note in v.notes if v.kind not in SAID or note.startswith(ADVICE)]
    lines += [profiling.brief_line(p.key, p.current) for p in outcome.profiles
              if not p.failing and p.current is not None]
    if outcome.written.history:
        lines.append(f"{PREFIX}session {outcome.context.session_id[:12]} kept in the history store "
                     f"{outcome.written.history}")
    return lines


def profile_lines(outcome: SessionOutcome) -> List[str]:
    """The failing cells' operator profiles beside the baseline's or the reference's."""
    lines: List[str] = []
    for p in outcome.profiles:
        if not p.failing:
            continue
        if p.unprofiled:
            lines.append(f"{PREFIX}profile of {p.key} ({p.failing}): {p.unprofiled}")
        else:
            lines += profiling.failure_lines(p.key, p.failing, p.current, p.against, side=p.side, missing=p.missing)
    return lines


# ----------------------------------------------------------------------------- while settling

def _short_keys(keys: Sequence[str]) -> Dict[str, str]:
    """Each cell key without its threading profile (``threads=auto``), the rest kept (a
    kvstore: two distributed cells differ only there); the whole keys when that would make
    two alike."""
    short = {k: "/".join(p for p in k.split("/") if not p.startswith("threads=")) for k in keys}
    return short if len(set(short.values())) == len(short) else {k: k for k in keys}


def said(what: Any) -> str:
    """A line while the end of the session settles suspects: before a round
    (``comparators.Confirmation``), or after each cell ((i, n, more, seconds gone, seconds
    left): the session's, as on the progress lines before it)."""
    if isinstance(what, tuple):
        i, n, more, gone, left = what
        return (f"{PREFIX}re-measured {i} of {n} suspect cell(s) ({more.key}), {gone / 60:.1f} min gone, about "
                f"{left / 60:.1f} min left")
    wanted = what.wanted
    if what.kind == "confirm":
        n = sum(m.count for m in wanted)
        cost = sum(m.cost for m in wanted)
        return (f"{PREFIX}confirming {len(wanted)} suspect cell(s) with {n} more process(es), about {cost / 60:.1f} min "
                f"(at most as long again as the measuring so far or a minute: {max(0.0, what.budget) / 60:.1f} min"
                + ("; cut to fit, so some may stay unresolved" if what.cut else "") + ")")
    short = _short_keys([m.key for m in wanted])
    each = ", ".join(f"{short[m.key]} +{m.count}" for m in wanted)
    if what.kind == "recorded-setup":
        kinds = sorted({"duet" if m.kind == "duet" else "process" for m in wanted})
        which = (f"{len(wanted)} cell(s) (every one, as {what.whole})" if what.whole
                 else f"{len(wanted)} suspect cell(s)")
        line = (f"{PREFIX}{which} measured again against the recorded setup ({what.setup}, its "
                f"recorded variables), {sum(m.count for m in wanted)} {' and '.join(kinds)} pair(s) ({each}); "
                f"expected about {duration_text(sum(m.cost for m in wanted))} more")
    else:
        line = (f"{PREFIX}next look: {len(wanted)} cell(s) not called yet get {sum(m.count for m in wanted)} more "
                f"pair(s) ({each}); expected about {duration_text(sum(m.cost for m in wanted))} more")
    if what.after:
        line += f", then about {duration_text(what.after)} in the looks after it, as the cells read now"
    if what.deadline_cut:
        kept, asked, left = what.deadline_cut
        line += f"; cut to {kept} of {asked} pair(s) by --perf-deadline ({left:.0f} s left for measuring)"
    return line


def interim_not_written(exc: BaseException) -> str:
    return f"{PREFIX}could not write the interim report: {type(exc).__name__}: {exc}"
