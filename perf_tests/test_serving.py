"""Serving under load: MLPerf LoadGen's Server scenario (workers/serving.py).

Queries arrive at Poisson times of a target rate from a seeded schedule; the server batches
them dynamically (up to ``MAX_BATCH``, waiting at most ``BATCH_TIMEOUT_MS`` after the first);
each query is timed from its scheduled arrival to its completion, so queueing, batching and a
slow wake after idle are in the figures, which back-to-back single batches (test_latency.py)
cannot see. The figures: the named percentile, p50/p90/p99, and the highest rate whose named
percentile stays within the bound (a bisection of whole runs, each step at most a third of the
minimum effect). LoadGen's early stopping decides whether a run had queries enough: one that
asks for more is run once more with them, and asked again fails the cell, never passes it.

Serving cells are slow on 2 vCPUs (a ResNet-50 v2 run is a minute or more): they run with
--perf-slow, ``-m serving``, or when named.
"""

import pytest

from pytest_mxperf.model.workload import Workload

MAX_BATCH = 4
BATCH_TIMEOUT_MS = 2.0
PERCENTILE = 0.99
#: the latency bound of each model's named percentile, and the share of the peak rate its
#: target-rate cell serves: a low rate, where the server idles between queries (a slow wake
#: after idle shows there and not at the peak, where it never idles) and queueing is light
BOUNDS_MS = {"lenet": 20.0, "resnet50_v2": 2000.0}
#: where each model's peak search starts (queries/s): near its peak on a 2-vCPU machine, fewer runs
PEAK_START = {"lenet": 400.0, "resnet50_v2": 8.0}
TARGET_SHARE = 0.1


def _settings(model, **more):
    return {"serving": dict({"percentile": PERCENTILE, "latency_bound_ms": BOUNDS_MS[model], "max_batch": MAX_BATCH,
                             "batch_timeout_ms": BATCH_TIMEOUT_MS, "peak_step": 0.015}, **more)}


@pytest.mark.cpu
@pytest.mark.serving
@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(BOUNDS_MS))
def test_serving_peak_and_target_rate(mxperf, model):
    """The peak rate within the bound; then the percentiles at ``TARGET_SHARE`` of it: of the
    reference install's peak in A/B mode, so that both installs serve the same rate and the
    same seeded schedule (until a baseline records the rate, a session against one sets it
    from its own peak)."""
    peak = mxperf.expect_ok(mxperf.measure_kind(Workload(model=model, mode="serving_peak", batch_size=MAX_BATCH),
                                                _settings(model, peak=True, peak_start=PEAK_START[model]), processes=1))
    rate = TARGET_SHARE * (peak.reference_figure("peak_qps") or peak.figure("peak_qps"))
    cell = mxperf.expect_ok(mxperf.measure_kind(Workload(model=model, mode="serving", batch_size=MAX_BATCH),
                                                _settings(model, target_qps=rate)))
    if not mxperf.options.smoke:
        assert cell.figure("serving_p50_ms") <= cell.figure("serving_p99_ms")
