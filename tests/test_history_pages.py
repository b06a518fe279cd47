"""Trend pages to act on (issue 38, part 4): every step shows the command that measures it
again (the test that measured the cell, ``--perf-reference`` the install before the step, the
variables that changed at it), and the index opens with the regressions standing; a store of
schema 1 (no node ids) is migrated and its steps get the cell's model and batch size instead.
The pages' elements are read with the standard library's HTML parser."""

import sqlite3
from html.parser import HTMLParser

from test_history_store import doc

from pytest_mxperf.history import pages
from pytest_mxperf.history.schema import SCHEMA_VERSION
from pytest_mxperf.history.store import open_store

NODE = "perf_tests/test_scoring.py::test_scoring[lenet-8]"


class _Elements(HTMLParser):
    """Every element's tag and attributes, and the text inside each (id or class) element."""

    def __init__(self, text):
        super().__init__()
        self.found, self.stack, self.text = [], [], {}
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.found.append((tag, a))
        self.stack.append(a.get("id") or a.get("class") or tag)
        self.text.setdefault(self.stack[-1], "")

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        for name in self.stack:
            self.text[name] = self.text.get(name, "") + data


def _store(path, nodeid=NODE, env_after=None):
    with open_store(str(path)) as s:
        for i in range(10):
            d = doc(f"s{i}", 1000.0 + 3600 * i, (100.0 if i < 5 else 80.0) * (1 + 0.01 * (i % 3)),
                    version="1.8.0" if i < 5 else "1.9.1")
            for rec in d["records"]:
                rec["nodeid"] = nodeid
            s.append(d)
    return path


def test_every_step_has_its_command_and_the_index_opens_with_the_regressions(tmp_path):
    with open_store(str(_store(tmp_path / "h.sqlite"))) as s:
        files = pages.publish(s, tmp_path / "out")
    index = _Elements((tmp_path / "out" / "index.html").read_text())
    command = f"pytest '{NODE}' --perf-reference mxnet==1.8.0"
    assert command in index.text["regressions"]
    rows = [a for t, a in index.found if t == "tr"]
    assert ("table", {"id": "regressions"}) in index.found
    assert "score/lenet/b8/cpu:0/float32/threads=auto" in index.text["regressions"]
    assert "MXNet 1.8.0 -> 1.9.1" in index.text["regressions"]
    assert len(rows) >= 3   # a header and a row for the regressions, a header and a row for the cells
    cell = _Elements(files[1].read_text())
    assert command in cell.text["steps"] and ("code", {"class": "cmd"}) in cell.found


def test_a_recovered_cell_is_no_longer_standing(tmp_path):
    path = _store(tmp_path / "h.sqlite")
    with open_store(str(path)) as s:
        for i in range(10, 15):
            s.append(doc(f"s{i}", 1000.0 + 3600 * i, 100.0 * (1 + 0.01 * (i % 3)), version="1.9.2"))
        pages.publish(s, tmp_path / "out")
    index = _Elements((tmp_path / "out" / "index.html").read_text())
    assert ("p", {"id": "regressions", "class": "muted"}) in index.found
    assert index.text["regressions"].startswith("none")


def test_the_command_names_the_variables_that_changed():
    step = {"mxnet_before": "1.9.1", "environment_before": {"OMP_NUM_THREADS": "2", "KMP_AFFINITY": "x"},
            "environment_after": {"OMP_NUM_THREADS": "1"}, "nodeid": None}
    assert pages.reproduce(step, "train/alexnet/b8/cpu:0/float32/threads=auto/opt=sgd") == (
        "env OMP_NUM_THREADS=1 -u KMP_AFFINITY pytest perf_tests -m cpu --perf-models alexnet --perf-batch-sizes 8 "
        "--perf-reference mxnet==1.9.1")


def test_a_store_of_schema_1_is_migrated_and_its_steps_name_the_model_and_batch(tmp_path):
    path = _store(tmp_path / "h.sqlite")
    con = sqlite3.connect(path)   # as schema 1 left it: no node id column, no durations
    con.execute("ALTER TABLE cell_results DROP COLUMN nodeid")
    con.execute("ALTER TABLE sessions DROP COLUMN wall_seconds")
    con.execute("DROP TABLE test_durations")
    con.execute("DROP TABLE pair_spreads")
    con.execute("UPDATE schema_version SET version = 1")
    con.commit()
    con.close()
    with open_store(str(path)) as s:
        assert {h["nodeid"] for h in s.history(s.cells()[0]["key"])} == {None}
        pages.publish(s, tmp_path / "out")
    con = sqlite3.connect(path)
    assert con.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION == 4
    index = _Elements((tmp_path / "out" / "index.html").read_text())
    assert ("pytest perf_tests -m cpu --perf-models lenet --perf-batch-sizes 8 --perf-reference mxnet==1.8.0"
            in index.text["regressions"])
