"""Alerts for the fleet (issue 38, part 2): ``python -m pytest_mxperf.history alert`` on a real
SQLite history store against a stand-in of GitHub's REST API on loopback
(tests/github_stand_in.py): one issue per machine and cause with its cells listed, a comment
only when something changed, closed when the cells recover; a machine's own step (nothing
the store records changed) alerts only with --any-cause; the webhook's payload, once per
change; the token and the webhook's URL in no output."""

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from github_stand_in import PERSON, GitHubStandIn
from test_history_store import doc

from pytest_mxperf.history import alerts
from pytest_mxperf.history.store import open_store

TOKEN = "ghs_alertT0k3n"


def _store(tmp_path, levels, models=("lenet", "alexnet")):
    """A store of sessions at ``levels``: [(value, mxnet version), ...] one session each."""
    path = tmp_path / "h.sqlite"
    with open_store(str(path)) as st:
        for i, (value, version) in enumerate(levels):
            st.append(doc(f"s{len(st.session_ids())}", 1000.0 + len(st.session_ids()), value, version, models=models))
    return path


def _alert(path, env, *args):
    proc = subprocess.run([sys.executable, "-m", "pytest_mxperf.history", "alert", "--store", str(path), *args],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    return proc.stdout


def _env(gh, **kw):
    import os
    return dict(os.environ, GITHUB_API_URL=gh.url, GITHUB_REPOSITORY="o/r", GITHUB_TOKEN=TOKEN, **kw)


def test_one_issue_per_cause_commented_only_on_change_and_closed_on_recovery(tmp_path):
    path = _store(tmp_path, [(100.0, "1.8.0")] * 5 + [(80.0, "1.9.1")] * 5)
    with GitHubStandIn(token=TOKEN) as gh:
        gh.issues[1] = {"number": 1, "title": "a person's issue", "state": "open", "user": dict(PERSON),
                        "labels": [{"name": alerts.LABEL}],
                        "body": alerts.MARKER.format(key="box:0000") + " quoted by a person"}
        out = _alert(path, _env(gh))
        opened = [i for i in gh.issues.values() if i["user"]["type"] == "Bot"]
        assert len(opened) == 1, out   # two cells, one cause: one issue
        issue = opened[0]
        assert "after MXNet 1.8.0 -> 1.9.1" in issue["title"] and "2 cell(s)" in issue["title"]
        assert issue["labels"] == [{"name": alerts.LABEL}]
        assert "score/alexnet/b8" in issue["body"] and "score/lenet/b8" in issue["body"]
        assert "opened issue #2" in out

        n_requests = len(gh.requests)
        out = _alert(path, _env(gh))   # nothing changed: no comment, no edit
        assert "nothing new" in out
        assert [r[0] for r in gh.requests[n_requests:]] == ["GET"]

        with open_store(str(path)) as st:   # the cells recover
            for i in range(5):
                st.append(doc(f"r{i}", 2000.0 + i, 100.0, "1.9.2", models=("lenet", "alexnet")))
        out = _alert(path, _env(gh))
        assert issue["state"] == "closed" and "closed issue #2: recovered" in out
        assert gh.comments[2][-1]["body"].startswith("Recovered: ")
        assert gh.issues[1]["state"] == "open" and 1 not in gh.comments   # the person's issue untouched


def test_a_cell_that_joins_a_standing_alert_is_a_comment_on_its_issue():
    a = alerts.Regression("box", "score/a", "MXNet 1.8.0 -> 1.9.1", 0.8, 100, 80, "s5", "1005")
    b = dataclasses_replace(a, cell="score/b")
    one, two = alerts.Alert("box", a.cause, (a,)), alerts.Alert("box", a.cause, (a, b))
    assert one.key == two.key   # keyed by machine, cause and direction, not by the cells or the step
    p = alerts.plan([two], {one.key: (5, one.cells)})
    assert not p.open and not p.close and p.update == ((5, two, ("score/a",)),)
    assert alerts._changed_text(("score/a",), two.cells) == "now slower too: `score/b`"
    assert alerts.plan([two], {two.key: (5, two.cells)}) == alerts.Plan((), (), ())


def dataclasses_replace(x, **kw):
    import dataclasses
    return dataclasses.replace(x, **kw)


def test_a_machines_own_step_alerts_only_with_any_cause(tmp_path):
    path = _store(tmp_path, [(100.0, "1.9.1")] * 5 + [(80.0, "1.9.1")] * 5, models=("lenet",))
    with open_store(str(path)) as st:
        assert alerts.standing(st) == []
        (a,) = alerts.standing(st, any_cause=True)
    assert a.cause.startswith(alerts.UNATTRIBUTED) and a.cells == ("score/lenet/b8/cpu:0/float32/threads=auto",)


class _Hook:
    """A webhook receiver on loopback: the JSON bodies it was posted."""

    def __enter__(self):
        self.posted, hook = [], self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                hook.posted.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/s3cr3t"
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_the_webhook_gets_each_change_once_with_a_slack_text(tmp_path):
    import os
    path = _store(tmp_path, [(100.0, "1.8.0")] * 5 + [(80.0, "1.9.1")] * 5, models=("lenet",))
    state = tmp_path / "state.json"
    with _Hook() as hook:
        env = dict(os.environ, MXPERF_WEBHOOK=hook.url)
        out = _alert(path, env, "--webhook-env", "MXPERF_WEBHOOK", "--state", str(state))
        assert "posted 1 change(s)" in out and hook.url not in out and "s3cr3t" not in out
        (payload,) = hook.posted
        assert payload["text"].startswith("pytest-mxperf alerts\nNew: mxperf: 1 cell(s) slower on box after MXNet")
        (event,) = payload["alerts"]
        assert event["event"] == "opened" and event["cells"][0]["cell"].startswith("score/lenet/b8")
        assert event["cells"][0]["ratio"] == pytest.approx(0.8, rel=0.05)
        out = _alert(path, env, "--webhook-env", "MXPERF_WEBHOOK", "--state", str(state))
        assert "nothing new" in out and len(hook.posted) == 1
    out = _alert(path, dict(os.environ, MXPERF_WEBHOOK="http://127.0.0.1:9/x"), "--webhook-env", "MXPERF_WEBHOOK",
                 "--state", str(tmp_path / "other.json"))
    assert "cannot reach the webhook" in out and not (tmp_path / "other.json").exists()   # tried again next run


def test_without_a_token_or_when_refused_one_line_and_exit_0(tmp_path):
    import os
    path = _store(tmp_path, [(100.0, "1.8.0")] * 5 + [(80.0, "1.9.1")] * 5, models=("lenet",))
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GITHUB_REPOSITORY")}
    assert "nothing posted; 1 alert(s) standing" in _alert(path, env)
    with GitHubStandIn(token=TOKEN) as gh:
        gh.refuse["GET /repos/o/r/issues"] = (403, {}, "Resource not accessible by integration")
        out = _alert(path, _env(gh))
        assert out.count("\n") == 1 and "the token may not do this" in out


def test_a_changed_alert_is_one_comment_and_its_body_updated_on_github():
    a = alerts.Regression("box", "score/a", "MXNet 1.8.0 -> 1.9.1", 0.8, 100, 80, "s5", "1005")
    b = dataclasses_replace(a, cell="score/b")
    with GitHubStandIn(token=TOKEN) as gh:
        from pytest_mxperf.history.github_api import GitHub
        api, said = GitHub(gh.url, TOKEN), []
        alerts.to_github(api, "o/r", [alerts.Alert("box", a.cause, (a,))], said.append)
        (number,) = gh.issues
        alerts.to_github(api, "o/r", [alerts.Alert("box", a.cause, (a, b))], said.append)
        assert len(gh.issues) == 1 and [c["body"] for c in gh.comments[number]] == ["now slower too: `score/b`"]
        assert "score/b" in gh.issues[number]["body"] and "2 cell(s)" in gh.issues[number]["title"]
        alerts.to_github(api, "o/r", [alerts.Alert("box", a.cause, (a, b))], said.append)
        assert len(gh.comments[number]) == 1 and said[-1].startswith(alerts.PREFIX + "nothing new")


def test_the_webhook_url_given_on_the_command_line_is_never_printed(tmp_path):
    import os
    path = _store(tmp_path, [(100.0, "1.8.0")] * 5 + [(80.0, "1.9.1")] * 5, models=("lenet",))
    with _Hook() as hook:
        out = _alert(path, dict(os.environ), "--webhook", hook.url, "--state", str(tmp_path / "s.json"))
        assert "posted 1 change(s)" in out and "s3cr3t" not in out and len(hook.posted) == 1
