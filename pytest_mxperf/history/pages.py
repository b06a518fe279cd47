"""Static trend pages from a history store: ``publish(store, out_dir)``.

``index.html`` first lists the regressions standing (each cell's latest step on a machine,
when worse) with the command that measures each again, then every cell with its latest figure,
its number of steps and its latest change; ``cells/<slug>.html`` draws one cell's figure over time, one line per machine,
points colored by MXNet version, the published-table figure as a reference line, verdicts
and steps marked (each with the command that reproduces it, ``reproduce``), and each point's
details on hover (SVG ``<title>``). Everything is
inline (CSS and SVG): the pages open from the file system with no network.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import html
import re
import shlex
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from pytest_mxperf.history import changepoints

#: one dash pattern per machine (its line through its sessions), in the order of machine ids
DASHES = ["", "6,3", "2,3", "10,3,2,3", "1,6"]
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]
MARKERS = {"regression": "#d62728", "improvement": "#2ca02c", "unresolved": "#ff7f0e"}
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 900, 360, 70, 20, 20, 50

CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse}
td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left;font-size:14px}th{background:#f4f4f4}
a{color:#1f5fa8;text-decoration:none}code.cmd{font-size:12px;background:#f6f6f6;padding:1px 4px}.down{color:#b00}.up{color:#070}.muted{color:#777}
.legend span{display:inline-block;margin-right:14px;font-size:13px}.legend i{display:inline-block;width:10px;
height:10px;border-radius:5px;margin-right:4px}svg text{font-size:11px;fill:#444}"""


#: under every table of steps: what the command does and what it cannot
REPRODUCE_NOTE = ("measure it again: an A/B session on the same kind of machine, the install before the step as "
                  "the reference; both sides run with the variables given, so a step a variable caused shows by "
                  "running the command with and without it")


def slug(key: str) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "-", key).strip("-")[:60]
    return f"{base}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def date_text(t: float) -> str:
    """``t`` (seconds since the epoch) as a UTC date; "(no date)" for one that is none."""
    try:
        return _dt.datetime.fromtimestamp(float(t), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError, OverflowError, OSError):
        return "(no date)"


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")


def _svg(cell: Mapping[str, Any], hist: Sequence[Mapping[str, Any]], steps: Sequence[Mapping[str, Any]],
         colors: Dict[str, str]) -> str:
    pts = [h for h in hist if h.get("fast_end")]
    if not pts:
        return "<p class='muted'>no measured session</p>"
    t0, t1 = min(h["started"] for h in pts), max(h["started"] for h in pts)
    refs = [h["published"] for h in hist if h.get("published")]
    vals = [h["fast_end"] for h in pts] + [h["median"] for h in pts if h.get("median")] + refs[-1:]
    lo, hi = min(vals) * 0.95, max(vals) * 1.05

    def x(t):
        return PAD_L + (W - PAD_L - PAD_R) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.5)

    def y(v):
        return PAD_T + (H - PAD_T - PAD_B) * (1 - (v - lo) / (hi - lo if hi > lo else 1))
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}' role='img'>",
           f"<rect x='{PAD_L}' y='{PAD_T}' width='{W - PAD_L - PAD_R}' height='{H - PAD_T - PAD_B}' fill='#fafafa' "
           "stroke='#ccc'/>"]
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(f"<line x1='{PAD_L}' x2='{W - PAD_R}' y1='{y(v):.1f}' y2='{y(v):.1f}' stroke='#eee'/>"
                   f"<text x='{PAD_L - 6}' y='{y(v) + 4:.1f}' text-anchor='end'>{v:.4g}</text>")
    short = t1 - t0 < 2 * 86400  # within two days: the hours tell the sessions apart
    for k in range(4):
        t = t0 + (t1 - t0) * k / 3
        label = date_text(t)[11:] if short and k else date_text(t) if short else date_text(t)[:10]
        anchor = "start" if k == 0 else "end" if k == 3 else "middle"
        out.append(f"<text x='{x(t):.1f}' y='{H - PAD_B + 16}' text-anchor='{anchor}'>{label}</text>")
    out.append(f"<text x='{PAD_L}' y='{H - 8}'>{html.escape(cell['unit'])} (fast end of each session's processes; "
               f"{'higher' if cell['higher_is_better'] else 'lower'} is better)</text>")
    if refs:
        out.append(f"<line x1='{PAD_L}' x2='{W - PAD_R}' y1='{y(refs[-1]):.1f}' y2='{y(refs[-1]):.1f}' "
                   f"stroke='#888' stroke-dasharray='6,4'><title>published table: {refs[-1]:.4g}</title></line>"
                   f"<text x='{W - PAD_R - 4}' y='{y(refs[-1]) - 4:.1f}' text-anchor='end'>published "
                   f"{refs[-1]:.4g}</text>")
    for s in steps:
        xs = x(s["started"])
        out.append(f"<line x1='{xs:.1f}' x2='{xs:.1f}' y1='{PAD_T}' y2='{H - PAD_B}' stroke='#b00' "
                   f"stroke-dasharray='3,3'><title>step x{s['ratio']:.3f} on {html.escape(str(s['machine_id']))}, "
                   f"{_word(s)}: "
                   f"{html.escape('; '.join(s['changed']))}</title></line>")
    machines = machine_dashes(pts)
    for mid, dash in machines.items():
        mine = [h for h in pts if h["machine_id"] == mid]
        path = " ".join(f"{x(h['started']):.1f},{y(h['fast_end']):.1f}" for h in mine)
        out.append(f"<polyline points='{path}' fill='none' stroke='#999'{_dash_attr(dash)}><title>{html.escape(mid)}"
                   "</title></polyline>")
        for h in mine:
            color = colors.get(h.get("mxnet_version") or "?", "#333")
            tip = (f"{date_text(h['started'])} UTC\nmachine {h['machine_id']}\nMXNet {h.get('mxnet_version')}\n"
                   f"fast end {h['fast_end']:.4g}, median {h.get('median') or float('nan'):.4g} "
                   f"({h.get('processes')} processes)\nsession {h['session']}"
                   + (f"\nverdict {h['verdict']}" + (f" {100 * h['change']:+.1f}%" if h.get('change') is not None else "")
                      if h.get("verdict") else ""))
            ring = MARKERS.get(h.get("verdict") or "")
            stroke = f" stroke='{ring}' stroke-width='3'" if ring else ""
            out.append(f"<circle cx='{x(h['started']):.1f}' cy='{y(h['fast_end']):.1f}' r='5' fill='{color}'{stroke}>"
                       f"<title>{html.escape(tip)}</title></circle>")
    out.append("</svg>")
    return "".join(out)


def _word(step: Mapping[str, Any]) -> str:
    """A step's direction in a word, from the cell's direction (``cell_changes``' ``worse``)."""
    return "worse" if step["worse"] else "better"


def _tone(step: Mapping[str, Any]) -> str:
    """The CSS class of a step's ratio: red where it made the figure worse, green where better."""
    return "down" if step["worse"] else "up"


def machine_dashes(points: Sequence[Mapping[str, Any]]) -> Dict[str, str]:
    """Each machine's dash pattern (its line through its sessions), by machine id."""
    ids = sorted({str(h["machine_id"]) for h in points})
    return {mid: DASHES[i % len(DASHES)] for i, mid in enumerate(ids)}


def _dash_attr(dash: str) -> str:
    """The SVG attribute of a machine's dash pattern ("" for the solid line)."""
    return f" stroke-dasharray='{dash}'" if dash else ""


def _machine_legend(hist: Sequence[Mapping[str, Any]]) -> str:
    """The machines of a cell page, each with its line's dash pattern (only when there are
    several: one machine's page needs no key)."""
    dashes = machine_dashes([h for h in hist if h.get("fast_end")])
    if len(dashes) < 2:
        return ""
    items = []
    for mid, dash in dashes.items():
        items.append(f"<span><svg width='34' height='10'><line x1='0' x2='34' y1='5' y2='5' stroke='#777' "
                     f"stroke-width='2'{_dash_attr(dash)}/></svg> {html.escape(mid)}</span>")
    items = "".join(items)
    return f"<p class='legend'>machines: {items}</p>"


def _a_date(t) -> bool:
    """Seconds since the epoch of a session that can have run: after 1970, before next year."""
    try:
        t = float(t)
    except (TypeError, ValueError):
        return False
    return 0 < t < time.time() + 366 * 86400


def reproduce(step: Mapping[str, Any], cell_key: str) -> str:
    """The command that measures a step again, as an A/B session on the machine: the test that
    measured the cell (its node id; from an older store, the cell's model and batch size) with
    ``--perf-reference`` the MXNet install before the step, and the variables that changed at
    it as they were after. Pure."""
    before = step.get("mxnet_before")
    ref = f"mxnet=={before}" if before else "REFERENCE"
    env_after, env_before = step.get("environment_after") or {}, step.get("environment_before") or {}
    env = [f"{k}={shlex.quote(str(v))}" for k, v in sorted(env_after.items()) if env_before.get(k) != v]
    env += [f"-u {k}" for k in sorted(env_before) if k not in env_after]
    nodeid = step.get("nodeid")
    if nodeid:
        target = shlex.quote(str(nodeid))
    else:
        parts = cell_key.split("/")
        target = (f"perf_tests -m cpu --perf-models {parts[1]} --perf-batch-sizes {parts[2].lstrip('b')}"
                  if len(parts) > 2 else "perf_tests -m cpu")
    prefix = ("env " + " ".join(env) + " ") if env else ""
    return f"{prefix}pytest {target} --perf-reference {shlex.quote(ref)}"


def publish(store, out_dir, skipped=None) -> List[Path]:
    """Write the index and one page per cell into ``out_dir``; returns the files written. A
    cell whose rows cannot be drawn is left out, and ``skipped(line)`` says which and why."""
    skipped = skipped or (lambda line: None)
    out = Path(out_dir)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    versions = sorted({s["mxnet_version"] or "?" for s in store.sessions()})
    colors = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(versions)}
    legend = "<p class='legend'>" + "".join(f"<span><i style='background:{c}'></i>MXNet {html.escape(v)}</span>"
                                            for v, c in colors.items()) + "</p>"
    rows, files, regressions = [], [], []
    for cell in store.cells():
        try:
            hist = []
            for h in store.history(cell["key"]):
                if _a_date(h.get("started")):
                    hist.append(h)
                else:
                    skipped(f"{cell['key']}: session {h.get('session')} left out of the pages: its start "
                            f"time {h.get('started')!r} is not a date")
            steps = changepoints.cell_changes(hist, higher_is_better=cell["higher_is_better"])
            measured = [h for h in hist if h.get("fast_end")]
            latest = measured[-1] if measured else None
            name = slug(cell["key"])
            step_rows = "".join(
                f"<tr><td>{date_text(s['started'])}</td><td>{html.escape(str(s['machine_id']))}</td>"
                f"<td>{html.escape(s['session'])}</td>"
                f"<td class='{_tone(s)}'>x{s['ratio']:.3f} {_word(s)}</td>"
                f"<td>{s['before']:.4g} -> {s['after']:.4g}</td><td>{html.escape('; '.join(s['changed']))}</td>"
                f"<td><code class='cmd'>{html.escape(reproduce(s, cell['key']))}</code></td></tr>"
                for s in steps)
            for s in changepoints.standing(steps):
                regressions.append(
                    f"<tr><td><a href='cells/{name}.html'>{html.escape(cell['key'])}</a></td>"
                    f"<td>{html.escape(str(s['machine_id']))}</td><td>{date_text(s['started'])}</td>"
                    f"<td class='down'>x{s['ratio']:.3f}</td><td>{html.escape('; '.join(s['changed']))}</td>"
                    f"<td><code class='cmd'>{html.escape(reproduce(s, cell['key']))}</code></td></tr>")
            body = (f"<p><a href='../index.html'>all cells</a></p><h1>{html.escape(cell['key'])}</h1>{legend}"
                    + _machine_legend(hist)
                    + _svg(cell, hist, steps, colors)
                    + "<h2>Steps</h2>" + (f"<table class='steps'><tr><th>first session</th><th>machine</th><th>id</th>"
                                          f"<th>change</th><th>level</th><th>what changed</th><th>measure it again</th>"
                                          f"</tr>{step_rows}</table><p class='muted'>{REPRODUCE_NOTE}</p>" if steps
                                          else "<p class='muted'>none found</p>")
                    + f"<p class='muted'>{len(hist)} session(s), {len(measured)} measured; rings: verdicts "
                      "(red regression, green improvement, orange unresolved); dashed red lines: steps, found "
                      "among each machine's own sessions.</p>")
            path = out / "cells" / f"{name}.html"
            path.write_text(_page(cell["key"], body))
            files.append(path)
            last = steps[-1] if steps else None
            rows.append(
                f"<tr><td><a href='cells/{name}.html'>{html.escape(cell['key'])}</a></td>"
                f"<td>{format(latest['fast_end'], '.4g') if latest else '-'} {html.escape(cell['unit'])}</td>"
                f"<td>{html.escape(latest['mxnet_version'] or '?') if latest else '-'}</td><td>{len(measured)}</td>"
                f"<td>{len(steps)}</td>"
                + (f"<td class='{_tone(last)}'>x{last['ratio']:.3f} {_word(last)} "
                   f"{date_text(last['started'])[:10]} on {html.escape(str(last['machine_id']))}: "
                   f"{html.escape('; '.join(last['changed']))}</td>" if last else "<td>-</td>")
                + "</tr>")
        except (TypeError, ValueError, KeyError, OverflowError, AttributeError) as exc:
            skipped(f"{cell.get('key')}: left out of the pages: a stored row it cannot draw "
                    f"({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]})")
    standing = (f"<table id='regressions'><tr><th>cell</th><th>machine</th><th>since</th><th>change</th>"
                f"<th>what changed</th><th>measure it again</th></tr>{''.join(regressions)}</table>"
                f"<p class='muted'>{REPRODUCE_NOTE}</p>" if regressions
                else "<p id='regressions' class='muted'>none: no cell's latest step is worse</p>")
    index = (f"<h1>pytest-mxperf history</h1><p class='muted'>{len(store.session_ids())} session(s), "
             f"{len(rows)} cell(s); written {date_text(time.time())} UTC</p>"
             f"<p><a href='#regressions'>regressions standing ({len(regressions)})</a> · <a href='#cells'>every cell</a></p>"
             f"<h2>Regressions standing</h2><p class='muted'>each cell's latest step on a machine, when it made the "
             f"figure worse</p>{standing}"
             "<h2 id='cells'>Every cell</h2>"
             "<table><tr><th>cell</th><th>latest</th><th>MXNet</th><th>sessions</th><th>steps</th>"
             f"<th>latest change</th></tr>{''.join(rows)}</table>")
    (out / "index.html").write_text(_page("pytest-mxperf history", index))
    return [out / "index.html"] + files
