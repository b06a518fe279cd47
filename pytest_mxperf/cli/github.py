"""The session's verdict where a pull request is reviewed: one comment, updated in place, and a
check run.

    python -m pytest_mxperf.cli.github REPORT_DIR

reads the session's ``REPORT_DIR/results.json`` (``--perf-report``) and the standard GitHub
Actions variables (``GITHUB_API_URL``, ``GITHUB_REPOSITORY``, ``GITHUB_TOKEN``,
``GITHUB_EVENT_NAME``, ``GITHUB_EVENT_PATH``, ``GITHUB_SHA``, ``GITHUB_SERVER_URL``,
``GITHUB_RUN_ID``), then:

* for a pull request, keeps **one** comment on it holding the session's summary (the outcome
  line first, then what failed or changed, a link to the run). The comment is found again by
  its hidden marker (``MARKER``, at the start of its body) in a comment written by the bot
  account (``--bot-login``, ``github-actions[bot]`` for ``GITHUB_TOKEN``): a person's comment
  that quotes the marker is never edited. Every later run updates it in place;
* creates a check run named ``mxperf`` on the pull request's head commit (from the event's
  payload: in a ``pull_request`` event ``GITHUB_SHA`` is the merge commit), its conclusion
  ``success``, ``failure`` or ``neutral`` (nothing was compared), the summary as its output.
  Outside a pull request, only the check run, on ``GITHUB_SHA``.

Pull requests from forks and from Dependabot get a read-only token: the gate workflow only
uploads its report, and a second workflow on ``workflow_run`` (with ``pull-requests: write``
and ``checks: write``, never checking out the pull request's code) runs this command on the
downloaded report. The pull request is then read from the ``workflow_run`` payload, or, where
GitHub leaves that list empty (a fork's pull request), from ``REPORT_DIR/pull-request.json``
that the gate wrote (``{"number": N}``), taken only when the pull request's head is the run's
head commit. A gate that did not run its session says why there (``"skipped": "..."``): the
check run is then ``neutral``, not a failure for want of results.

No token, no permission, a rate limit (403 or 429 with ``retry-after`` or
``x-ratelimit-reset``), an API error: one line, and exit status 0: the gate's verdict is the
test step's exit status, not this. The token is never printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.history.github_api import API_VERSION, GitHub, GitHubError  # noqa: F401
from pytest_mxperf.store.results import Results, ResultsError

#: at the start of the comment's body; invisible in the rendered comment
MARKER = "<!-- pytest-mxperf: gate summary -->"
CHECK_NAME = "mxperf"
BOT_LOGIN = "github-actions[bot]"
#: what GitHub accepts: a comment's body, a check run's output summary
MAX_BODY = 65536
MAX_SUMMARY = 65535
PREFIX = "mxperf github: "


@dataclasses.dataclass(frozen=True)
class Target:
    """Where the verdict goes: the repository, the pull request (None: only a check run), the
    commit the check run is on, the run's page, and the pull request number the gate wrote
    that still has to be checked against the head commit (``claimed``)."""

    repository: str
    head_sha: str
    pull: Optional[int] = None
    run_url: Optional[str] = None
    claimed: Optional[int] = None


def target_from(environ: Mapping[str, str], event: Mapping[str, Any], report: Mapping[str, Any]) -> Target:
    """The target of this run from the Actions variables, the event's payload and what the
    gate wrote beside its report (``pull-request.json``: ``{"number": N}``). Pure."""
    repo = environ.get("GITHUB_REPOSITORY", "")
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    run_url = f"{server}/{repo}/actions/runs/{environ['GITHUB_RUN_ID']}" if environ.get("GITHUB_RUN_ID") else None
    name = environ.get("GITHUB_EVENT_NAME", "")
    if name in ("pull_request", "pull_request_target") and isinstance(event.get("pull_request"), Mapping):
        pr = event["pull_request"]
        return Target(repo, str((pr.get("head") or {}).get("sha") or environ.get("GITHUB_SHA", "")),
                      int(pr["number"]), run_url)
    if name == "workflow_run" and isinstance(event.get("workflow_run"), Mapping):
        wr = event["workflow_run"]
        head = str(wr.get("head_sha") or "")
        url = wr.get("html_url") or run_url   # the gate's run, whose log and artifacts these are
        if wr.get("event") not in ("pull_request", "pull_request_target"):
            return Target(repo, head, None, url)
        prs = [p for p in wr.get("pull_requests") or [] if isinstance(p, Mapping) and p.get("number")]
        if prs:
            return Target(repo, head, int(prs[0]["number"]), url)
        claimed = report.get("number")
        return Target(repo, head, None, url, int(claimed) if isinstance(claimed, int) else None)
    return Target(repo, environ.get("GITHUB_SHA", ""), None, run_url)


# ----------------------------------------------------------------------------- what is said

def conclusion(doc: Optional[Mapping[str, Any]], skipped: Optional[str] = None) -> str:
    """The check run's conclusion: ``failure`` when the session failed (or left no results),
    ``neutral`` when it compared nothing or the gate said why it did not run (``skipped``), else
    ``success``. Pure."""
    if doc is None:
        return "neutral" if skipped else "failure"
    session = doc.get("session") or {}
    if session.get("failures") or (session.get("exit_status") not in (None, 0)):
        return "failure"
    return "success" if session.get("verdicts") else "neutral"


def outcome_line(doc: Optional[Mapping[str, Any]], skipped: Optional[str] = None) -> str:
    """The first line of the comment and the check run's title. Pure."""
    if doc is None:
        return (f"pytest-mxperf: not run: {skipped}" if skipped
                else "pytest-mxperf: no results: the gate wrote no readable results.json")
    session = doc.get("session") or {}
    verdicts = session.get("verdicts") or {}
    failures = session.get("failures") or []
    if failures:
        said = ", ".join(f"{f.get('count', 0)} {f.get('kind')}" for f in failures)
        return f"pytest-mxperf: failed: {said} (of {len(verdicts)} figure(s) compared)"
    if session.get("exit_status") not in (None, 0):
        return f"pytest-mxperf: failed: the session exited {session.get('exit_status')}"
    if not verdicts:
        return "pytest-mxperf: nothing compared (no baseline or reference for these cells)"
    kinds: Dict[str, int] = {}
    for v in verdicts.values():
        kinds[str(v.get("kind"))] = kinds.get(str(v.get("kind")), 0) + 1
    return f"pytest-mxperf: passed: {len(verdicts)} figure(s) compared (" + ", ".join(
        f"{n} {k}" for k, n in sorted(kinds.items())) + ")"


def summary(doc: Optional[Mapping[str, Any]], run_url: Optional[str], limit: int, skipped: Optional[str] = None) -> str:
    """The outcome line, the session's markdown summary (what failed, what changed) and a link
    to the run, within ``limit`` characters. Pure."""
    head = [f"**{outcome_line(doc, skipped)}**"]
    tail = [f"[The run: log, report and artifacts]({run_url})"] if run_url else []
    body: List[str] = []
    if doc is not None:
        try:
            body = Results.from_doc(dict(doc)).markdown_summary()
        except (ResultsError, KeyError, TypeError, ValueError) as exc:
            body = [f"(the summary could not be made: {type(exc).__name__}: {exc})"]
    text = "\n".join(head + [""] + body + [""] + tail)
    if len(text) > limit:
        cut = "\n\n(cut: the whole summary is in the run's report)\n" + "\n".join(tail)
        text = text[:max(0, limit - len(cut))] + cut
    return text


def threshold_lines(changed: Sequence[Mapping[str, Any]]) -> List[str]:
    """The thresholds a pull request changes (``thresholds-changed.json``, written by the gate
    from both branches' pyproject.toml), which the gate did not use: it reads the base branch's.
    Pure."""
    if not changed:
        return []

    def val(x):
        return "unset" if x is None else f"{x}"
    return (["", "**Thresholds this pull request changes** (not used by this gate, which reads the base branch's "
             "`[tool.pytest-mxperf.thresholds]`):", ""]
            + [f"- `{c.get('pattern')}`: {val(c.get('base'))} -> {val(c.get('pull_request'))}" for c in changed])


def comment_body(doc: Optional[Mapping[str, Any]], run_url: Optional[str], skipped: Optional[str] = None,
                 changed: Sequence[Mapping[str, Any]] = ()) -> str:
    extra = "\n".join(threshold_lines(changed))
    text = summary(doc, run_url, MAX_BODY - len(MARKER) - 2 - len(extra), skipped)
    return MARKER + "\n" + text + ("\n" + extra if extra else "")


def ours(comment: Mapping[str, Any], bot_login: str = BOT_LOGIN) -> bool:
    """Whether a comment is the one this command keeps: written by the bot account and
    starting with the marker (a person quoting the marker writes ``> <!-- ...``, or is no
    bot). Pure."""
    user = comment.get("user") or {}
    return (user.get("type") == "Bot" and user.get("login") == bot_login
            and str(comment.get("body") or "").startswith(MARKER))


def keep_comment(gh: GitHub, repo: str, number: int, body: str, bot_login: str = BOT_LOGIN) -> Tuple[str, int]:
    """The pull request's one comment of this command, updated in place, else created:
    ("updated" | "created", its id)."""
    mine = [c for c in gh.pages(f"/repos/{repo}/issues/{number}/comments") if ours(c, bot_login)]
    if mine:
        cid = int(mine[0]["id"])
        gh.request("PATCH", f"/repos/{repo}/issues/comments/{cid}", {"body": body})
        return "updated", cid
    made, _ = gh.request("POST", f"/repos/{repo}/issues/{number}/comments", {"body": body})
    return "created", int((made or {}).get("id") or 0)


def create_check_run(gh: GitHub, target: Target, doc: Optional[Mapping[str, Any]], skipped: Optional[str] = None
                     ) -> int:
    run = {"name": CHECK_NAME, "head_sha": target.head_sha, "status": "completed",
           "conclusion": conclusion(doc, skipped),
           "completed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "output": {"title": outcome_line(doc, skipped)[:255],
                      "summary": summary(doc, target.run_url, MAX_SUMMARY, skipped)}}
    if target.run_url:
        run["details_url"] = target.run_url
    made, _ = gh.request("POST", f"/repos/{target.repository}/check-runs", run)
    return int((made or {}).get("id") or 0)


# ----------------------------------------------------------------------------- the command

def _read_json(path: Path, kind: type = dict) -> Any:
    """The JSON document in ``path`` when it is a ``kind``, else None (missing, unreadable)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, kind) else None


def _results(report_dir: Path) -> Optional[Dict[str, Any]]:
    try:
        return Results.load(report_dir / "results.json").doc
    except (ResultsError, OSError, ValueError):
        return None


def post(report_dir: Path, environ: Mapping[str, str], say: Callable[[str], None],
         opener: Callable = urllib.request.urlopen, bot_login: str = BOT_LOGIN) -> int:
    """Post the session in ``report_dir``: the comment (for a pull request) and the check run.
    Says one line per thing done or refused; returns 0 whatever GitHub answered."""
    token = environ.get("GITHUB_TOKEN", "")
    if not token:
        say(PREFIX + "no GITHUB_TOKEN: nothing posted (the workflow passes it as env: GITHUB_TOKEN)")
        return 0
    if not environ.get("GITHUB_REPOSITORY"):
        say(PREFIX + "no GITHUB_REPOSITORY: nothing posted (not a GitHub Actions run?)")
        return 0
    event = _read_json(Path(environ["GITHUB_EVENT_PATH"])) if environ.get("GITHUB_EVENT_PATH") else None
    beside = _read_json(report_dir / "pull-request.json") or {}
    target = target_from(environ, event or {}, beside)
    doc = _results(report_dir)
    skipped = str(beside["skipped"]) if doc is None and beside.get("skipped") else None
    if doc is None and not skipped:
        say(PREFIX + f"{report_dir / 'results.json'} is missing or unreadable: the check run says failure")
    gh = GitHub(environ.get("GITHUB_API_URL", "https://api.github.com"), token, opener)
    pull = target.pull
    if pull is None and target.claimed is not None:
        try:
            pr, _ = gh.request("GET", f"/repos/{target.repository}/pulls/{target.claimed}")
            if str(((pr or {}).get("head") or {}).get("sha")) == target.head_sha:
                pull = target.claimed
            else:
                say(PREFIX + f"pull request #{target.claimed} (from the report) is not at the run's head commit "
                    f"{target.head_sha[:12]}: no comment")
        except GitHubError as exc:
            say(PREFIX + str(exc))
    if pull is not None:
        try:
            changed = [c for c in _read_json(report_dir / "thresholds-changed.json", list) or [] if isinstance(c, dict)]
            how, cid = keep_comment(gh, target.repository, pull, comment_body(doc, target.run_url, skipped, changed),
                                    bot_login)
            say(PREFIX + f"comment {how} on pull request #{pull} (id {cid})")
        except GitHubError as exc:
            say(PREFIX + str(exc))
    if not target.head_sha:
        say(PREFIX + "no commit to put the check run on (GITHUB_SHA, or the event's head)")
        return 0
    try:
        rid = create_check_run(gh, target, doc, skipped)
        say(PREFIX + f"check run '{CHECK_NAME}' on {target.head_sha[:12]}: {conclusion(doc, skipped)} (id {rid})")
    except GitHubError as exc:
        say(PREFIX + str(exc))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_mxperf.cli.github", description=__doc__.splitlines()[0])
    ap.add_argument("report_dir", type=Path, help="the session's --perf-report directory")
    ap.add_argument("--bot-login", default=BOT_LOGIN, help="the account whose marked comment is updated")
    args = ap.parse_args(argv)
    return post(args.report_dir, os.environ, lambda line: print(line, flush=True), bot_login=args.bot_login)


if __name__ == "__main__":
    sys.exit(main())
