"""Batch-1 latency: what a serving team gates on.

Each batch is timed on its own, ``mx.nd.waitall()`` after every one (a server answers one
request at a time), after an untimed warm-up; the cell's figures are the per-process p50
and p99 of those times in milliseconds (lower is better), judged against the baseline
like throughput, with peak memory beside them.
"""

import pytest

LATENCY_MODELS = ("lenet", "resnet50_v2")


@pytest.mark.latency
@pytest.mark.mxperf_grid(models=LATENCY_MODELS, batch_sizes=(1,))
def test_batch_latency(mxperf, ctx, model, batch_size):
    cell = mxperf.expect_ok(mxperf.measure(model, batch_size, mode="latency", contexts=ctx))
    p50, p99 = cell.figure("latency_p50_ms"), cell.figure("latency_p99_ms")
    if not mxperf.options.smoke:
        assert 0 < p50 <= p99, f"p50 {p50} ms, p99 {p99} ms"
