"""Alerts for the fleet: the regressions standing in the history store, as one GitHub issue per
cause (or a webhook's message), opened when new, commented only when something changed, closed
when the cells recover.

    python -m pytest_mxperf.history alert [--repo OWNER/NAME] [--any-cause] [--webhook-env NAME --state FILE]
    python -m pytest_mxperf.history alert --webhook "$MXPERF_ALERT_WEBHOOK" --state FILE

A **regression standing** is a cell whose latest step on a machine (``changepoints.cell_changes``)
is worse: keyed by machine, cell and direction, not by the step's session, since change points
move as the history grows. Its **cause** is what changed at the step (``what_changed``: "MXNet
1.8.0 -> 1.9.1", "OMP_NUM_THREADS=2 -> 1"); by default only steps attributed to such a
software change alert (``--any-cause``: the machine's own steps too). The regressions of one
machine and cause are one alert, its cells listed.

On GitHub (``GITHUB_TOKEN``, ``GITHUB_REPOSITORY`` or ``--repo``, ``GITHUB_API_URL``) each alert
is an issue labelled ``mxperf-alert`` whose body starts with a hidden marker holding its key;
the open ones are read back on every run: a new alert opens an issue, an alert whose cells
changed gets a comment (and its body updated), an unchanged one nothing, and an open issue
whose alert is gone (its cells recovered: their latest step is better, or they have no step
left) gets a comment and is closed. ``--webhook-env NAME`` (or ``--webhook URL``) instead posts
the same news as JSON (``text``, Slack-compatible, and ``alerts``) to the URL in the environment
variable ``NAME`` (a secret: never printed; on the command line any process can read it), against the previous run's alerts kept in ``--state FILE``. Every
refusal is one line; exit status 0 unless the store cannot be read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.history import changepoints, pages
from pytest_mxperf.history.github_api import GitHub, GitHubError

LABEL = "mxperf-alert"
MARKER = "<!-- pytest-mxperf alert: {key} -->"
UNATTRIBUTED = "nothing the store records"
PREFIX = "mxperf alert: "


@dataclasses.dataclass(frozen=True)
class Regression:
    """One cell's standing regression on one machine."""

    machine_id: str
    cell: str
    cause: str
    ratio: float
    before: float
    after: float
    session: str
    started: str


@dataclasses.dataclass(frozen=True)
class Alert:
    """The standing regressions of one machine and cause."""

    machine_id: str
    cause: str
    regressions: Tuple[Regression, ...]

    @property
    def key(self) -> str:
        """Stable while the alert stands: the machine, the cause and the direction."""
        digest = hashlib.sha256(f"{self.machine_id}\n{self.cause}\nworse".encode()).hexdigest()[:16]
        return f"{self.machine_id}:{digest}"

    @property
    def cells(self) -> Tuple[str, ...]:
        return tuple(sorted(r.cell for r in self.regressions))

    @property
    def title(self) -> str:
        n = len(self.regressions)
        return f"mxperf: {n} cell(s) slower on {self.machine_id} after {self.cause}"[:250]

    def body(self) -> str:
        lines = [MARKER.format(key=self.key), f"**{n_cells(self)} slower on `{self.machine_id}`**, "
                 f"since: {self.cause}", "", "| cell | before | after | ratio | first session | date |",
                 "|---|---|---|---|---|---|"]
        for r in sorted(self.regressions, key=lambda r: r.cell):
            lines.append(f"| `{r.cell}` | {r.before:.4g} | {r.after:.4g} | x{r.ratio:.3f} | `{r.session}` | "
                         f"{pages.date_text(r.started)} |")
        lines += ["", "Closed by `python -m pytest_mxperf.history alert` when these cells recover.",
                  f"<!-- cells: {json.dumps(list(self.cells))} -->"]
        return "\n".join(lines)


def n_cells(alert: Alert) -> str:
    return f"{len(alert.regressions)} cell(s)"


def standing(store, any_cause: bool = False) -> List[Alert]:
    """The alerts standing in ``store``: each cell's latest step per machine, when worse
    (attributed to a software change unless ``any_cause``), grouped by machine and cause."""
    higher = {c["key"]: c["higher_is_better"] for c in store.cells()}
    by_cause: Dict[Tuple[str, str], List[Regression]] = {}
    for key, hib in sorted(higher.items()):
        for ch in changepoints.standing(changepoints.cell_changes(store.history(key), higher_is_better=hib)):
            cause = "; ".join(ch["changed"])
            if not any_cause and cause.startswith(UNATTRIBUTED):
                continue
            machine_id = str(ch["machine_id"])
            by_cause.setdefault((machine_id, cause), []).append(Regression(
                machine_id, key, cause, ch["ratio"], ch["before"], ch["after"], str(ch["session"]),
                str(ch["started"])))
    return [Alert(m, c, tuple(rs)) for (m, c), rs in sorted(by_cause.items())]


def _marked_key(body: str) -> Optional[str]:
    head = MARKER.split("{key}")[0]
    if not body.startswith(head):
        return None
    return body[len(head):].split(" -->", 1)[0]


def _listed_cells(body: str) -> Tuple[str, ...]:
    tail = body.rsplit("<!-- cells: ", 1)
    if len(tail) < 2:
        return ()
    try:
        return tuple(json.loads(tail[1].split(" -->", 1)[0]))
    except ValueError:
        return ()


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to do: alerts to open; (issue number, alert, cells before) to update; (issue
    number, key, cells) to close."""

    open: Tuple[Alert, ...]
    update: Tuple[Tuple[int, Alert, Tuple[str, ...]], ...]
    close: Tuple[Tuple[int, str, Tuple[str, ...]], ...]


def plan(alerts: Sequence[Alert], open_issues: Mapping[str, Tuple[int, Tuple[str, ...]]]) -> Plan:
    """Against the open issues (key -> (number, cells listed)): what to open, update, close. Pure."""
    now = {a.key: a for a in alerts}
    opened = tuple(a for k, a in now.items() if k not in open_issues)
    update = tuple((open_issues[k][0], a, open_issues[k][1]) for k, a in now.items()
                   if k in open_issues and tuple(open_issues[k][1]) != a.cells)
    close = tuple((n, k, cells) for k, (n, cells) in sorted(open_issues.items()) if k not in now)
    return Plan(opened, update, close)


def _changed_text(before: Sequence[str], after: Sequence[str]) -> str:
    added, gone = sorted(set(after) - set(before)), sorted(set(before) - set(after))
    parts = ([f"now slower too: {', '.join(f'`{c}`' for c in added)}"] if added else []) + (
        [f"recovered: {', '.join(f'`{c}`' for c in gone)}"] if gone else [])
    return "; ".join(parts)


def to_github(gh: GitHub, repo: str, alerts: Sequence[Alert], say: Callable[[str], None],
              bot_login: str = "github-actions[bot]") -> Plan:
    issues = gh.pages(f"/repos/{repo}/issues?state=open&labels={LABEL}")
    open_issues: Dict[str, Tuple[int, Tuple[str, ...]]] = {}
    for it in issues:
        user = it.get("user") or {}
        key = _marked_key(str(it.get("body") or ""))
        if key and user.get("type") == "Bot" and user.get("login") == bot_login and "pull_request" not in it:
            open_issues.setdefault(key, (int(it["number"]), _listed_cells(str(it.get("body") or ""))))
    p = plan(alerts, open_issues)
    for a in p.open:
        made, _ = gh.request("POST", f"/repos/{repo}/issues", {"title": a.title, "body": a.body(), "labels": [LABEL]})
        say(PREFIX + f"opened issue #{(made or {}).get('number')}: {a.title}")
    for number, a, before in p.update:
        gh.request("PATCH", f"/repos/{repo}/issues/{number}", {"title": a.title, "body": a.body()})
        gh.request("POST", f"/repos/{repo}/issues/{number}/comments", {"body": _changed_text(before, a.cells)})
        say(PREFIX + f"updated issue #{number}: {_changed_text(before, a.cells)}")
    for number, _key, cells in p.close:
        gh.request("POST", f"/repos/{repo}/issues/{number}/comments",
                   {"body": "Recovered: " + (", ".join(f"`{c}`" for c in cells) or "its cells")
                    + " no longer slower (their latest step is better, or they have none)."})
        gh.request("PATCH", f"/repos/{repo}/issues/{number}", {"state": "closed", "state_reason": "completed"})
        say(PREFIX + f"closed issue #{number}: recovered")
    if not (p.open or p.update or p.close):
        say(PREFIX + f"nothing new: {len(alerts)} alert(s) standing, each with its open issue")
    return p


def webhook_payload(p: Plan) -> Optional[Dict[str, Any]]:
    """The webhook's JSON for a plan (None when nothing changed): a Slack-compatible ``text``
    and the alerts as data. Pure."""
    lines, data = [], []
    for a in p.open:
        lines.append(f"New: {a.title}: " + ", ".join(a.cells))
        data.append({"event": "opened", "key": a.key, "machine_id": a.machine_id, "cause": a.cause,
                     "cells": [dataclasses.asdict(r) for r in a.regressions]})
    for _n, a, before in p.update:
        lines.append(f"Changed: {a.title}: {_changed_text(before, a.cells)}")
        data.append({"event": "changed", "key": a.key, "machine_id": a.machine_id, "cause": a.cause,
                     "cells": [dataclasses.asdict(r) for r in a.regressions], "cells_before": list(before)})
    for _n, key, cells in p.close:
        lines.append(f"Recovered: {', '.join(cells)}")
        data.append({"event": "recovered", "key": key, "cells": list(cells)})
    if not lines:
        return None
    return {"text": "pytest-mxperf alerts\n" + "\n".join(lines), "alerts": data}


def to_webhook(url: str, state: Path, alerts: Sequence[Alert], say: Callable[[str], None],
               opener: Callable = urllib.request.urlopen) -> Plan:
    """Post what changed since the alerts kept in ``state`` to ``url``; keep the new alerts
    there only when the post was taken (a failed post is tried again next run)."""
    try:
        kept = json.loads(state.read_text()) if state.exists() else {}
    except (OSError, ValueError):
        kept = {}
    previous = {k: (0, tuple(v)) for k, v in (kept.get("alerts") or {}).items()}
    p = plan(alerts, previous)
    payload = webhook_payload(p)
    if payload is None:
        say(PREFIX + f"nothing new: {len(alerts)} alert(s) standing")
        return p
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "pytest-mxperf"})
    try:
        with opener(req, timeout=30) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        say(PREFIX + f"the webhook refused the post: HTTP {exc.code}; kept for the next run")
        return p
    except (urllib.error.URLError, OSError) as exc:
        say(PREFIX + f"cannot reach the webhook ({type(getattr(exc, 'reason', exc)).__name__}); kept for the next run")
        return p
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"alerts": {a.key: list(a.cells) for a in alerts}}, indent=1) + "\n")
    say(PREFIX + f"posted {len(payload['alerts'])} change(s) to the webhook")
    return p


def run(store, args, environ: Mapping[str, str], say: Callable[[str], None]) -> int:
    """``history alert``: 0 whatever GitHub or the webhook answered."""
    alerts = standing(store, any_cause=args.any_cause)
    if args.webhook_env or args.webhook:
        url = environ.get(args.webhook_env) if args.webhook_env else args.webhook
        if not url:
            say(PREFIX + f"${args.webhook_env} is not set: nothing posted")
            return 0
        to_webhook(url, Path(args.state), alerts, say)
        return 0
    token, repo = environ.get("GITHUB_TOKEN", ""), args.repo or environ.get("GITHUB_REPOSITORY", "")
    if not token or not repo:
        say(PREFIX + "no GITHUB_TOKEN or repository (GITHUB_REPOSITORY, --repo): nothing posted; "
            f"{len(alerts)} alert(s) standing")
        return 0
    try:
        to_github(GitHub(environ.get("GITHUB_API_URL", "https://api.github.com"), token), repo, alerts, say,
                  bot_login=args.bot_login)
    except GitHubError as exc:
        say(PREFIX + str(exc))
    return 0


def add_arguments(parser) -> None:
    parser.add_argument("--repo", default=None, help="OWNER/NAME (default: $GITHUB_REPOSITORY)")
    parser.add_argument("--any-cause", action="store_true",
                        help="alert on every worse step, not only those attributed to a software change")
    parser.add_argument("--webhook-env", default=None, metavar="NAME",
                        help="post to the URL in this environment variable instead of opening issues")
    parser.add_argument("--webhook", default=None, metavar="URL",
                        help="post to this URL (prefer --webhook-env: a command line is visible to every process "
                             "on the machine); never printed")
    parser.add_argument("--state", default=os.path.join(".", "mxperf-alerts.json"),
                        help="with --webhook-env: the previous run's alerts (default ./mxperf-alerts.json)")
    parser.add_argument("--bot-login", default="github-actions[bot]", help="the account whose marked issues are kept")
