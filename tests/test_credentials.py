"""Credentials never leave (issue 36, part 1): a store location's password is written,
printed and stored nowhere, and no child process gets a secret from the environment.

The end-to-end test runs a session (stand-in workers: tests/stub_worker.py) against a real
PostgreSQL server with password authentication, its URL and password given through the
environment as the nightly workflow gives them, with canary values that are then looked for
in every file the session wrote, every row of the store, every line it printed, and the
environment of every Python process it started (a ``sitecustomize`` on ``PYTHONPATH``, which
every child keeps, records each one's environment as it starts).
"""

import json
import os
import sys
from pathlib import Path

import pg_server
import pytest

from pytest_mxperf.history import location
from pytest_mxperf.history.store import describe, open_store
from pytest_mxperf.proc import child_env as ce

# ----------------------------------------------------------------------------- locations


@pytest.mark.parametrize("given, shown", [
    ("postgresql://u:pw@h:5432/db", "postgresql://u@h:5432/db"),
    ("postgres://u:p%40ss@h/db?sslmode=require", "postgres://u@h/db?sslmode=require"),
    ("postgresql://h/db?user=u&password=pw", "postgresql://h/db?user=u"),
    ("postgresql://u@h/db?sslpassword=k&sslmode=verify-full&PASSWORD=x", "postgresql://u@h/db?sslmode=verify-full"),
    ("postgresql://:pw@h/db", "postgresql://h/db"),
    ("host=h password=pw dbname=d", "host=h dbname=d"),
    ("host=h password='p w\\'x' user=u sslpassword = k", "host=h user=u"),
    ("/var/lib/mxperf/history.sqlite", "/var/lib/mxperf/history.sqlite"),
    ("sqlite:///tmp/h.sqlite", "sqlite:///tmp/h.sqlite"),
])
def test_a_location_is_shown_without_its_credentials(given, shown):
    assert location.shown(given) == shown
    assert describe(given) == shown
    assert location.connect_string(location.remember(given)) == given  # the driver gets it whole
    assert "pw" not in location.shown(given).replace("pwd", "")


def test_a_keyword_string_is_a_postgres_location_and_one_that_cannot_be_read_is_refused():
    assert location.is_postgres("host=h dbname=d") and not location.is_postgres("/tmp/a=b.sqlite")
    with pytest.raises(location.LocationError):
        location.shown("host=h password='unterminated")
    assert "unterminated" not in describe("host=h password='unterminated")


def test_the_whole_location_stays_in_memory_for_the_driver_only():
    safe = location.remember("postgresql://u:s3cret@h/db")
    assert safe == "postgresql://u@h/db" and location.connect_string(safe) == "postgresql://u:s3cret@h/db"
    assert location.connect_string("/a/path.sqlite") == "/a/path.sqlite"


def test_scrub_text_removes_urls_passwords_and_keyword_passwords():
    doc = json.dumps({"options": {"history": "postgresql://u:s3cret@h/db?password=s3cret"},
                      "note": "host=h password=s3cret dbname=d"})
    out = location.scrub_text(doc)
    assert "s3cret" not in out and "postgresql://u@h/db" in out and "dbname=d" in out
    assert location.scrub_text(out) == out


def test_scrub_rewrites_stored_rows(tmp_path):
    where = str(tmp_path / "h.sqlite")
    with open_store(where) as s:
        s.conn.raw.execute("INSERT INTO machines (id, facts) VALUES (?, ?)",
                           ("m", json.dumps({"store": "postgresql://u:s3cret@h/db"})))
        assert s.scrub(location.scrub_text) == 1
        assert s.scrub(location.scrub_text) == 0
        assert "s3cret" not in s._rows("SELECT facts FROM machines")[0][0]


# ----------------------------------------------------------------------------- children's environments

CI_ENV = {"PATH": "/usr/bin", "HOME": "/h", "OMP_NUM_THREADS": "2", "MXNET_SUBGRAPH_BACKEND": "NONE",
          "KMP_AFFINITY": "compact", "CUDA_VISIBLE_DEVICES": "0", "LD_LIBRARY_PATH": "/x", "PYTHONPATH": "/p",
          "DMLC_ROLE": "worker", "MXPERF_CACHE_DIR": "/c", "LC_ALL": "C.UTF-8",
          # what a CI job holds that no child needs
          "MXPERF_HISTORY": "postgresql://u:pw@h/db", "GITHUB_TOKEN": "ghp_x", "DATABASE_URL": "postgres://u:pw@h/d",
          "AWS_SECRET_ACCESS_KEY": "k", "AWS_ACCESS_KEY_ID": "id", "PGPASSWORD": "pw", "PGPASSFILE": "/h/.pgpass",
          "https_proxy": "http://u:pw@proxy:3128", "MXNET_S3_SECRET_KEY": "k", "CUDA_TOKEN": "t",
          "PIP_INDEX_URL": "https://u:tok@index/simple", "NETRC": "/h/.netrc", "SSH_AUTH_SOCK": "/s"}


def test_a_child_gets_what_mxnet_and_python_read_and_no_secret():
    env = ce.child_env(CI_ENV)
    assert set(env) == {"PATH", "HOME", "OMP_NUM_THREADS", "MXNET_SUBGRAPH_BACKEND", "KMP_AFFINITY",
                        "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PYTHONPATH", "DMLC_ROLE", "MXPERF_CACHE_DIR",
                        "LC_ALL"}
    assert "MXNET_S3_SECRET_KEY" not in env and "GITHUB_TOKEN" not in env


def test_pip_also_gets_what_reaches_a_private_index_and_still_no_store_or_token():
    env = ce.child_env(CI_ENV, purpose="install")
    assert {"PIP_INDEX_URL", "https_proxy", "NETRC", "PATH"} <= set(env)
    assert not {"MXPERF_HISTORY", "GITHUB_TOKEN", "DATABASE_URL", "PGPASSWORD", "AWS_SECRET_ACCESS_KEY"} & set(env)


def test_a_variable_passed_through_by_name_reaches_every_child(monkeypatch):
    monkeypatch.setattr(ce, "_passed", frozenset())
    ce.pass_through(["MY_DATA_DIR", "CUDA_TOKEN"])
    env = ce.child_env(dict(CI_ENV, MY_DATA_DIR="/d"), extra={"OMP_NUM_THREADS": "1"})
    assert env["MY_DATA_DIR"] == "/d" and env["CUDA_TOKEN"] == "t" and env["OMP_NUM_THREADS"] == "1"
    assert "GITHUB_TOKEN" not in env


def test_every_spawned_child_gets_its_environment_from_the_builder(tmp_path, monkeypatch):
    from pytest_mxperf.proc import spawn
    monkeypatch.setenv("GITHUB_TOKEN", "canary-token")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    out = tmp_path / "env.json"
    proc = spawn.start([sys.executable, "-c", f"import json, os; json.dump(dict(os.environ), open({str(out)!r}, 'w'))"],
                       log_path=tmp_path / "log")
    assert proc.wait(60) == 0
    got = json.loads(out.read_text())
    assert "GITHUB_TOKEN" not in got and got["OMP_NUM_THREADS"] == "3"


# ----------------------------------------------------------------------------- a whole session

CANARY = "Canary-7f3a9c-pw"
TOKEN = "ghp_canary7f3a9c"

CELLS = """
import pytest

@pytest.mark.mxperf_grid(models=("lenet",), batch_sizes=(8,))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""

#: records the environment of every Python process that starts with it on PYTHONPATH
SITECUSTOMIZE = """
import json, os, sys
with open({log!r}, "a") as fh:
    fh.write(json.dumps({{"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv[:3],
                         "secret": any({canary!r} in v or {token!r} in v for v in os.environ.values()),
                         "names": sorted(os.environ)}}) + "\\n")
"""


@pytest.fixture(scope="module")
def pg_with_password():
    bindir = pg_server.server_binaries()
    if bindir is None:
        pytest.skip("no PostgreSQL server binary (pg_ctl, initdb) on this machine")
    pytest.importorskip("psycopg")
    try:
        server = pg_server.Server(bindir, password=CANARY)
    except KeyError:
        pytest.skip("running as root and no 'postgres' user to start the server as")
    try:
        yield server
    finally:
        server.stop()


def _files_holding(root: Path, secrets):
    out = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            if any(s.encode() in data for s in secrets):
                out.append(str(p))
    return out


@pytest.mark.parametrize("how", ["url", "pgpassword"])
def test_a_session_against_a_password_protected_store_leaks_the_password_nowhere(
        how, pg_with_password, pytester, make_stub_python, monkeypatch):
    import psycopg
    server = pg_with_password
    with psycopg.connect(server.url(), autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS pair_spreads, test_durations, verdicts, processes, cell_results, cells, sessions, machines, "
                  "schema_version")
    log = pytester.path / "children.jsonl"
    site = pytester.path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(log=str(log), canary=CANARY, token=TOKEN))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    if how == "url":  # as the nightly workflow gave it before: the password inside the URL
        monkeypatch.setenv("MXPERF_HISTORY", server.url())
    else:             # as the docs say now: the URL without it, the password the driver's way
        monkeypatch.setenv("MXPERF_HISTORY", server.url(with_password=False))
        monkeypatch.setenv("PGPASSWORD", CANARY)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    pytester.makepyfile(test_cells=CELLS)
    rep = pytester.path / "rep"
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-m", "cpu", "--perf-ctx", "cpu", "--perf-machine", "box",
                                      "--perf-baselines-dir", str(pytester.path / "bl"), "--perf-update-baselines",
                                      "--perf-python", make_stub_python("now", site=True), "--perf-report", str(rep))
    printed = r.stdout.str() + r.stderr.str()
    assert r.ret == 0, printed
    # the session was stored in the password-protected store
    with psycopg.connect(server.url(), autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
        rows = []
        for table, column in c.execute("SELECT table_name, column_name FROM information_schema.columns "
                                       "WHERE table_schema = current_schema() AND data_type = 'text'").fetchall():
            rows += [v for (v,) in c.execute(f"SELECT {column} FROM {table}").fetchall() if v]
    assert rows and not [v for v in rows if CANARY in v or TOKEN in v]
    doc = json.loads((rep / "results.json").read_text())
    assert doc["session"]["options"]["history"] == server.url(with_password=False)
    # no file the session wrote, no printed line
    assert [f for f in _files_holding(pytester.path, [CANARY, TOKEN]) if not f.startswith(str(site))] == []
    assert CANARY not in printed and TOKEN not in printed
    # every child: the workers (stand-ins), the machine-state probes, the install queries
    children = [json.loads(line) for line in log.read_text().splitlines()]
    session = [c for c in children if c["ppid"] == os.getpid()]  # the session pytester started
    started = [c for c in children if c not in session]
    assert session and all(c["secret"] for c in session)  # the check sees the canary where it is
    assert len(started) >= 3, children
    assert [c for c in started if c["secret"]] == []
    assert not [c for c in started if {"MXPERF_HISTORY", "PGPASSWORD", "GITHUB_TOKEN"} & set(c["names"])]
