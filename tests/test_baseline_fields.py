"""Files are checked before they are trusted (issue 36, part 3): a baseline whose field was
changed to anything is either refused in one line as it loads (``BaselineError``), or every
use a session makes of it works. Hypothesis mutates each field of a real baseline; the
issue's cases are pinned one by one.
"""

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_mxperf.judge import machine_states
from pytest_mxperf.outcome import judging
from pytest_mxperf.store.baselines import Baseline, BaselineError

ROOT = Path(__file__).resolve().parents[1]
REAL = sorted((ROOT / "tests" / "data").glob("baseline-*.json"))


@pytest.fixture(scope="module")
def real_doc():
    assert REAL, "tests/data/ holds no baseline"
    return json.loads(REAL[0].read_text())


def _fields(doc):
    """Every path to a field of the document: top level, each cell's workload fields, each
    field of its newest recording, and each field of one of its process probes."""
    out = [(k,) for k in doc]
    for key, entry in doc["cells"].items():
        out += [("cells", key, "workload", f) for f in entry.get("workload", {})]
        hist = entry.get("history") or []
        if hist:
            i = len(hist) - 1
            out += [("cells", key, "history", i, f) for f in hist[i]]
            probes = hist[i].get("process_probes") or []
            if probes and isinstance(probes[0], dict):
                out += [("cells", key, "history", i, "process_probes", 0, part) for part in probes[0]]
    return out


def _set(doc, path, value):
    d = doc
    for p in path[:-1]:
        d = d[p]
    d[path[-1]] = value


def _every_use(b: Baseline):
    """What a session does with a loaded baseline: each accessor the judging and the writers call."""
    probes = [p for ms in b.process_probes() for p in (ms.get("probe_before"), ms.get("probe_after")) if p]
    reference = machine_states.reference_from(probes) if probes else None
    judging.label_machine_states({}, b)
    for key in b.keys():
        b.values(key)
        b.states(key, reference)
        b.session_medians(key)
        b.resolution(key)
        b.recorded_env(key)
        b.recorded_suite(key)
        b.answers(key)
        b.profile(key)
        b.workload(key)
    b.resolution_summary()
    try:
        b.recorded_requirement()
        b.recorded_install()
    except BaselineError:
        pass  # said in one line where a session asks (several installs)
    b.dumps()


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-10 ** 6, 10 ** 6)
                       | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                       max_leaves=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_field_changed_to_anything_is_refused_in_one_line_or_works(real_doc, data):
    doc = copy.deepcopy(real_doc)
    path = data.draw(st.sampled_from(_fields(doc)))
    _set(doc, path, data.draw(JSONISH))
    try:
        b = Baseline.from_doc(doc, "bl.json")
    except BaselineError as exc:
        assert "\n" not in str(exc) and "bl.json" in str(exc)
        return
    _every_use(b)


def _one(real_doc):
    doc = copy.deepcopy(real_doc)
    key = next(k for k, e in doc["cells"].items() if e.get("history"))
    return doc, doc["cells"][key]["history"][-1]


@pytest.mark.parametrize("probes, why", [
    (["x", {"probe_before": "str"}], "process probe"),
    ([{"probe_before": {"gemm_gflops": float("inf")}}], "gemm_gflops"),
    ([{"probe_after": {"stream_gbps": -1.0}}], "stream_gbps"),
    ([{"load": {"other_cpus": "busy"}}], "other_cpus"),
    ("not a list", "process_probes"),
])
def test_the_issues_probe_records_are_refused_as_the_file_loads(real_doc, probes, why):
    doc, rec = _one(real_doc)
    rec["process_probes"] = probes
    with pytest.raises(BaselineError, match=why) as ei:
        Baseline.from_doc(doc, "bl.json")
    assert "\n" not in str(ei.value)


def test_the_real_baseline_loads_and_every_use_works(real_doc):
    _every_use(Baseline.from_doc(copy.deepcopy(real_doc), "bl.json"))
