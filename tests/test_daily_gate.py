"""The daily-gate harness's reading of a session's output (``benchmarks/daily_gate.py``): the
estimates it compares with pytest's wall time come from the lines the plugin prints."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import daily_gate as D  # noqa: E402

OUTPUT = """\
mxperf: 25 measuring test(s), 2 process(es) a cell: 25 test(s) at what they took in this machine's last 3 session(s) of the kind; expected about 4.7 min, confirming suspects included
mxperf: 1 of 25 cell(s) measured, 0.3 min gone, about 4.5 min left
mxperf: re-measured 1 of 11 suspect cell(s) (score/alexnet/b8), 9.5 min gone, about 12.0 min left
mxperf: 25 cell(s) measured, 21.0 min gone
======= 23 passed, 6 skipped, 210 deselected in 1360.91s (0:22:40) =======
"""


def test_the_first_line_the_progress_lines_and_pytests_wall_time_are_read():
    got = D.estimates(OUTPUT)
    # a settling line's time gone and left are the session's, as on the lines before it
    assert got == {"pytest_seconds": 1360.91, "estimate_seconds": 4.7 * 60,
                   "progress_seconds": [4.8 * 60, 21.5 * 60]}


def test_an_estimate_in_seconds_and_an_output_without_lines_read_as_none():
    assert D.estimates("mxperf: 3 measuring test(s): expected about 45 s\n")["estimate_seconds"] == 45.0
    assert D.estimates("interrupted\n") == {"pytest_seconds": None, "estimate_seconds": None, "progress_seconds": []}
    assert D._off(330.0, 300.0) == "+10%" and D._off(None, 300.0) == "-"
