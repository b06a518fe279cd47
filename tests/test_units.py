"""Plain logic: workload specs, samples, topology, floors, options."""


import pytest
from hypothesis import example, given, settings, strategies as st

from pytest_mxperf.model import options as opts
from pytest_mxperf.machine import topology
from pytest_mxperf.judge.floors import judge_floor
from pytest_mxperf.model.measurement import CellMeasurement, CellNotMeasured, RunResult
from pytest_mxperf.model.stats import quantile
from pytest_mxperf.judge.floors import Floor
from pytest_mxperf.model.workload import Workload, WorkloadError, parse_contexts


def test_workload_is_hashable_and_round_trips():
    w = Workload("resnet50_v2", batch_size=8, contexts=("cpu:0", "cpu:1"), mode="train", kvstore="device")
    assert hash(w) == hash(Workload.from_dict(w.to_dict()))
    assert Workload.from_dict(w.to_dict()) == w
    assert w.total_batch == 16
    assert w.key() == "train/resnet50_v2/b8/cpu:0,cpu:1/float32/threads=auto/opt=sgd/kv=device"


@pytest.mark.parametrize("bad", [dict(batch_size=0), dict(batch_size=-3), dict(mode="fly"),
                                 dict(contexts=("cpu:0", "gpu:0")), dict(threads="lots"), dict(dtype="int3")])
def test_impossible_workloads_are_refused(bad):
    with pytest.raises(WorkloadError):
        Workload("lenet", **bad)


def test_parse_contexts():
    assert parse_contexts("cpu") == ("cpu:0",)
    assert parse_contexts("gpu:0,1") == ("gpu:0", "gpu:1")
    assert parse_contexts("cpu:0,cpu:1") == ("cpu:0", "cpu:1")
    for bad in ("", "tpu:0", "cpu:x", "cpu:0,gpu:1", "cpu:0,0"):
        with pytest.raises(WorkloadError):
            parse_contexts(bad)


def _run(seconds, k=1, batch=8, status="ok"):
    return RunResult(Workload("lenet", batch_size=batch), status, batches_per_round=k, round_seconds=seconds)


def test_throughput_comes_from_the_median_time_per_batch():
    r = _run([0.2, 0.4, 1.0], k=2, batch=8)  # per batch 0.1, 0.2, 0.5 s
    assert r.median == pytest.approx(8 / 0.2)
    assert r.samples == pytest.approx([80, 40, 16])


def test_cell_statistics_use_processes_as_replicates():
    cell = CellMeasurement(Workload("lenet", batch_size=8), [_run([0.1] * 5), _run([0.2] * 5), _run([0.4] * 5)])
    assert cell.process_medians == pytest.approx([80, 40, 20])
    assert cell.median == pytest.approx(40)
    assert cell.spread["basis"] == "processes" and cell.spread["n"] == 3
    one = CellMeasurement(Workload("lenet", batch_size=8), [_run([0.1, 0.2, 0.4])])
    assert one.spread["basis"] == "rounds"
    failed = CellMeasurement(Workload("lenet"), [RunResult(Workload("lenet"), "timeout", message="t")])
    assert failed.status == "timeout" and failed.median_or_none is None and failed.spread is None
    assert CellMeasurement.from_dict(cell.to_dict()).process_medians == pytest.approx(cell.process_medians)


def test_the_median_of_a_cell_that_did_not_measure_raises_with_its_reason():
    w = Workload("lenet", batch_size=8)
    why = "ValueError: Unknown initialization pattern for softmax_label"
    failed = CellMeasurement(w, [RunResult(w, "error", message=why), RunResult(w, "error", message=why)])
    with pytest.raises(CellNotMeasured) as e:
        assert failed.median > 0  # what a user's test writes
    assert e.value.status == "error" and e.value.reason == why and e.value.key == w.key()
    assert str(e.value) == f"{w.key()} did not measure: error: {why}"
    from pytest_mxperf import CellNotMeasured as exported
    assert exported is CellNotMeasured
    # internal readers see None, and the record of the cell says the same as before
    assert failed.median_or_none is None and failed.to_dict()["median"] is None
    assert judge_floor(failed, Floor("documented", "t", 2.0, 1.0, 0.1, False, "r")) == ("failed", f"error: {why}")
    # one process failed, one measured: the cell measured
    half = CellMeasurement(w, [RunResult(w, "crash", message="killed"), _run([0.1] * 5)])
    assert half.median == pytest.approx(80) == half.median_or_none


def test_quantile_matches_linear_interpolation():
    assert quantile([1, 2, 3, 4], 0.25) == pytest.approx(1.75)
    assert quantile([5], 0.75) == 5


def test_physical_cores_from_a_fake_topology(tmp_path):
    # 4 logical CPUs, 2 cores with 2 hyperthreads each
    for cpu, core in [(0, 0), (1, 1), (2, 0), (3, 1)]:
        d = tmp_path / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "core_id").write_text(str(core))
        (d / "physical_package_id").write_text("0")
    assert topology.physical_cores([0, 1, 2, 3], sysfs=tmp_path) == 2
    assert topology.physical_cores([0, 2], sysfs=tmp_path) == 1
    assert topology.physical_cores([7], sysfs=tmp_path) == 1  # no topology: count logical CPUs


def test_cgroup_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert topology.cgroup_cpu_quota(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert topology.cgroup_cpu_quota(tmp_path) is None


def test_user_environment_wins_over_suite_defaults():
    env, defaults = topology.worker_env({"OMP_NUM_THREADS": "7", "PYTHONWARNINGS": "error"}, "auto", 1, cores=2)
    assert env["OMP_NUM_THREADS"] == "7" and defaults == {}
    assert "PYTHONWARNINGS" not in env
    env, defaults = topology.worker_env({}, "per-context", 2, cores=2)
    assert defaults == {"OMP_NUM_THREADS": "1"}
    env, defaults = topology.worker_env({}, "auto", 2, cores=2)
    assert defaults == {"OMP_NUM_THREADS": "2"}


def _floor(kind="legacy-sanity", value=10.0, oom=False):
    return Floor(kind, "score/c4.large", 11.0, value, 0.1, oom, "reason")


def _cell(status="ok", seconds=(0.5,)):
    return CellMeasurement(Workload("alexnet", batch_size=8),
                           [RunResult(Workload("alexnet", batch_size=8), status, message="m",
                                      batches_per_round=1, round_seconds=list(seconds) if status == "ok" else [])])


def test_judge_floor():
    assert judge_floor(_cell(seconds=(0.5,)), _floor(value=10.0))[0] == "passed"  # 16 img/s
    assert judge_floor(_cell(seconds=(1.0,)), _floor(value=10.0))[0] == "failed"  # 8 img/s
    assert judge_floor(_cell(), _floor(kind=None, value=None))[0] == "skipped"
    assert judge_floor(_cell("oom"), _floor(value=None, oom=True))[0] == "passed"
    assert judge_floor(_cell("oom"), _floor())[0] == "failed"
    assert judge_floor(_cell("timeout"), _floor())[0] == "failed"
    assert judge_floor(_cell("unavailable"), _floor())[0] == "skipped"


def test_option_parsers():
    assert opts.parse_models("lenet,alexnet") == ("lenet", "alexnet")
    assert opts.parse_batch_sizes("1, 8,8") == (1, 8)
    assert opts.parse_memory("12G") == 12 * 1024 ** 3
    assert opts.parse_memory("none") is None
    # not-reached (--perf-deadline left tests unstarted), no-gpu (GPU tests asked for, no GPU
    # usable: machine/gpu_readiness.py), answers (a cell computed something else) and
    # system-differs (both setups of a duet agree and the machine's probes did not move: issue
    # 75) fail by default too
    assert opts.parse_fail_on("") == opts.DEFAULT_FAIL_ON == {"regression", "unresolved", "floor", "not-reached",
                                                              "no-gpu", "answers", "system-differs"}
    assert opts.parse_fail_on("none-measured") == {"regression", "unresolved", "floor", "not-reached", "no-gpu",
                                                   "answers", "system-differs", "none-measured"}
    assert opts.parse_fail_on("+no-baseline,-floor,-not-reached,-no-gpu,-answers,-system-differs") == {
        "regression", "unresolved", "no-baseline"}
    assert opts.parse_fail_on("none,regression") == {"regression"}
    assert opts.parse_fail_on("none") == frozenset()
    for fn, bad in [(opts.parse_models, "lenet,resnet9000"), (opts.parse_batch_sizes, "0"),
                    (opts.parse_batch_sizes, "-4"), (opts.parse_batch_sizes, "x"),
                    (opts.parse_memory, "lots"), (opts.parse_fail_on, "everything")]:
        with pytest.raises(opts.OptionError) as e:
            fn(bad)
        assert "\n" not in str(e.value) and str(e.value).startswith("--perf-")


PARSERS = [opts.parse_models, opts.parse_batch_sizes, opts.parse_memory, opts.parse_fail_on,
           lambda t: opts.parse_ctx_groups([t]), lambda t: opts.parse_positive_int("--perf-processes", t),
           lambda t: opts.parse_positive_float("--perf-time-budget", t),
           lambda t: opts.parse_fraction("--perf-min-effect", t)]


@settings(deadline=None, max_examples=300)
@given(st.sampled_from(range(len(PARSERS))), st.text(max_size=40))
@example(5, "0\x1f")  # a separator that \s matches and int() refuses: found by this test
def test_option_parsers_accept_or_refuse_cleanly(which, text):
    try:
        PARSERS[which](text)
    except opts.OptionError as exc:
        assert "\n" not in str(exc)


def test_parse_cpuinfo_reads_the_first_block():
    from pytest_mxperf.machine.hardware import parse_cpuinfo
    text = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n"
            "model name\t: Intel(R) Xeon(R) Processor\nstepping\t: 1\ncache size\t: 491520 KB\n"
            "flags\t\t: fpu avx2 avx512f\n\nprocessor\t: 1\nmodel name\t: Other\n")
    info = parse_cpuinfo(text)
    assert info == {"vendor": "GenuineIntel", "family": "6", "model": "167",
                    "model_name": "Intel(R) Xeon(R) Processor", "stepping": "1", "cache_size": "491520 KB",
                    "flags": ["fpu", "avx2", "avx512f"]}


def test_a_floor_is_held_to_the_processes_that_ran_on_a_quiet_machine():
    w = Workload("alexnet", batch_size=1)
    runs = [RunResult(w, "ok", batches_per_round=1, round_seconds=[1 / m] * 3) for m in (5.0, 100.0, 6.0)]
    cell = CellMeasurement(w, runs)
    floor = Floor("legacy-sanity", "c4.large", 20.0, 18.0, 0.1, False, "C4.large")
    assert judge_floor(cell, floor)[0] == "failed"  # median 6.0 of all three
    outcome, msg = judge_floor(cell, floor, ["slowed", "quiet", "slowed"])
    assert outcome == "passed" and "100.00" in msg
    outcome, msg = judge_floor(cell, floor, ["slowed"] * 3)
    # every process slowed: the floor cannot tell MXNet from the machine; not judged, said so
    assert outcome == "skipped" and "slowed machine" in msg


def test_an_ab_cell_below_its_floor_fails_only_when_its_reference_is_not_below_it_too():
    """A/B: the reference takes turns with the candidate on the same machine; both under the
    floor is a slow machine (not judged against the floor, said), the candidate alone under
    it fails."""
    w = Workload("alexnet", batch_size=8)

    def ab(cand_s, ref_s):
        cell = _cell(seconds=(cand_s,))
        cell = cell.with_runs(cell.runs, [RunResult(w, "ok", batches_per_round=1, round_seconds=[ref_s])])
        return judge_floor(cell, _floor(value=10.0))
    outcome, msg = ab(1.0, 1.0)    # 8 img/s on both sides
    assert outcome == "skipped" and "both below the legacy-sanity floor" in msg and "machine ran slow" in msg
    assert ab(1.0, 0.5)[0] == "failed"    # the reference at 16 img/s: the candidate's own
    assert ab(0.5, 1.0)[0] == "passed"


def test_an_ab_cell_just_under_its_floor_and_within_the_minimum_effect_of_its_reference_is_not_failed():
    """An unchanged candidate whose noise puts it just under the floor while its reference is
    just over it is the A/B verdict's to judge, not the floor's; 6% under its reference (more
    than the 5% minimum effect) it fails."""
    w = Workload("alexnet", batch_size=8)

    def ab(cand_ips, ref_ips):
        cell = _cell(seconds=(8.0 / cand_ips,))
        cell = cell.with_runs(cell.runs, [RunResult(w, "ok", batches_per_round=1, round_seconds=[8.0 / ref_ips])])
        return judge_floor(cell, _floor(value=10.0))
    outcome, msg = ab(9.9, 10.1)
    assert outcome == "skipped" and "within 5% of the reference" in msg
    assert ab(9.4, 10.0)[0] == "failed"
    assert ab(9.6, 10.0)[0] == "skipped"


def test_mannwhitney_p_is_scipys_whether_it_is_asked_again_by_u_or_not():
    """The product keeps the p of samples without ties by (n1, n2, U, alternative): the same
    float scipy gives for every sample, with ties (scipy's tie correction) and without, exact
    (small samples) and normal (larger ones), asked for the first time or again."""
    import random

    from scipy.stats import mannwhitneyu

    from pytest_mxperf.model import stats

    rng = random.Random(20261128)
    kept = 0
    for _ in range(600):
        n1, n2 = rng.randint(1, 25), rng.randint(1, 25)
        ties = rng.random() < 0.3
        shift = rng.choice([1.0, 0.95, 0.9, 1.1])
        draw = (lambda: round(rng.gauss(1.0, 0.1), 1)) if ties else (lambda: rng.lognormvariate(0.0, 0.1))
        cur, base = [draw() * shift for _ in range(n1)], [draw() for _ in range(n2)]
        for alt in ("less", "greater", "two-sided"):
            want = float(mannwhitneyu(cur, base, alternative=alt).pvalue)
            assert stats.mannwhitney_p(cur, base, alt) == want, (cur, base, alt)
            assert stats.mannwhitney_p(list(reversed(cur)), base, alt) == want  # asked again, other order
        kept += stats._u_without_ties(tuple(cur), tuple(base)) is not None
    assert 300 < kept < 600  # both paths taken


def test_finite_positive_keeps_finite_positive_numbers_of_any_type_as_floats_and_drops_the_rest():
    """Plain floats take a shorter path (most values are); the answer is float()'s and
    isfinite's for every kind of value, a float subclass and NumPy's scalars included."""
    import math

    import numpy as np

    from pytest_mxperf.model.stats import finite_positive

    class Fl(float):
        pass
    values = [1.0, -1.0, 0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1e308, True, False, 3, 0, "2.5", "x",
              None, [1], np.float64(2.0), np.float32("nan"), np.int64(4), Fl(7.0), Fl(math.nan)]
    got = finite_positive(values)
    assert got == [1.0, 5e-324, 1e308, 3.0, 2.5, 2.0, 4.0, 7.0]
    assert all(type(v) is float for v in got)
    assert finite_positive(None) == [] and finite_positive(()) == []
