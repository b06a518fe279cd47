"""Distributed kvstore throughput: 1 scheduler + 1 server + 2 workers on 127.0.0.1.

``pytest_mxperf.dist`` launches the ps-lite roles as separate processes (no dmlc_tracker)
and supervises them; the functional checks (dist_sync weights == local weights, a killed
worker stops the cluster, nothing left behind) are in ``tests/test_dist.py``. Here the
same cluster is run for its throughput, which is reported next to a single-process
``local`` run of the same total data per step. On one machine every role shares the same
cores (one OpenMP thread per process), so this measures the kvstore's protocol overhead,
not network bandwidth; see docs/distributed.md for pointing it at real hosts.
"""

import pytest

MODEL = "mlp"
GLOBAL_BATCH = 256
STEPS = 200


def _spec(kvstore, smoke):
    return {"kvstore": kvstore, "num_workers": 2, "num_servers": 1, "timeout": 240,
            "worker": {"model": MODEL, "global_batch": GLOBAL_BATCH, "steps": 20 if smoke else STEPS,
                       "warmup_steps": 5, "seed": 0, "learning_rate": 0.1, "momentum": 0.9,
                       "report_every": 10}}


def _run(mxperf, kvstore):
    out = mxperf.run_module("pytest_mxperf.dist", _spec(kvstore, mxperf.options.smoke), threads="1",
                            timeout=300)
    res = out.payload or {}
    assert out.status == "ok", f"{kvstore}: {out.status}: {out.message} {out.stderr_tail[-3:]}"
    assert res.get("leftover_pids") == [] and res.get("leftover_ports") == [], res.get("message")
    return res


@pytest.mark.cpu
@pytest.mark.distributed
@pytest.mark.parametrize("kvstore", ["dist_sync", "dist_async", "dist_device_sync"])
def test_distributed_kvstore_throughput(mxperf, kvstore):
    local = _run(mxperf, "local")
    res = _run(mxperf, kvstore)
    sps, ref = res["samples_per_second"], local["samples_per_second"]
    mxperf.report(f"dist_{kvstore}", {
        "model": MODEL, "global_batch": GLOBAL_BATCH, "workers": 2, "servers": 1,
        "samples_per_s": round(sps, 1), "local_samples_per_s": round(ref, 1),
        "ratio_to_local": round(sps / ref, 3), "cluster_wall_s": round(res["wall_seconds"], 2),
        "teardown_s": round(res["teardown_seconds"] or 0.0, 3),
    }, note=("all roles on one machine: measures the ps-lite protocol overhead over loopback, "
             "not a network"))
    assert sps > 0
