"""Reduced precision judged like MLPerf (issue #27): the answers must not change.

A LeNet trained in float32 on the shipped digits (``pytest_mxperf/data/digits28.npz``) to
the convergence worker's target, scored in float32, bfloat16 (where this CPU and build run
it) and int8 (oneDNN post-training quantization calibrated on held-out digits that are not
scored), all on the same 288 held-out images, in one worker process
(``pytest_mxperf/workers/digits_precision.py``); each process trains its own network (the
seed of process i is i).

Asserted: in every process, every reduced precision that ran is within
``judge.accuracy.ACCURACY_TOLERANCE`` (1 point absolute) of float32's accuracy
(``judge_accuracies``); a dtype this machine cannot run is neither passed nor failed, and
a supported dtype that failed to run fails the test. Judged against the baseline like any
cell: the float32 scoring img/s (the cell's primary figure). Shown, not judged: each
dtype's accuracy and its gap beside its img/s and speed-up over float32.
"""

import statistics

import pytest

from pytest_mxperf.judge.accuracy import ACCURACY_TOLERANCE, judge_accuracies
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.workers.convergence import DEFAULT_TARGET

MODULE = "pytest_mxperf.workers.digits_precision"
MODEL = "lenet-digits"  # the cell: LeNet trained on the digits, not the zoo's random-weight "lenet"
BATCH = 64              # the scoring batch (and the training batch)
DTYPES = ("float32", "bfloat16", "int8")


def digits_figures(payload):
    """The judged figure: float32's scoring img/s (the reduced precisions' are shown)."""
    return {"throughput": payload["dtypes"]["float32"]["img_per_s"]}


@pytest.mark.cpu
@pytest.mark.scoring
@pytest.mark.slow  # #26: the default session is the daily gate; --perf-slow runs the rest
def test_reduced_precision_keeps_the_digits_answers(mxperf):
    spec = {"model": "lenet", "batch_size": BATCH, "score_batch": BATCH, "dtypes": list(DTYPES),
            "target_accuracy": DEFAULT_TARGET, "max_epochs": 20,
            "time_budget": mxperf.options.time_budget}
    w = Workload(model=MODEL, mode="score", batch_size=BATCH, contexts=("cpu:0",))
    cell = mxperf.expect_ok(mxperf.measure_module(MODULE, spec, w, digits_figures))
    results = [r.meta["precision"] for r in cell.ok_runs]
    seeds = [r.meta["result"]["seed"] for r in cell.ok_runs]

    figures, failures = {}, []
    for d in DTYPES:
        rows = [res["dtypes"][d] for res in results]
        ran = [row for row in rows if row["status"] == "ok"]
        if not ran:
            figures[f"{d}"] = rows[0]["status"]
            continue
        figures[f"{d}_accuracy"] = round(statistics.median(row["accuracy"] for row in ran), 4)
        figures[f"{d}_img_s"] = round(statistics.median(row["img_per_s"] for row in ran), 1)
        if d != "float32":
            figures[f"{d}_gap_points"] = round(100 * statistics.median(row["gap_vs_float32"] for row in ran), 2)
            figures[f"{d}_speedup"] = round(statistics.median(row["speedup_vs_float32"] for row in ran), 3)
    for seed, res in zip(seeds, results):
        rows = res["dtypes"]
        broken = [f"{d}: {row['reason']}" for d, row in rows.items() if row["status"] == "error"]
        if broken:
            failures.append(f"seed {seed}: a supported dtype did not run: {'; '.join(broken)}")
        verdicts = judge_accuracies({d: row["accuracy"] for d, row in rows.items()},
                                    unmeasured={d: row["reason"] for d, row in rows.items()})
        for d, v in verdicts.items():
            if v.passed is False:
                failures.append(f"seed {seed}: {v.reason}; speed-up {rows[d]['speedup_vs_float32']:.2f}x")
    unsupported = {d: row["reason"] for d, row in results[0]["dtypes"].items() if row["status"] == "unsupported"}
    mxperf.report(f"digits precision lenet b{BATCH}", figures,
                  note=(f"{results[0]['evaluation_images']} evaluation images, int8 calibrated on "
                        f"{results[0]['calibration_images']} others; medians over seeds {seeds}; "
                        f"accuracy within {100 * ACCURACY_TOLERANCE:g} point of float32 asserted, speed shown"
                        + "".join(f"; {d} unsupported here: {why}" for d, why in unsupported.items())))
    assert not failures, "reduced precision changed the digits' answers: " + " | ".join(failures)
