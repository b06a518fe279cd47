"""The history store end to end: SQLite (append, reopen, idempotent, a newer schema refused
untouched, a writer killed mid-session), PostgreSQL against a real server started from the
server binaries (concurrent writers), the command line, the trend pages, and a plugin
session (stand-in workers) appended with its shard."""

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pg_server
import pytest

import stand_ins

from pytest_mxperf.history import fleet, pages
from pytest_mxperf.history.schema import SCHEMA_VERSION
from pytest_mxperf.history.store import HistoryError, open_store
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.store import results
from pytest_mxperf.zoo import MODELS as _ZOO

MODELS = tuple(sorted(m for m in _ZOO if m != "lenet"))

ROOT = Path(__file__).resolve().parents[1]


def doc(sid, started, value, version="1.9.1", machine="box", models=("lenet",), verdict=None, fleet_id=None,
        shard=None):
    """A results document as the suite writes it: real cells of three processes each."""
    records = []
    for model in models:
        w = Workload(model, batch_size=8)
        runs = [RunResult(w, "ok", batches_per_round=1, round_seconds=[8.0 / (value * f)],
                          figures={"peak_rss_mib": 300.0},
                          meta={"mxnet_version": version, "env": {"OMP_NUM_THREADS": "2"}}) for f in (0.98, 1.0, 1.01)]
        records.append(results.make_record(CellMeasurement(w, runs), floor={"value": 10.0, "documented": 12.5}))
    key = records[0]["key"]
    verdicts = {key: {"kind": verdict, "change": -0.1, "interval": [-0.12, -0.08], "reason": "x"}} if verdict else {}
    return {"schema": results.SCHEMA_VERSION, "kind": results.KIND,
            "machine": {"id": machine, "hardware": {"cpu_model": "X"}},
            "session": {"id": sid, "started": started, "software": {"mxnet_version": version, "python": "3.11.7",
                                                                     "features": ["MKLDNN"]},
                        "verdicts": verdicts, "fleet_id": fleet_id, "shard": shard, "complete": True},
            "records": records}


def test_sqlite_append_reopen_and_idempotent(tmp_path):
    where = str(tmp_path / "h.sqlite")
    with open_store(where) as s:
        assert s.append(doc("a", 1.0, 100.0)) is True
        assert s.append(doc("b", 2.0, 101.0, verdict="unchanged")) is True
        assert s.append(doc("a", 1.0, 100.0)) is False  # the same session again: stored once
    with open_store(where) as s:
        assert s.session_ids() == ["a", "b"]
        (cell,) = s.cells()
        assert cell["unit"] == "img/s" and cell["higher_is_better"]
        hist = s.history(cell["key"])
        assert [h["session"] for h in hist] == ["a", "b"] and hist[1]["verdict"] == "unchanged"
        assert hist[0]["fast_end"] == pytest.approx(100.0 * 1.0 + 0.5 * (1.01 - 1.0) * 100.0)  # upper quartile
        assert hist[0]["published"] == 12.5 and hist[0]["environment"] == {"OMP_NUM_THREADS": "2"}
    con = sqlite3.connect(where)
    assert con.execute("SELECT count(*) FROM processes").fetchone()[0] == 6
    assert con.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION


def test_a_store_of_a_newer_schema_is_refused_and_left_untouched(tmp_path):
    where = tmp_path / "h.sqlite"
    with open_store(str(where)) as s:
        s.append(doc("a", 1.0, 100.0))
    con = sqlite3.connect(str(where))
    con.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    con.commit()
    con.close()
    before = where.read_bytes()
    with pytest.raises(HistoryError) as ei:
        open_store(str(where))
    assert "newer" in str(ei.value) and "\n" not in str(ei.value)
    assert where.read_bytes() == before


def test_a_file_that_is_no_store_is_one_line(tmp_path):
    bad = tmp_path / "h.sqlite"
    bad.write_text("not a database at all " * 100)
    with pytest.raises(HistoryError) as ei:
        open_store(str(bad))
    assert "\n" not in str(ei.value)


WRITER = """
import sys, time
sys.path.insert(0, sys.argv[3])
from test_history_store import MODELS, doc
from pytest_mxperf.history.store import open_store
s = open_store(sys.argv[1])
i = 0
while True:
    s.append(doc(f"{sys.argv[2]}-{i}", float(i), 100.0 + i, models=MODELS))
    print(i, flush=True)
    i += 1
"""


def test_a_writer_killed_mid_session_loses_at_most_that_session(tmp_path):
    where = str(tmp_path / "h.sqlite")
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.Popen([sys.executable, str(script), where, "w", str(ROOT / "tests")], stdout=subprocess.PIPE,
                            text=True)
    done = []
    for line in proc.stdout:
        done.append(int(line))
        if len(done) >= 5:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with open_store(where) as s:
        ids = s.session_ids()
        assert all(f"w-{i}" in ids for i in done)       # every session it finished is there
        assert len(ids) in (len(done), len(done) + 1)   # and the one it was writing, whole or not at all
        for sid in ids:
            n = s._rows("SELECT count(*) FROM cell_results WHERE session_id = ?", (sid,))[0][0]
            assert n == len(MODELS), (sid, n)


# ----------------------------------------------------------------------------- PostgreSQL

PG_BIN = pg_server.server_binaries()


@pytest.fixture(scope="module")
def pg_url():
    """A real PostgreSQL server in a temporary directory, started from the server binaries."""
    if PG_BIN is None:
        pytest.skip("no PostgreSQL server binary (pg_ctl, initdb) on this machine")
    pytest.importorskip("psycopg")
    try:
        server = pg_server.Server(PG_BIN)
    except KeyError:
        pytest.skip("running as root and no 'postgres' user to start the server as")
    try:
        yield server.url()
    finally:
        server.stop()


def _pg_reset(url):
    import psycopg
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS pair_spreads, test_durations, verdicts, processes, cell_results, cells, sessions, machines, "
                  "schema_version")


def test_postgres_append_read_and_refuse_a_newer_schema(pg_url):
    _pg_reset(pg_url)
    with open_store(pg_url) as s:
        assert s.append(doc("a", 1.0, 100.0)) and s.append(doc("b", 2.0, 90.0, verdict="regression"))
        assert not s.append(doc("a", 1.0, 100.0))
        assert [h["verdict"] for h in s.history(s.cells()[0]["key"])] == [None, "regression"]
    import psycopg
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(HistoryError) as ei:
        open_store(pg_url)
    assert "newer" in str(ei.value)



def test_postgres_sums_each_kinds_own_last_sessions_of_pair_spreads(pg_url):
    _pg_reset(pg_url)
    with open_store(pg_url) as s:
        for i, ss in enumerate([0.01, 0.02, 0.03, 0.04]):
            d = doc(f"whole{i}", float(i), 100.0)
            d["session"]["pair_spreads"] = {"rounds/kvstore": [ss, 8]}
            assert s.append(d)
        d = doc("dist-only", 10.0, 100.0)
        d["session"]["pair_spreads"] = {"rounds/dist": [0.009, 13]}
        assert s.append(d)
        got = {f: (ss, df) for f, ss, df in s.pair_spreads("box", 3)}
    assert got == {"rounds/dist": (pytest.approx(0.009), 13), "rounds/kvstore": (pytest.approx(0.09), 24)}

def _pg_writer(url, name, n):
    with open_store(url) as s:
        for i in range(n):
            s.append(doc(f"{name}-{i}", float(i), 100.0, models=(MODELS[int(name[1:])], "lenet"),
                         fleet_id="run-7", shard=f"{int(name[1:]) + 1}/4"))
            s.append(doc(f"{name}-{i}", float(i), 100.0))  # a retry of the same session adds nothing


def test_four_concurrent_writers_lose_and_duplicate_nothing(pg_url):
    _pg_reset(pg_url)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_pg_writer, args=(pg_url, f"w{k}", 12)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with open_store(pg_url) as s:
        ids = s.session_ids()
        assert len(ids) == len(set(ids)) == 48
        fl = s.fleet_session("run-7")
        assert fl["shards"] == ["1/4", "2/4", "3/4", "4/4"] and fl["missing_shards"] == []
        assert len(fl["cells"]) == len({"lenet", *MODELS[:4]})


def test_an_unreachable_server_is_one_line():
    with pytest.raises(HistoryError) as ei:
        open_store("postgresql://nobody:secret@127.0.0.1:1/none")
    assert "\n" not in str(ei.value) and "secret" not in str(ei.value)


# ----------------------------------------------------------------------------- shards, pages, command line

def test_every_key_is_in_exactly_one_shard():
    keys = [f"perf_tests/test_scoring.py::test_score[cpu-m{i}-{b}]" for i in range(30) for b in (1, 2, 4, 8)]
    parts = [fleet.select_shard(keys, k, 4) for k in range(1, 5)]
    assert sorted(sum(parts, [])) == sorted(keys) and all(parts)
    assert fleet.shard_of(keys[0], 4) == fleet.shard_of(keys[0], 4)
    for bad in ("0/4", "5/4", "x", "2-4"):
        with pytest.raises(fleet.ShardError):
            fleet.parse_shard(bad)


def test_publish_writes_pages_that_need_no_network(tmp_path):
    where = str(tmp_path / "h.sqlite")
    with open_store(where) as s:
        for i in range(12):
            s.append(doc(f"s{i}", 1000.0 + 3600 * i, (25.0 if i < 4 else 100.0) * (1 + 0.01 * (i % 3)),
                         version="1.6.0" if i < 4 else "1.9.1", verdict="improvement" if i == 4 else None))
        files = pages.publish(s, tmp_path / "out")
    index = (tmp_path / "out" / "index.html").read_text()
    assert "score/lenet/b8/cpu:0/float32/threads=auto" in index and "MXNet 1.6.0 -&gt; 1.9.1" in index
    cell = files[1].read_text()
    assert "<svg" in cell and "published 12.5" in cell and "<title>" in cell
    for f in files:
        text = f.read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text


def test_a_cell_page_of_two_machines_draws_a_line_each_and_finds_steps_per_machine(tmp_path):
    where = str(tmp_path / "h.sqlite")
    with open_store(where) as s:
        for i in range(16):  # two runners taking turns; the slow one steps down at its fifth session
            slow = i % 2 == 1
            value = (30.0 if i < 9 else 24.0) if slow else 100.0
            s.append(doc(f"s{i}", 1000.0 + 3600 * i, value * (1 + 0.004 * (i % 3)),
                         machine="slow-box" if slow else "fast-box"))
        files = pages.publish(s, tmp_path / "out")
    cell = files[1].read_text()
    assert cell.count("<polyline") == 2 and "machines:" in cell and "slow-box" in cell and "fast-box" in cell
    assert cell.count("stroke='#b00'") == 1 and "step x0.798 on slow-box" in cell
    index = (tmp_path / "out" / "index.html").read_text()
    assert "on slow-box" in index
    r = _cli("--store", where, "changes")
    assert r.returncode == 0 and "slow-box" in r.stdout and "s9" in r.stdout and "1 change point(s)" in r.stdout


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "pytest_mxperf.history", *args], capture_output=True, text=True)


def test_the_command_line_imports_lists_changes_and_says_errors_in_one_line(tmp_path):
    where = str(tmp_path / "h.sqlite")
    for i in range(8):
        d = tmp_path / f"r{i}"
        d.mkdir()
        (d / "results.json").write_text(json.dumps(doc(f"s{i}", 10.0 * i, 40.0 if i < 4 else 30.0)))
    r = _cli("--store", where, "import", str(tmp_path))
    assert r.returncode == 0 and "imported 8 session(s)" in r.stdout, r.stderr
    assert "0 session(s)" in _cli("--store", where, "import", str(tmp_path)).stdout  # all there already
    r = _cli("--store", where, "changes")
    assert r.returncode == 0 and "x0.750" in r.stdout and "s4" in r.stdout and "1 change point(s)" in r.stdout
    r = _cli("--store", where, "import", str(tmp_path / "nothing-here"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    r = _cli("summary", str(tmp_path / "r0" / "results.json"))
    assert r.returncode == 0 and "## pytest-mxperf" in r.stdout


def latency_doc(sid, started, ms, machine="box"):
    """A results document of one latency cell (ms, lower is better), three processes."""
    w = Workload("lenet", batch_size=8, mode="latency")
    runs = [RunResult(w, "ok", figures={"latency_p99_ms": ms * f}, meta={"mxnet_version": "1.9.1"})
            for f in (0.99, 1.0, 1.01)]
    return {"schema": results.SCHEMA_VERSION, "kind": results.KIND, "machine": {"id": machine},
            "session": {"id": sid, "started": started, "software": {"mxnet_version": "1.9.1"}, "complete": True},
            "records": [results.make_record(CellMeasurement(w, runs))]}


def test_a_latency_cell_screens_its_slow_spells_above_and_calls_a_rise_worse(tmp_path):
    """Lower is better: the sessions at x1.8 fell into slow spells (no step at them), the
    level rising by a quarter from s6 on is one step, worse, in ``changes`` and on the pages."""
    where = str(tmp_path / "h.sqlite")
    with open_store(where) as s:
        for i in range(12):
            ms = (10.0 if i < 6 else 12.5) * (1 + 0.004 * (i % 3)) * (1.8 if i in (2, 9) else 1.0)
            s.append(latency_doc(f"s{i}", 1000.0 + 3600 * i, ms))
        (cell,) = s.cells()
        assert cell["unit"] == "ms" and cell["higher_is_better"] is False
        files = pages.publish(s, tmp_path / "out")
    r = _cli("--store", where, "changes")
    assert r.returncode == 0 and "1 change point(s)" in r.stdout, r.stdout + r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("latency/")]
    assert "  s6  " in line and " worse (" in line and "x1.2" in line
    page = files[1].read_text()
    assert "<td class='down'>x1.2" in page and " worse</td>" in page and ", worse: " in page
    assert "<td class='down'>x1.2" in (tmp_path / "out" / "index.html").read_text()


CELLS = """
import pytest

@pytest.mark.mxperf_grid(models=("lenet", "mlp"), batch_sizes=(8,))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""


def test_a_plugin_session_is_appended_with_its_shard(pytester, make_stub_python, tmp_path):
    pytester.makepyfile(test_cells=CELLS)
    where = str(tmp_path / "h.sqlite")
    common = ["-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box", "--perf-ctx", "cpu",
              "--perf-no-probe", "--perf-store", where, "--perf-python", make_stub_python("now", rate=100.0)]
    r = stand_ins.session(pytester, *common, "--perf-shard", "1/1", "--perf-fleet", "f1", "-v")
    out = r.stdout.str()  # -v: the full report says where the session is kept
    assert r.ret == 0, out
    assert "shard 1/1: 2 of 2 test(s), fleet f1" in out and "kept in the history store" in out
    with open_store(where) as s:
        (sess,) = s.sessions()
        assert sess["fleet_id"] == "f1" and sess["shard"] == "1/1" and sess["kind"] == "suite"
        assert len(s.cells()) == 2 and s.fleet_session("f1")["cells"] == sorted(c["key"] for c in s.cells())
    r = stand_ins.session(pytester, *common, "--perf-shard", "5/2")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "K must be 1..N" in r.stderr.str()
    r = stand_ins.session(pytester, *common[:-4], "--perf-store", "none", "--perf-python", common[-1])
    assert r.ret == 0 and "history store" not in r.stdout.str()


def test_a_session_keeps_what_its_tests_took_and_the_next_one_on_the_machine_starts_from_it(
        pytester, make_stub_python, tmp_path):
    """#37: the estimate said first comes from this machine's own costs once its history has
    them (what each test and the session took last time), the constants before that."""
    import re
    pytester.makepyfile(test_cells=CELLS)
    where = str(tmp_path / "h.sqlite")
    common = ["-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box", "--perf-ctx", "cpu",
              "--perf-no-probe", "--perf-store", where, "--perf-python", make_stub_python("now", rate=100.0),
              "--perf-baselines-dir", str(tmp_path / "bl")]
    first = stand_ins.session(pytester, *common, "--perf-update-baselines")
    out = first.stdout.str()
    assert first.ret == 0, out
    assert ("not scaled: this machine's MXNet speed was not read; this machine's own once a session is in its "
            "history)") in out, out
    with open_store(where) as s:
        (took,) = s.durations("box", "recording")
        assert s.durations("box", "suite") == [] and s.durations("other", "recording") == []
    # the grid's first test measured both cells; the second found its cell measured
    assert sorted(n.split("/")[-1] for n in took["tests"]) == ["test_cells.py::test_cells[cpu0-lenet-b8]",
                                                             "test_cells.py::test_cells[cpu0-mlp-b8]"]
    assert took["wall_seconds"] >= sum(took["tests"].values()) > 0
    again = stand_ins.session(pytester, *common, "--perf-update-baselines")
    line = next(x for x in again.stdout.str().splitlines() if x.startswith("mxperf: 2 measuring test(s)"))
    assert "2 test(s) at what they took in this machine's last 1 session(s) of the kind" in line, line
    assert "confirming suspects included as those sessions needed it" in line, line
    said = float(re.search(r"expected about (\d+) s", line).group(1))
    assert abs(said - took["wall_seconds"]) <= 0.5 + 1e-6, (line, took)  # the last session's time, as it was
    # a session against the baseline is another kind: its first one has the constants
    compare = stand_ins.session(pytester, *common)
    assert "costs measured on " in compare.stdout.str()
    with open_store(where) as s:
        assert len(s.durations("box", "baseline")) == 1 and s.durations("box", "suite") == []
    # one with nothing to compare (no baseline in its directory) is a third kind: it does not start
    # from the session against the baseline (whose suspects it will never settle), nor that from it
    nothing = stand_ins.session(pytester, *common[:-1], str(tmp_path / "no-baselines"))
    assert "costs measured on " in nothing.stdout.str()
    again = stand_ins.session(pytester, *common)
    assert "at what they took in this machine's last 1 session(s) of the kind" in again.stdout.str()
    with open_store(where) as s:
        assert [len(s.durations("box", k)) for k in ("recording", "baseline", "suite")] == [2, 2, 1]


def test_the_estimate_starts_from_this_machine_s_sessions_of_the_same_setup(pytester, make_stub_python, tmp_path):
    """#37: a session whose setup was changed (here a wrapper interpreter that turns oneDNN's
    fusion off, and whose cells take longer) takes other minutes: the next unchanged session's
    estimate starts from the sessions of its own setup, not from the changed ones; a setup
    with no session yet starts from the others, and its first line says so."""
    import re
    pytester.makepyfile(test_cells=CELLS)
    where = str(tmp_path / "h.sqlite")
    plain = make_stub_python("plain", rate=100.0)
    slow = make_stub_python("slow", rate=100.0, warmup_seconds=0.4)
    fusion_off = tmp_path / "python-fusion-off"
    fusion_off.write_text(f'#!/bin/sh\nMXNET_SUBGRAPH_BACKEND=NONE exec {slow} "$@"\n')
    fusion_off.chmod(0o755)
    common = ["-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box", "--perf-ctx", "cpu",
              "--perf-no-probe", "--perf-store", where, "--perf-baselines-dir", str(tmp_path / "none")]

    def first_line(python):
        r = stand_ins.session(pytester, *common, "--perf-python", python)
        assert r.ret == 0, r.stdout.str()
        return next(x for x in r.stdout.str().splitlines() if x.startswith("mxperf: 2 measuring test(s)"))

    first_line(plain)
    line = first_line(str(fusion_off))
    assert ("at what they took in this machine's last 1 session(s) of the kind (none yet of this setup: MXNet, "
            "Python, recorded variables)") in line, line
    line = first_line(str(fusion_off))
    assert "at what they took in this machine's last 1 session(s) of the kind and setup" in line, line
    with open_store(where) as s:
        rows = s.durations("box", "suite", 10)
    assert len(rows) == 3
    assert [r["setup"]["environment"].get("MXNET_SUBGRAPH_BACKEND") for r in rows] == ["NONE", "NONE", None]
    plain_wall = rows[2]["wall_seconds"]
    line = first_line(plain)  # two of the last three sessions were fusion off: they are not its minutes
    assert "at what they took in this machine's last 1 session(s) of the kind and setup" in line, line
    said = float(re.search(r"expected about (\d+) s", line).group(1))
    assert abs(said - plain_wall) <= 0.5 + 1e-6, (line, rows)


def test_without_history_the_estimate_follows_this_machine_s_mxnet_speed(pytester, make_stub_python, tmp_path):
    """#37 part 1: on a machine without history the costs are the reference machine's times
    this machine's factor, from the MXNet probe's speed figure: half the reference's slowest
    reading, the estimate the factor's share longer; the line and results.json say so."""
    import re

    from pytest_mxperf.measure.planning import load_reference, speed_from
    pytester.makepyfile(test_cells=CELLS)
    ref = load_reference()
    said = {}
    slowest = min(ref["conv_gflops_seen"])  # half the slowest the reference itself read: half as fast
    for name, gflops in (("same", ref["conv_gflops"]), ("half", slowest / 2)):
        r = stand_ins.session(pytester, 
            "-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box", "--perf-ctx", "cpu", "--perf-no-probe",
            "--perf-store", str(tmp_path / f"{name}.sqlite"), "--perf-baselines-dir", str(tmp_path / name),
            "--perf-python", make_stub_python(name, rate=100.0, conv_gflops=gflops), "--perf-update-baselines",
            "--perf-report", str(tmp_path / f"rep-{name}"))
        assert r.ret == 0, r.stdout.str()
        kept = json.loads((tmp_path / f"rep-{name}" / "results.json").read_text())["session"]["estimate"]
        assert kept["conv_gflops"] == round(gflops, 2) and kept["reference_gflops"] == ref["conv_gflops"], kept
        line = next(x for x in r.stdout.str().splitlines() if x.startswith("mxperf: 2 measuring test(s)"))
        factor = speed_from({"mxnet_speed": {"conv_gflops": gflops}}, ref).factor
        assert (f"costs measured on {ref['cpu']}, x{factor:.2f} for this machine's MXNet speed "
                f"({gflops:.0f} GFLOP/s against {ref['conv_gflops']:.0f})") in line, line
        amount, unit = re.search(r"expected about ([\d.]+) (s|min)\b", line).groups()
        said[name] = float(amount) * (60 if unit == "min" else 1)
    half = speed_from({"mxnet_speed": {"conv_gflops": slowest / 2}}, ref).factor
    assert half > 1.5
    assert abs(said["half"] / said["same"] - half) < 0.1, said  # the minutes are said to 0.1


def test_without_history_the_import_figure_places_the_machine(pytester, make_stub_python, tmp_path):
    """#37 part 1: when the probe reads MXNet's import, its CPU seconds against the
    reference's scale the estimate whatever the convolution reads (here the reference's own
    convolution figure, which alone would say x1.00): an import twice the reference's, the
    estimate the unclocked share longer; the first line and results.json name the figure."""
    import re

    from pytest_mxperf.measure.planning import load_reference, speed_from
    pytester.makepyfile(test_cells=CELLS)
    ref = load_reference()
    said = {}
    for name, imp in (("same", ref["import_cpu_s"]), ("double", 2 * ref["import_cpu_s"])):
        r = stand_ins.session(pytester,
            "-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box", "--perf-ctx", "cpu", "--perf-no-probe",
            "--perf-store", str(tmp_path / f"{name}.sqlite"), "--perf-baselines-dir", str(tmp_path / name),
            "--perf-python", make_stub_python(name, rate=100.0, conv_gflops=ref["conv_gflops"], import_cpu_s=imp),
            "--perf-update-baselines", "--perf-report", str(tmp_path / f"rep-{name}"))
        assert r.ret == 0, r.stdout.str()
        kept = json.loads((tmp_path / f"rep-{name}" / "results.json").read_text())["session"]["estimate"]
        assert kept["figure"] == "import" and kept["import_cpu_s"] == round(imp, 3), kept
        assert kept["reference_import_cpu_s"] == ref["import_cpu_s"], kept
        factor = speed_from({"mxnet_speed": {"conv_gflops": ref["conv_gflops"], "import_cpu_s": imp}}, ref).factor
        line = next(x for x in r.stdout.str().splitlines() if x.startswith("mxperf: 2 measuring test(s)"))
        assert (f"costs measured on {ref['cpu']}, x{factor:.2f} for this machine's speed (MXNet's import "
                f"{imp:.2f} CPU-s against {ref['import_cpu_s']:.2f})") in line, line
        amount, unit = re.search(r"expected about ([\d.]+) (s|min)\b", line).groups()
        said[name] = float(amount) * (60 if unit == "min" else 1)
    double = speed_from({"mxnet_speed": {"import_cpu_s": 2 * ref["import_cpu_s"]}}, ref).factor
    assert double > 1.4
    assert abs(said["double"] / said["same"] - double) < 0.1, said  # the minutes are said to 0.1
