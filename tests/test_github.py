"""The verdict where a pull request is reviewed (issue 38, part 1): ``python -m
pytest_mxperf.cli.github REPORT_DIR`` against a stand-in of GitHub's REST API on loopback
(tests/github_stand_in.py): one comment kept and updated in place, a person's comment quoting
the marker untouched, comments found over several pages, a check run on the pull request's
head commit following the session, the pull request of a ``workflow_run`` (a fork's, whose
payload lists none), refusals and rate limits in one line with exit status 0, and the token
in no output."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from github_stand_in import BOT, PERSON, GitHubStandIn

from pytest_mxperf.cli import github

TOKEN = "ghs_s3cr3tT0k3nValue"
HEAD, MERGE = "a" * 40, "m" * 40
KEY = "score/resnet50_v2/b8/cpu:0/float32/threads=auto"


def _doc(kind="unchanged", change=0.004):
    failing = kind in ("regression", "unresolved")
    verdict = {"kind": kind, "reason": "r", "change": change, "unit": "img/s", "current_median": 21.3,
               "baseline_median": 23.5, "interval": [0.87, 0.93] if failing else None, "metric": "throughput"}
    return {"schema": 1, "kind": "pytest-mxperf-results", "machine": {"id": "box"}, "records": [],
            "session": {"verdicts": {KEY: verdict}, "exit_status": 1 if failing else 0,
                        "failures": [{"kind": kind, "count": 1, "subjects": [KEY], "detail": "", "busy": 0}]
                        if failing else []}}


@pytest.fixture
def report(tmp_path):
    def write(doc=None, pull_request=None):
        d = tmp_path / "rep"
        d.mkdir(exist_ok=True)
        if doc is not None:
            (d / "results.json").write_text(json.dumps(doc))
        if pull_request is not None:
            (d / "pull-request.json").write_text(json.dumps(pull_request))
        return d
    return write


def _env(gh, tmp_path, event_name="pull_request", payload=None, token=TOKEN):
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload if payload is not None else
                               {"pull_request": {"number": 7, "head": {"sha": HEAD}}}))
    env = {"GITHUB_API_URL": gh.url, "GITHUB_REPOSITORY": "o/r", "GITHUB_EVENT_NAME": event_name,
           "GITHUB_EVENT_PATH": str(path), "GITHUB_SHA": MERGE, "GITHUB_SERVER_URL": "https://github.com",
           "GITHUB_RUN_ID": "99"}
    if token:
        env["GITHUB_TOKEN"] = token
    return env


def _post(report_dir, env):
    lines = []
    assert github.post(report_dir, env, lines.append) == 0
    assert not any(TOKEN in x for x in lines), lines
    return lines


def test_two_runs_leave_one_comment_updated_and_a_check_run_on_the_head_commit(tmp_path, report):
    with GitHubStandIn(token=TOKEN) as gh:
        gh.pulls[7] = {"number": 7, "head": {"sha": HEAD}}
        for i in range(130):  # more than a page of others' comments before ours (100 a page)
            gh.add_comment(7, f"comment {i}", PERSON if i % 2 else BOT)
        quoted = gh.add_comment(7, "> " + github.MARKER + "\n> an old summary, quoted", PERSON)
        forged = gh.add_comment(7, github.MARKER + "\na person pasting the marker", PERSON)
        env = _env(gh, tmp_path)
        lines = _post(report(_doc("regression", -0.10)), env)
        assert any("comment created on pull request #7" in x for x in lines), lines
        ours = [c for c in gh.comments[7] if github.ours(c)]
        assert len(ours) == 1
        body = ours[0]["body"]
        assert body.startswith(github.MARKER + "\n**pytest-mxperf: failed: 1 regression")
        assert KEY in body and "https://github.com/o/r/actions/runs/99" in body
        run = gh.check_runs[-1]
        assert (run["name"], run["head_sha"], run["conclusion"], run["status"]) == ("mxperf", HEAD, "failure",
                                                                                    "completed")
        assert run["output"]["title"].startswith("pytest-mxperf: failed") and KEY in run["output"]["summary"]

        lines = _post(report(_doc("unchanged")), env)   # the next push: the same comment, updated
        assert any("comment updated on pull request #7" in x for x in lines), lines
        ours2 = [c for c in gh.comments[7] if github.ours(c)]
        assert [c["id"] for c in ours2] == [ours[0]["id"]]
        assert ours2[0]["body"].startswith(github.MARKER + "\n**pytest-mxperf: passed: 1 figure(s) compared")
        assert gh.check_runs[-1]["conclusion"] == "success" and len(gh.check_runs) == 2
        # the person's comments quoting or pasting the marker are as they were
        assert quoted["body"].startswith("> " + github.MARKER) and forged["body"].endswith("pasting the marker")
        assert len(gh.comments[7]) == 133
        # the comments were read over two pages, following Link: rel="next"
        gets = [r for r in gh.requests if r[0] == "GET" and r[1].endswith("/issues/7/comments")]
        assert len(gets) == 4
        # every request carried the token in its header, and GitHub's media type and version
        assert all(r[2]["authorization"] == f"Bearer {TOKEN}" and r[2]["accept"] == "application/vnd.github+json"
                   and r[2]["x-github-api-version"] == github.API_VERSION for r in gh.requests)


def test_nothing_compared_is_neutral_and_no_results_is_a_failure(tmp_path, report):
    with GitHubStandIn(token=TOKEN) as gh:
        gh.pulls[7] = {"number": 7, "head": {"sha": HEAD}}
        doc = _doc()
        doc["session"]["verdicts"] = {}
        _post(report(doc), _env(gh, tmp_path))
        assert gh.check_runs[-1]["conclusion"] == "neutral"
        lines = _post(tmp_path / "empty", _env(gh, tmp_path))
        assert any("missing or unreadable" in x for x in lines), lines
        assert gh.check_runs[-1]["conclusion"] == "failure"
        assert "no results" in gh.check_runs[-1]["output"]["title"]


def test_outside_a_pull_request_only_the_check_run_on_the_pushed_commit(tmp_path, report):
    with GitHubStandIn(token=TOKEN) as gh:
        lines = _post(report(_doc()), _env(gh, tmp_path, "push", {"after": MERGE}))
        assert [r[0] for r in gh.requests] == ["POST"] and gh.check_runs[-1]["head_sha"] == MERGE
        assert not any("comment" in x for x in lines), lines


def test_a_workflow_run_posts_for_the_pull_request_of_the_gate_run(tmp_path, report):
    """The second workflow (workflow_run, write permissions, no checkout of the pull
    request): the pull request from the payload; for a fork's (GitHub lists none there) from
    the report's pull-request.json, only when that pull request's head is the run's head."""
    with GitHubStandIn(token=TOKEN) as gh:
        gh.pulls[7] = {"number": 7, "head": {"sha": HEAD}}
        gh.pulls[8] = {"number": 8, "head": {"sha": "b" * 40}}
        wr = {"head_sha": HEAD, "event": "pull_request", "html_url": "https://github.com/o/r/actions/runs/5",
              "pull_requests": [{"number": 7}]}
        _post(report(_doc()), _env(gh, tmp_path, "workflow_run", {"workflow_run": wr}))
        assert len([c for c in gh.comments[7] if github.ours(c)]) == 1
        assert gh.check_runs[-1]["head_sha"] == HEAD
        assert "actions/runs/5" in gh.comments[7][0]["body"]

        fork = dict(wr, pull_requests=[])
        _post(report(_doc(), pull_request={"number": 7}), _env(gh, tmp_path, "workflow_run", {"workflow_run": fork}))
        assert len([c for c in gh.comments[7] if github.ours(c)]) == 1  # found and updated
        lines = _post(report(_doc(), pull_request={"number": 8}),
                      _env(gh, tmp_path, "workflow_run", {"workflow_run": fork}))
        assert any("is not at the run's head commit" in x for x in lines), lines
        assert 8 not in gh.comments


@pytest.mark.parametrize("refusal, said", [
    ((403, {}, "Resource not accessible by integration"), "the token may not do this"),
    ((404, {}, "Not Found"), "not found"),
    ((403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "4102444800"}, "API rate limit exceeded"),
     "rate limited by GitHub (the limit resets in"),
    ((429, {"retry-after": "30"}, "secondary rate limit"), "rate limited by GitHub (retry after 30 s)"),
])
def test_a_refusal_is_one_line_and_exit_status_0(tmp_path, report, refusal, said):
    with GitHubStandIn(token=TOKEN) as gh:
        gh.pulls[7] = {"number": 7, "head": {"sha": HEAD}}
        gh.refuse["GET /repos/o/r/issues/7/comments"] = refusal
        gh.refuse["POST /repos/o/r/check-runs"] = refusal
        lines = _post(report(_doc()), _env(gh, tmp_path))
        assert len(lines) == 2 and all(said in x for x in lines), lines
        assert all("\n" not in x for x in lines)
        assert not gh.check_runs and 7 not in gh.comments


def test_no_token_or_a_bad_one_says_so_and_the_token_is_never_printed(tmp_path, report):
    with GitHubStandIn(token="another") as gh:
        doc = report(_doc())
        lines = _post(doc, _env(gh, tmp_path, token=None))
        assert lines == [github.PREFIX + "no GITHUB_TOKEN: nothing posted (the workflow passes it as env: GITHUB_TOKEN)"]
        assert not gh.requests
        env = _env(gh, tmp_path)
        proc = subprocess.run([sys.executable, "-m", "pytest_mxperf.cli.github", str(doc)], env=dict(env, PATH="/usr/bin"),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "HTTP 401" in proc.stdout and "Bad credentials" in proc.stdout
        assert TOKEN not in proc.stdout + proc.stderr


def test_an_unreachable_api_is_one_line(tmp_path, report):
    with GitHubStandIn(token=TOKEN) as gh:
        env = _env(gh, tmp_path)
    lines = _post(report(_doc()), env)   # the server is gone
    assert len(lines) == 2 and all("cannot reach the API" in x for x in lines), lines


def test_a_long_summary_is_cut_to_what_github_accepts():
    doc = _doc("regression", -0.1)
    doc["session"]["verdicts"] = {f"{KEY}-{i}": dict(doc["session"]["verdicts"][KEY], kind="regression")
                                  for i in range(3000)}
    body = github.comment_body(doc, "https://github.com/o/r/actions/runs/1")
    assert len(body) <= github.MAX_BODY and body.startswith(github.MARKER)
    assert body.rstrip().endswith("(https://github.com/o/r/actions/runs/1)") and "(cut:" in body


def test_a_gate_that_did_not_run_says_why_and_is_neutral(tmp_path, report):
    with GitHubStandIn(token=TOKEN) as gh:
        gh.pulls[7] = {"number": 7, "head": {"sha": HEAD}}
        d = report(None, pull_request={"number": 7, "skipped": "the MXNet pin did not change"})
        _post(d, _env(gh, tmp_path))
        run = gh.check_runs[-1]
        assert run["conclusion"] == "neutral" and run["output"]["title"] == (
            "pytest-mxperf: not run: the MXNet pin did not change")
        assert "not run: the MXNet pin did not change" in gh.comments[7][0]["body"]


def test_the_workflows_post_from_a_second_workflow_that_never_runs_the_pull_requests_code():
    """The gate's token is read-only for forks and Dependabot: it uploads its report with the
    pull request's number, and mxperf-pr-report.yml (workflow_run, write permissions) posts it
    from the default branch's code, never checking out the pull request."""
    from pathlib import Path
    wf = Path(__file__).resolve().parent.parent / ".github" / "workflows"
    gate = (wf / "mxnet-upgrade-gate.yml").read_text()
    assert "permissions:\n  contents: read\n" in gate and "pull-requests: write" not in gate
    assert "ab-report/pull-request.json" in gate and "pytest_mxperf.cli.github" not in gate
    post = (wf / "mxperf-pr-report.yml").read_text()
    assert "workflow_run:\n    workflows: [mxnet-upgrade-gate]\n    types: [completed]" in post
    for permission in ("pull-requests: write", "checks: write", "actions: read", "contents: read"):
        assert f"\n  {permission}" in post, permission
    assert "run-id: ${{ github.event.workflow_run.id }}" in post
    assert "head_sha" not in post and "ref:" not in post and "head_branch" not in post  # no checkout of the PR
    assert "run: python -m pytest_mxperf.cli.github ab-report" in post
    assert "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}" in post


def test_the_comment_lists_the_thresholds_the_pull_request_changes(tmp_path, report):
    """The gate reads the base branch's thresholds (--perf-thresholds); what the pull request
    would change there (thresholds-changed.json, written by the gate) is listed in the comment."""
    with GitHubStandIn(token=TOKEN) as gh:
        gh.pulls[7] = {"number": 7, "head": {"sha": HEAD}}
        d = report(_doc())
        (d / "thresholds-changed.json").write_text(json.dumps(
            [{"pattern": "score/*", "base": 0.05, "pull_request": 0.5},
             {"pattern": "latency/*", "base": None, "pull_request": 0.2}]))
        _post(d, _env(gh, tmp_path))
        body = gh.comments[7][0]["body"]
        assert "**Thresholds this pull request changes** (not used by this gate" in body
        assert "- `score/*`: 0.05 -> 0.5" in body and "- `latency/*`: unset -> 0.2" in body
    gate = (Path(__file__).resolve().parent.parent / ".github" / "workflows" / "mxnet-upgrade-gate.yml").read_text()
    assert '--perf-thresholds "$RUNNER_TEMP/base-pyproject.toml"' in gate
    assert "ab-report/thresholds-changed.json" in gate
