"""Distributed kvstore throughput: 1 scheduler + 1 server + 2 workers on 127.0.0.1.

``pytest_mxperf.measure.cluster`` launches the ps-lite roles as separate processes (no dmlc_tracker)
and supervises them; the functional checks (dist_sync weights == local weights, a killed
worker stops the cluster, nothing left behind) are in ``tests/test_dist.py``. Here the
same cluster is measured for its throughput, next to a single-process ``local`` run of
the same total data per step. On one machine every role shares the same cores (one
OpenMP thread per process), so this measures the kvstore's protocol overhead, not network
bandwidth; see docs/distributed.md for pointing it at real hosts.

Each kvstore is a cell (mode ``dist``) whose figure is samples/s, baselined and judged like
any other. One "process" of replication is one whole cluster launch (scheduler, server,
two workers: about 3 s here), so recording a baseline of 5 costs about 15 s per kvstore.
Paired with another install (A/B mode, or a baseline's paired path) a pair is a duet of two
clusters: each launcher relays the parent's rounds to its workers (``measure/cluster.py``).
The ratio to ``local`` is derived from the two cells and shown, not judged again.
"""

import pytest

from pytest_mxperf.model.workload import Workload

MODEL = "mlp"
GLOBAL_BATCH = 256
STEPS = 200


def _spec(kvstore, smoke):
    return {"kvstore": kvstore, "num_workers": 2, "num_servers": 1, "timeout": 240,
            "worker": {"model": MODEL, "global_batch": GLOBAL_BATCH, "steps": 20 if smoke else STEPS,
                       "warmup_steps": 5, "seed": 0, "learning_rate": 0.1, "momentum": 0.9,
                       "report_every": 10}}


def cluster_figures(payload):
    """A cluster's result as figures; a cluster that left processes or ports behind is an error."""
    if payload.get("leftover_pids") != [] or payload.get("leftover_ports") != []:
        raise ValueError(f"cluster left behind pids {payload.get('leftover_pids')} "
                         f"ports {payload.get('leftover_ports')}")
    return {"samples_per_s": payload["samples_per_second"]}


_local = {}


def _measure(mxperf, kvstore):
    if kvstore == "local" and "local" in _local:
        return _local["local"]  # one reference cell per session, not one per kvstore
    w = Workload(model=MODEL, mode="dist", batch_size=GLOBAL_BATCH, threads="1", kvstore=kvstore)
    cell = mxperf.expect_ok(mxperf.measure_module("pytest_mxperf.measure.cluster", _spec(kvstore, mxperf.options.smoke), w,
                                                  cluster_figures, timeout=300))
    if kvstore == "local":
        _local["local"] = cell
    return cell


@pytest.mark.cpu
@pytest.mark.distributed
@pytest.mark.parametrize("kvstore", ["dist_sync", pytest.param("dist_async", marks=pytest.mark.slow),
                                     pytest.param("dist_device_sync", marks=pytest.mark.slow)])  # #26: the default session is the daily gate; --perf-slow runs the rest
def test_distributed_kvstore_throughput(mxperf, kvstore):
    local = _measure(mxperf, "local")
    cell = _measure(mxperf, kvstore)
    sps, ref = cell.median, local.median
    mxperf.report(f"dist_{kvstore}", {
        "model": MODEL, "global_batch": GLOBAL_BATCH, "workers": 2, "servers": 1,
        "samples_per_s": round(sps, 1), "local_samples_per_s": round(ref, 1),
        "ratio_to_local": round(sps / ref, 3),
        "cluster_wall_s": round(cell.ok_runs[0].meta["result"]["wall_seconds"], 2),
    }, note=("all roles on one machine: measures the ps-lite protocol overhead over loopback, "
             "not a network"))
