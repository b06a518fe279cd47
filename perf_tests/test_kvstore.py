"""Communication cost per batch: kvstore push/pull bandwidth against compute per batch.

In the manner of MXNet's ``tools/bandwidth/measure.py`` (``pytest_mxperf.workers.commbench``):
gradient arrays shaped like a network's parameters (from the zoo symbol's infer_shape)
are pushed and pulled through a kvstore over the given contexts, ``waitall`` per round,
giving GB/s and communication seconds per batch. That is set against the compute
seconds per batch of a training cell (the conv nets: the median of ``mxperf.measure(...,
mode="train")``; the wide MLP: one device's forward and backward, measured by the same
worker, without the optimizer's update, which the device kvstore runs per parameter like
the exchange: ``commbench.measure_compute``) and classified with the stated ratio ``commbench.COMM_BOUND_RATIO``: communication-bound
when communication per batch >= that ratio x compute per batch.

On CPU contexts the "bandwidth" is memory copies (and the sum) in the same RAM, not PCIe:
it bounds what the kvstore costs on this machine and says nothing about GPU links.

Each kvstore measurement is a cell (mode ``kvstore``): its figure is the seconds per
push+pull round (lower is better), one value per fresh worker process, baselined and
judged like a throughput cell; GB/s is derived from it and shown, not judged again. In A/B
mode it is a duet like a throughput cell: both installs' workers keep their kvstore and
alternate timed rounds of k push+pull rounds (``workers/commbench.py``); the wide MLP's
compute side is measured after them, each worker alone, and shown.

The forum case (a wide MLP: 250k inputs, 1024 and 512 hidden, 200k outputs, training
slower with more GPUs) is scaled down by 10 in its wide layers (25k inputs, 20k outputs:
36.4M parameters, still almost all parameters) and, at 1 sample per device (``WIDE_MLP_BATCH``:
why), must classify as communication-bound, while a conv net at 8 per device must classify
as compute-bound.
"""

import pytest

from pytest_mxperf.workers import commbench
from pytest_mxperf.model.workload import Workload

CPU_CONTEXTS = ("cpu:0", "cpu:1")
BATCH = 8  # per device: the conv nets, and the bandwidth cells
# per device, the wide MLP's forward and backward on CPU contexts: the forum's GPUs compute
# far faster than 2 vCPUs while exchanging the same bytes, so its share of exchange shows
# on CPU at a smaller batch per device than the forum's 32 per GPU
WIDE_MLP_BATCH = 1
COMM_ROUNDS = 8


def comm_figures(payload):
    """A commbench result as figures; a wrong sum is an error, not a figure."""
    if payload["error"] >= 1e-5:
        raise ValueError(f"pulled values are not the sum of the pushed gradients (rel. error {payload['error']:.3g})")
    figs = {"comm_seconds": payload["comm_seconds"], "bandwidth_gbps": payload["bandwidth_gbps"],
            "moved_gbps": payload["moved_gbps"]}
    if "compute_seconds" in payload:
        figs["compute_seconds_per_batch"] = payload["compute_seconds"]
    return figs


def _comm(mxperf, network, contexts, kvstore, compute=False, batch=BATCH):
    spec = {"network": network, "contexts": list(contexts), "kvstore": kvstore, "batch_size": batch,
            "rounds": 3 if mxperf.options.smoke else COMM_ROUNDS, "compute": compute,
            "compute_rounds": 3 if mxperf.options.smoke else 6}
    name = network.get("model") or "wide_mlp_{inputs}_{outputs}".format(**network["wide_mlp"])
    w = Workload(model=name, mode="kvstore", batch_size=batch, contexts=tuple(contexts), kvstore=kvstore)
    cell = mxperf.expect_ok(mxperf.measure_module("pytest_mxperf.workers.commbench", spec, w, comm_figures,
                                                  timeout=600))
    res = dict(cell.ok_runs[0].figures)
    res.update({k: cell.figure(k) for k in res})  # medians over processes
    res.update(contexts=list(contexts), kvstore=kvstore, size_mb=cell.ok_runs[0].meta["result"]["size_mb"],
               batch_per_device=batch)
    return res


def _bandwidth_figures(res):
    return {"contexts": ",".join(res["contexts"]), "kvstore": res["kvstore"],
            "size_mb": round(res["size_mb"], 1),
            "comm_s_per_batch": round(res["comm_seconds"], 4),
            "bandwidth_gbps": round(res["bandwidth_gbps"], 3), "moved_gbps": round(res["moved_gbps"], 3)}


@pytest.mark.cpu
@pytest.mark.multi_device
@pytest.mark.parametrize("kvstore", ["device", pytest.param("local", marks=pytest.mark.slow)])
def test_cpu_kvstore_bandwidth(mxperf, kvstore):
    res = _comm(mxperf, {"model": "resnet50_v2"}, CPU_CONTEXTS, kvstore)
    mxperf.report(f"kvstore_bandwidth_cpu_{kvstore}", _bandwidth_figures(res),
                  note="CPU contexts: memory copies in the same RAM, not PCIe")


@pytest.mark.gpu
@pytest.mark.multi_device
@pytest.mark.parametrize("kvstore", ["device", "nccl", "local"])
def test_gpu_kvstore_bandwidth(mxperf, kvstore):
    if kvstore == "nccl":
        mxperf.require_feature("NCCL", "the nccl kvstore")
    n = mxperf.num_gpus
    if n < 2:
        pytest.skip(f"GPU kvstore bandwidth needs at least 2 GPUs; mx.context.num_gpus() is {n}")
    res = _comm(mxperf, {"model": "resnet50_v2"}, tuple(f"gpu:{i}" for i in range(n)), kvstore)
    mxperf.report(f"kvstore_bandwidth_gpu_{kvstore}", _bandwidth_figures(res))


def _classified(mxperf, name, comm, compute_s, expected):
    ratio = comm["comm_seconds"] / compute_s
    got = commbench.classify(comm["comm_seconds"], compute_s)
    figures = dict(_bandwidth_figures(comm), batch_per_device=comm["batch_per_device"], compute_s_per_batch=round(compute_s, 4),
                   comm_to_compute=round(ratio, 3), stated_ratio=commbench.COMM_BOUND_RATIO,
                   classification=got)
    note = ""
    if got == "communication-bound":
        note = (f"communication is the bottleneck: exchanging {comm['size_mb']:.0f} MB of gradients costs "
                f"{ratio:.0%} of a step's forward and backward; more devices add this per batch and cannot "
                f"speed the step up (cf. the forum's wide MLP, slower on more GPUs)")
    mxperf.report(f"comm_vs_compute_{name}", figures, note=note)
    assert got == expected, (f"{name}: comm {comm['comm_seconds']:.4f} s vs compute {compute_s:.4f} s per batch "
                             f"(ratio {ratio:.3f}, stated {commbench.COMM_BOUND_RATIO}) -> {got}, expected {expected}")


@pytest.mark.cpu
@pytest.mark.multi_device
def test_wide_mlp_is_communication_bound(mxperf):
    """The forum's wide MLP, scaled down: compute per batch from the same worker's training step."""
    comm = _comm(mxperf, {"wide_mlp": commbench.WIDE_MLP_SCALED}, CPU_CONTEXTS, "device", compute=True,
                 batch=WIDE_MLP_BATCH)
    _classified(mxperf, "wide_mlp", comm, comm["compute_seconds_per_batch"], "communication-bound")


@pytest.mark.cpu
@pytest.mark.multi_device
@pytest.mark.parametrize("net", [pytest.param("resnet50_v2", marks=pytest.mark.slow),  # #26: the default session is the daily gate; --perf-slow runs the rest
                                 pytest.param("inception-bn", marks=pytest.mark.slow)])
def test_conv_net_is_compute_bound(mxperf, net):
    comm = _comm(mxperf, {"model": net}, CPU_CONTEXTS, "device")
    cell = mxperf.expect_ok(mxperf.measure(net, BATCH, mode="train", contexts=(CPU_CONTEXTS[0],)))
    compute_s = cell.workload.total_batch / cell.median
    _classified(mxperf, net, comm, compute_s, "compute-bound")
