"""History import and publish skip a bad file or row with one line each (issue 36, part 3):
one results file whose verdicts are a list no longer stops an ``import DIR/`` batch, and one
stored session with ``started=1e12`` no longer stops ``publish`` on every run."""

import json

from test_history_store import doc

from pytest_mxperf.history.__main__ import main
from pytest_mxperf.history.store import open_store


def test_an_import_batch_skips_a_bad_file_in_one_line_and_imports_the_rest(tmp_path, capsys):
    good, bad = doc("good", 1.0e9, 100.0), doc("bad", 1.1e9, 100.0)
    bad["session"]["verdicts"] = ["not", "an", "object"]
    for name, d in (("a", good), ("b", bad)):
        (tmp_path / "in" / name).mkdir(parents=True)
        (tmp_path / "in" / name / "results.json").write_text(json.dumps(d))
    store = str(tmp_path / "h.sqlite")
    assert main(["--store", store, "import", str(tmp_path / "in")]) == 0
    out = capsys.readouterr()
    assert "imported 1 session(s)" in out.out and "1 unusable" in out.out
    lines = [ln for ln in out.err.splitlines() if "skipped" in ln]
    assert len(lines) == 1 and "b/results.json" in lines[0] and "Traceback" not in out.err
    with open_store(store) as s:
        assert s.session_ids() == ["good"]


def test_publish_leaves_out_a_session_that_is_not_a_date_in_one_line(tmp_path, capsys):
    store = str(tmp_path / "h.sqlite")
    with open_store(store) as s:
        assert s.append(doc("a", 1.0e9, 100.0)) and s.append(doc("b", 1.0e9 + 86400, 90.0))
        assert s.append(doc("far", 1e12, 100.0))
    assert main(["--store", store, "publish", str(tmp_path / "site")]) == 0
    out = capsys.readouterr()
    lines = [ln for ln in out.err.splitlines() if "far" in ln]
    assert len(lines) == 1 and "not a date" in lines[0], out.err
    assert "Traceback" not in out.err
    page = next((tmp_path / "site" / "cells").glob("*.html")).read_text()
    assert "2 session(s)" in page
    assert (tmp_path / "site" / "index.html").exists()
    # and again: it does not die on every run
    assert main(["--store", store, "publish", str(tmp_path / "site")]) == 0
