"""The multi-GPU LeNet / MLP study: samples/s over device counts and batch sizes, and
time-to-accuracy (MLPerf-style) on a real data set.

Throughput: training samples/s of LeNet and the MLP for each batch size per device and
each device count (weak scaling, as ``test_multi_device``). Small models can get *slower*
with more devices (per-device overhead: slicing the batch, aggregating gradients, one
update per device); that is reported as a finding, never asserted away. On CPU the
"devices" are contexts on the same cores (threads profile "per-context").

Time-to-accuracy (``pytest_mxperf.workers.convergence``): LeNet trained on the UCI hand-written
digits at 28x28 (``pytest_mxperf/data/digits28.npz``) until ``TARGET`` validation accuracy
on the hold-out. Each batch size and device count is a cell (mode ``convergence``) whose
processes are the seeds 0..4 (one fresh process per seed, the same seeds every session):
seconds to the target are judged like any per-process figure, epochs to the target by the
verdict's discrete rule (epochs tie too often for a rank test), both against the baseline.
Asserted here: every seed reaches the target within ``MAX_EPOCHS`` epochs.
"""

import pytest

from pytest_mxperf.workers import convergence
from pytest_mxperf.workers.convergence import DEFAULT_TARGET
from pytest_mxperf.model.workload import Workload

TARGET = DEFAULT_TARGET  # 0.95 on the digits hold-out
#: measured here: 1-9 epochs over these batch sizes and seeds (lr 0.1, momentum 0.9)
MAX_EPOCHS = 20
SEEDS = (0, 1, 2, 3, 4)
#: total batch sizes of the convergence study (per device = total / devices)
CONVERGENCE_BATCHES = (32, 64, 128)
STUDY_MODELS = ("lenet", "mlp")
#: batch sizes per device of the throughput study; the large one is slow on 2 cores
STUDY_BATCHES = (32, pytest.param(256, marks=pytest.mark.slow))
CPU_DEVICE_LISTS = {1: ("cpu:0",), 2: ("cpu:0", "cpu:1")}


def _threads(contexts):
    return "auto" if len(contexts) == 1 else "per-context"


def _gpu_lists(mxperf):
    n = mxperf.num_gpus
    if n < 1:
        pytest.skip("no GPU here: mx.context.num_gpus() is 0")
    return {k: tuple(f"gpu:{i}" for i in range(k)) for k in range(1, n + 1)}


def _throughput_study(mxperf, net, batch, lists, device):
    cells = {}
    for k, ctxs in sorted(lists.items()):
        cells[k] = mxperf.expect_ok(mxperf.measure(net, batch, mode="train", contexts=ctxs, threads=_threads(ctxs)))
    base = cells[1].median
    figures = {"batch_per_device": batch}
    for k, cell in cells.items():
        figures[f"samples_per_s_{k}{device}"] = round(cell.median, 1)
        if k > 1:
            figures[f"speedup_{k}{device}"] = round(cell.median / base, 3)
    mxperf.report(f"study_{net}_b{batch}_{device}", figures)
    slower = [k for k, c in cells.items() if k > 1 and c.median < base]
    if slower:
        mxperf.report(f"more_devices_slower_{net}_b{batch}_{device}", figures,
                      note=(f"{net} at batch {batch} per device is slower on {', '.join(map(str, slower))} "
                            f"{device} device(s) than on one: a small model's step is dominated by "
                            f"per-device overhead, not compute"))


@pytest.mark.cpu
@pytest.mark.multi_device
@pytest.mark.parametrize("batch", STUDY_BATCHES)
@pytest.mark.parametrize("net", ["lenet", pytest.param("mlp", marks=pytest.mark.slow)])  # #26: the default session is the daily gate; --perf-slow runs the rest
def test_cpu_samples_per_second_over_devices(mxperf, net, batch):
    _throughput_study(mxperf, net, batch, CPU_DEVICE_LISTS, "cpu")


@pytest.mark.gpu
@pytest.mark.multi_device
@pytest.mark.parametrize("batch", (32, 256))
@pytest.mark.parametrize("net", STUDY_MODELS)
def test_gpu_samples_per_second_over_devices(mxperf, net, batch):
    _throughput_study(mxperf, net, batch, _gpu_lists(mxperf), "gpu")


def _time_to_accuracy(mxperf, total_batch, contexts):
    if total_batch % len(contexts):
        pytest.skip(f"total batch {total_batch} does not split over {len(contexts)} devices")
    per_device = total_batch // len(contexts)
    spec = {"model": "lenet", "batch_size": per_device, "contexts": list(contexts), "target_accuracy": TARGET,
            "max_epochs": MAX_EPOCHS}
    w = Workload(model="lenet", mode="convergence", batch_size=per_device, contexts=tuple(contexts),
                 threads=_threads(contexts))
    # the seed of process i is i: the same seeds every session, so baselines compare like with like
    cell = mxperf.measure_module("pytest_mxperf.workers.convergence", spec, w, convergence.figures,
                                 processes=len(SEEDS))
    if cell.status == "unavailable":
        pytest.skip(cell.message)
    assert cell.status == "ok", f"{cell.status}: {cell.message}"
    results = [r.meta["result"] for r in cell.runs]
    figures = {"devices": len(contexts), "total_batch": total_batch, "target": TARGET}
    for r in results:
        figures[f"epochs_seed{r['seed']}"] = r["epochs"]
        figures[f"final_acc_seed{r['seed']}"] = round(r["final_val_accuracy"], 4)
    mxperf.report(f"time_to_accuracy_lenet_b{total_batch}_{len(contexts)}{contexts[0].split(':')[0]}", figures,
                  note="seconds and epochs to the target are judged against the baseline; "
                       f"here: every seed within {MAX_EPOCHS} epochs")
    missed = [r["seed"] for r in results if not r["reached"]]
    assert len(results) == len(SEEDS) and not missed, (
        f"LeNet at total batch {total_batch} on {len(contexts)} device(s) did not reach {TARGET} validation "
        f"accuracy within {MAX_EPOCHS} epochs for seed(s) {missed} "
        f"(final accuracies {[round(r['final_val_accuracy'], 4) for r in results]})")


# 1 device: every default batch size; 2 devices: batch 64 (the others are --perf-slow).
CPU_CONVERGENCE_CELLS = [pytest.param(b, 1, id=f"b{b}-1cpu", marks=() if b == 64 else pytest.mark.slow)  # #26: the default session is the daily gate; --perf-slow runs the rest
                         for b in CONVERGENCE_BATCHES] + [
    pytest.param(b, 2, id=f"b{b}-2cpu", marks=pytest.mark.slow) for b in CONVERGENCE_BATCHES]


@pytest.mark.cpu
@pytest.mark.training
@pytest.mark.parametrize("total_batch,devices", CPU_CONVERGENCE_CELLS)
def test_cpu_time_to_accuracy(mxperf, total_batch, devices):
    _time_to_accuracy(mxperf, total_batch, CPU_DEVICE_LISTS[devices])


@pytest.mark.gpu
@pytest.mark.training
@pytest.mark.parametrize("devices", (1, 2))
@pytest.mark.parametrize("total_batch", CONVERGENCE_BATCHES)
def test_gpu_time_to_accuracy(mxperf, total_batch, devices):
    lists = _gpu_lists(mxperf)
    if devices not in lists:
        pytest.skip(f"needs {devices} GPUs; mx.context.num_gpus() is {mxperf.num_gpus}")
    _time_to_accuracy(mxperf, total_batch, lists[devices])
