"""The serving cell's parts that need no MXNet: its settings checked in one line, LoadGen's
detail log read into figures, early stopping's ask, the peak search (workers/serving.py), and
its kinds in the registry."""

import json

import pytest

from pytest_mxperf.model import kinds
from pytest_mxperf.workers import serving


def _detail(tmp_path, **values):
    lines = [":::MLLOG " + json.dumps({"key": k, "value": v, "time_ms": 1.0}) for k, v in values.items()]
    path = tmp_path / "mlperf_log_detail.txt"
    path.write_text("\n".join(["not a log line"] + lines) + "\n")
    return str(path)


def _ns(ms):
    return int(ms * 1e6)


def test_a_runs_figures_are_read_from_loadgens_detail_log(tmp_path):
    path = _detail(tmp_path, **{"result_50.00_percentile_latency_ns": _ns(2.5), "result_90.00_percentile_latency_ns":
                                _ns(4.0), "result_95.00_percentile_latency_ns": _ns(4.5),
                                "result_99.00_percentile_latency_ns": _ns(6.25),
                                "result_completed_samples_per_sec": 99.5, "result_query_count": 512,
                                "early_stopping_met": True, "result_overlatency_query_count": 1,
                                "early_stopping_result": " * Run successful."})
    figures = serving.run_figures(serving.read_detail(path), 0.95)
    assert figures["serving_p50_ms"] == pytest.approx(2.5) and figures["serving_p90_ms"] == pytest.approx(4.0)
    assert figures["serving_p99_ms"] == pytest.approx(6.25)
    assert figures["serving_latency_ms"] == pytest.approx(4.5)  # the percentile the cell names
    assert figures["serving_qps"] == 99.5 and figures["queries"] == 512 and figures["early_stopping_met"]
    assert figures["scheduled_qps"] == 0.0  # not in this log: read as none
    assert figures["early_stopping"] == "* Run successful."
    with pytest.raises(serving.ServingError, match="no 90.00 percentile"):
        serving.run_figures(serving.read_detail(_detail(tmp_path, **{"result_50.00_percentile_latency_ns": 1})), 0.5)


def test_early_stoppings_ask_is_read_from_its_line():
    text = ("* Run unsuccessful. * Processed 309 queries. * Would need to run at least 150 more queries, with the "
            "run being successful if every additional query were under latency.")
    assert serving._more_queries(text) == 150
    assert serving._more_queries("* Run successful.") == 0


@pytest.mark.parametrize("settings, said", [
    ({"percentile": 0.98, "latency_bound_ms": 10, "target_qps": 5}, "percentile 0.98: LoadGen reports"),
    ({"latency_bound_ms": 0, "target_qps": 5}, "latency_bound_ms must be positive"),
    ({"latency_bound_ms": 10}, "target_qps must be positive"),
    ({"latency_bound_ms": 10, "target_qps": 5, "max_batch": 0}, "max_batch must be at least 1"),
])
def test_bad_settings_are_one_line_before_mxnet_is_imported(settings, said):
    with pytest.raises(serving.ServingError, match=said) as err:
        serving._check({"serving": settings})
    assert "\n" not in str(err.value)


def test_a_peak_rate_needs_no_target_and_defaults_fill_the_rest():
    s = serving._check({"serving": {"latency_bound_ms": 20, "peak": True}})
    assert s["percentile"] == 0.99 and s["max_batch"] == 1 and s["min_queries"] == 460
    # a run's queries by default: what early stopping needs to establish the named percentile
    assert serving._check({"serving": {"latency_bound_ms": 20, "peak": True, "percentile": 0.9}})["min_queries"] == 45
    assert [serving.early_stopping_queries(p) for p in (0.5, 0.9, 0.99, 0.999)] == [8, 45, 460, 4604]


@pytest.mark.parametrize("true_peak", [3.7, 137.0, 2900.0])
def test_the_peak_search_closes_within_its_step_around_the_true_peak(true_peak):
    """A server that holds its bound up to ``true_peak`` queries/s: the search ends with the
    highest rate that held within 1.5% below the lowest that failed, the true peak between."""
    good, bad, tried = serving.search_peak(lambda r: r <= true_peak, start=50.0, floor=1.0, step=0.015, limit=30)
    assert good <= true_peak < bad and bad / good - 1.0 <= 0.015
    assert all(ok == (r <= true_peak) for r, ok in tried)
    assert len(tried) <= 16


def test_the_peak_search_stops_at_its_run_limit_and_at_its_floor():
    good, bad, tried = serving.search_peak(lambda r: r <= 137.0, start=50.0, floor=1.0, step=0.015, limit=4)
    assert len(tried) == 4 and good == 100.0 and bad == pytest.approx(141.42, abs=0.01)  # not closed: said in one line
    good, bad, tried = serving.search_peak(lambda r: False, start=50.0, floor=1.0, step=0.015, limit=30)
    assert good is None and bad == tried[-1][0] and tried[-1][0] / 2 < 1.0


def test_the_serving_kinds_are_declared_with_their_figures():
    k, p = kinds.kind("serving"), kinds.kind("serving_peak")
    assert k.worker == p.worker == "pytest_mxperf.workers.serving"
    # the peak's own marker: a peak test carries it and ``serving`` (``-m serving`` selects it), and is the
    # peak kind's (registered first: a test's kind is the first whose marker it carries)
    assert (k.marker, p.marker) == ("serving", "serving_peak")
    assert kinds.of_test({"cpu", "serving", "serving_peak", "slow"}, False) is p
    assert kinds.of_test({"cpu", "serving"}, False) is k
    assert set(k.judged) == {"serving_p50_ms", "serving_p90_ms", "serving_p99_ms"}
    assert k.primary == "serving_latency_ms" and p.primary == "peak_qps"
    assert kinds.figure("serving_p99_ms").tail and not kinds.figure("serving_p50_ms").tail
    assert kinds.figure("peak_qps").higher_is_better and not kinds.figure("serving_latency_ms").higher_is_better
    # the figures a worker returns are its kind's (an undeclared one would be the process's error)
    kinds.check_figures("serving", ["serving_latency_ms", "serving_p50_ms", "serving_p90_ms", "serving_p99_ms",
                                    "serving_qps", "target_qps"])
    kinds.check_figures("serving_peak", ["peak_qps"])
    # A/B: duets; a target-rate cell's rounds two whole runs a side, a peak's each side's search
    # steps to its end; run only when asked for (-m serving)
    assert k.resident and p.resident and k.whole_runs == 2 and p.to_the_end and not k.to_the_end
    assert k.on_request and p.on_request and "serving" in kinds.ON_REQUEST_MARKERS
    assert not kinds.figure("target_qps").judged  # the rate a cell served: shown, recorded, never judged


def _record(mode, runs, reference=None):
    out = {"workload": {"model": "lenet", "mode": mode, "batch_size": 4}, "runs": runs}
    if reference is not None:
        out["reference_runs"] = reference
    return out


def _target_run(rate, p50, p90, p99):
    return {"target_qps": rate, "serving_p50_ms": p50, "serving_p90_ms": p90, "serving_p99_ms": p99}


def test_the_serving_plot_has_both_installs_the_search_the_target_rate_and_the_bound(tmp_path):
    from pytest_mxperf.output import plots
    serving = {"percentile": 0.99, "latency_bound_ms": 20.0}
    peak = _record("serving_peak", [{"meta": {"serving": serving, "mxnet_version": "1.9.1", "peak_runs": [
        {"target_qps": 400.0, "serving_latency_ms": 12.0, "early_stopping_met": True},
        {"target_qps": 800.0, "serving_latency_ms": 43.0, "early_stopping_met": False}]}}])
    target = _record("serving", [{"meta": {"serving": serving, "serving_runs": [_target_run(300.0, 6.0, 9.0, 11.0),
                                                                                _target_run(300.0, 6.5, 9.5, 12.0)]}}],
                     reference=[{"meta": {"serving": serving, "mxnet_version": "1.8.0",
                                          "serving_runs": [_target_run(300.0, 7.0, 10.0, 14.0)]}}])
    search, points, bound, pct, version = plots._serving_points(peak["runs"])
    assert search == [(400.0, 12.0, True), (800.0, 43.0, False)] and bound == 20.0 and pct == 0.99 and not points
    assert version == "1.9.1"
    # every run of a side (a duet side's two), and the reference's apart
    assert plots._serving_points(target["runs"])[1] == [(300.0, 6.0, 9.0, 11.0), (300.0, 6.5, 9.5, 12.0)]
    # a target cell has no search: no percentile of one (a peak's percentile may be another: ResNet-50 v2's p90)
    assert plots._serving_points(target["reference_runs"])[1:] == ([(300.0, 7.0, 10.0, 14.0)], 20.0, None, "1.8.0")
    # a step the worker judged (``held``: within the bound and served) is drawn as it judged it: a
    # step within the bound that its server did not keep up with is not held
    unserved = {"target_qps": 32.0, "serving_latency_ms": 12.0, "early_stopping_met": True, "held": False}
    assert plots._serving_points([{"meta": {"serving": serving, "peak_runs": [unserved]}}])[0] == [(32.0, 12.0, False)]
    paths = plots.plot_serving([peak, target, _record("score", [{"figures": {"throughput": 1.0}}])], tmp_path)
    assert [p.name for p in paths] == ["serving-lenet.png"] and paths[0].stat().st_size > 10000
    assert plots.plot_serving([_record("score", [{}])], tmp_path / "none") == []


def test_the_peak_search_step_by_step_is_the_search_run_at_once():
    """A duet side runs its search one step a turn (``PeakSearch``): the same rates, the same
    answers, the same end as ``search_peak``, and nothing more to run once it closed."""
    whole = serving.search_peak(lambda r: r <= 137.0, start=50.0, floor=1.0, step=0.015, limit=30)
    steps = serving.PeakSearch(50.0, 1.0, 0.015, 30)
    while not steps.done:
        steps.record(steps.rate <= 137.0)
    assert (steps.good, steps.bad, steps.tried) == whole and steps.rate is None


def test_a_duet_sides_target_figures_are_the_medians_of_its_runs():
    runs = [dict(_target_run(100.0, p, p + 1, p + 3), serving_latency_ms=p + 3, serving_qps=99.0 + p, queries=460,
                 early_stopping="ok", overlatency=0, seconds=4.6, batches=300) for p in (5.0, 7.0, 6.0)]
    out = serving._target_result(runs, {})
    assert out["serving_p50_ms"] == 6.0 and out["serving_p99_ms"] == 9.0 and out["serving_qps"] == 105.0
    assert out["target_qps"] == 100.0 and len(out["meta"]["serving_runs"]) == 3
    assert out["meta"]["serving_run"]["queries"] == 460


def test_a_probe_needs_no_target_rate():
    assert serving._check({"serving": {"latency_bound_ms": 20, "probe": True}})["probe"]


def test_a_peak_step_holds_only_where_its_server_kept_up_with_the_schedule():
    """A run too short for its queue to fill can keep a percentile within the bound at a rate
    its server cannot serve (ResNet-50 v2 on a 2-vCPU Zen 3: p90 1.6 s within 2 s at 32
    queries/s over 45 queries, 16.4 completed a second): it does not hold. A run that completed
    what was scheduled (Poisson's realised rate, not the target) holds."""
    s = {"latency_bound_ms": 2000.0}
    short = {"early_stopping_met": True, "serving_latency_ms": 1623.6, "serving_qps": 16.41, "scheduled_qps": 31.0,
             "target_qps": 32.0}
    kept_up = dict(short, target_qps=8.0, scheduled_qps=7.0, serving_qps=6.88, serving_latency_ms=120.7)
    assert not serving.served(short) and not serving.within_bound(short, s)
    assert serving.served(kept_up) and serving.within_bound(kept_up, s)
    assert not serving.within_bound(dict(kept_up, serving_latency_ms=2100.0), s)
    assert not serving.within_bound(dict(kept_up, early_stopping_met=False), s)
