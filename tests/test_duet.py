"""Duet pairs (pytest_mxperf/measure/duet.py): two resident workers taking turns at timed rounds,
run here against stand-in workers that speak the real round protocol
(``workers/protocol.serve_rounds``), and with real MXNet on one side of each resident worker
kind, paired with a stand-in that spins: the real side must wait idle beside it."""


import pytest

import stand_ins
from stand_ins import new_children

from pytest_mxperf.measure import duet
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.workers import convergence

W = Workload(model="lenet", mode="score", batch_size=4)

#: the real side's OpenMP threads: one, as on a machine of one physical core (the spinning
#: stand-in takes a CPU of its own)
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


@pytest.fixture
def spinning(make_stub_python):
    """spinning(**config): a stand-in side (tests/stub_worker.py) that a real side is paired
    with. A thread of it computes for its whole life, its waits on the pipe included; each of
    its rounds lasts 0.1 s (slept), so that the real side waits that long on it, and reports a
    unit (batch, push+pull round, epoch) of ``config`` seconds: make it slower than the real
    side's, and the round size follows the real side's."""
    return lambda **config: make_stub_python("spinning", spin=True, duet_sleep=0.1, **config)


def assert_the_waiting_side_idles(idle, spinning):
    """The real side waits idle: while waiting on its partner's rounds it used under half the
    CPU the spinning stand-in used while waiting on the real side's rounds in the same pair.
    Both shares are measured here and now, so the comparison holds on any machine (LeNet b4's
    waiting sides measured 0.03-0.07 of a CPU here and once 0.116 on a CI machine; a side made
    to spin, 0.99 and 1.00); a real side whose threads spun would measure as much as the
    stand-in."""
    share, spin = idle.meta["duet"]["waiting_cpu_share"], spinning.meta["duet"]["waiting_cpu_share"]
    assert share is not None and spin is not None, (idle.meta["duet"], spinning.meta["duet"])
    assert share < spin / 2, (share, spin, idle.meta.get("threads"))


def _children():
    return new_children()


def test_a_duet_pair_alternates_rounds_of_equal_size(make_stub_python):
    cand, ref = make_stub_python("cand", rate=90.0), make_stub_python("ref", rate=100.0)
    c, r = duet.run_pair(W, candidate=cand, reference=ref, seed=1, candidate_first=False, time_budget=0.5,
                         memory_limit=None)
    assert c.ok and r.ok, (c.message, r.message)
    n = duet.rounds_for(0.5, c.meta["duet"]["sizing_round_seconds"])
    assert len(c.round_seconds) == len(r.round_seconds) == n
    assert c.batches_per_round == r.batches_per_round == c.meta["duet"]["batches_per_round"] >= 1
    assert c.meta["duet"]["side"] == "candidate" and r.meta["duet"]["side"] == "reference"
    assert r.meta["duet"]["ran_first"] and not c.meta["duet"]["ran_first"]
    # round j of each side ran next to each other: the ratio of their times is the speed ratio
    ratios = sorted(rr / cc for cc, rr in zip(c.round_seconds, r.round_seconds))
    assert ratios[len(ratios) // 2] == pytest.approx(0.9, rel=0.02)
    assert c.meta["duet"]["waiting_cpu_share"] is not None
    assert not _children()


def test_a_side_that_crashes_mid_rounds_ends_the_pair_and_names_itself(make_stub_python):
    cand, ref = make_stub_python("cand"), make_stub_python("ref", duet_crash_after=4)
    c, r = duet.run_pair(W, candidate=cand, reference=ref, seed=0, time_budget=0.5, memory_limit=None)
    assert r.status == "crash" and "exited with code 3" in r.message, r.message
    assert c.status == "error" and "its duet partner (the reference) failed" in c.message
    assert not _children()


def test_a_side_that_hangs_in_a_round_times_out_and_leaves_no_process(make_stub_python):
    cand, ref = make_stub_python("cand", duet_hang_after=3), make_stub_python("ref")
    c, r = duet.run_pair(W, candidate=cand, reference=ref, seed=0, time_budget=0.5, timeout=2.0,
                         memory_limit=None)
    assert c.status == "timeout" and "timed out after 2 s" in c.message, c.message
    assert r.status == "error" and "candidate" in r.message
    assert not _children()


def test_a_real_duet_side_measures_and_idles_while_it_waits(spinning):
    """Real MXNet on one side (this interpreter), a spinning stand-in on the other: the real
    side measures its rounds, and while it waits on its pipe it uses a fraction of what the
    spinning side uses: OpenMP threads do not spin between rounds. (Two real sides: the A/A
    latency duet of tests/test_duet_latency.py.)"""
    c, r = duet.run_pair(W, candidate=spinning(rate=4.0), reference=None, seed=0, time_budget=0.5,
                         extra_env=ONE_THREAD)
    assert c.ok and r.ok, (c.message, r.message, r.stderr_tail[-3:])
    assert len(c.round_seconds) == len(r.round_seconds) == duet.rounds_for(0.5, c.meta["duet"]["sizing_round_seconds"])
    assert r.batches_per_round == c.batches_per_round >= 1 and all(t > 0 for t in r.round_seconds)
    assert r.meta["mxnet_version"] and r.meta["threads"]["openmp"] == 1
    assert_the_waiting_side_idles(r, c)
    assert not _children()


# ----------------------------------------------------------------------------- other worker kinds

def test_resident_worker_kinds_are_declared_and_others_are_not():
    # the cluster launcher relays rounds to its workers (tests/test_dist.py runs a duet of two)
    for module in ("pytest_mxperf.workers.throughput", "pytest_mxperf.workers.commbench",
                   "pytest_mxperf.workers.pipeline", "pytest_mxperf.workers.convergence",
                   "pytest_mxperf.measure.cluster", "pytest_mxperf.workers.serving"):
        assert duet.resident(module), module
    # one process of these is a peak probe / a kind the suite does not know
    for module in ("pytest_mxperf.workers.peak", "some.users.worker"):
        assert not duet.resident(module), module
    # a training run to the target, and a serving peak search, run their rounds to the end,
    # never untimed or sized; a serving cell's rounds are two whole LoadGen runs a side
    assert set(duet.TO_THE_END) == {"convergence", "serving_peak"}
    assert dict(duet.WHOLE_RUNS) == {"serving": 2}


# ----------------------------------------------------------------------------- time to accuracy

TTA = Workload(model="lenet", mode="convergence", batch_size=64, contexts=("cpu:0",), threads="auto")
TTA_MODULE = "pytest_mxperf.workers.convergence"


def test_a_time_to_accuracy_duet_runs_each_side_to_its_own_end(make_stub_python):
    """Two training runs of different lengths (stand-ins: 3 and 5 epochs of 4 rounds): the
    parent alternates their rounds and sends none untimed (no settling, no sizing: every
    round is part of the run), the side that finishes first waits, the other runs on alone
    to its end; each side's figure is the sum of its own rounds."""
    cand = make_stub_python("cand", epochs=3, round_seconds=0.02)
    ref = make_stub_python("ref", epochs=5, round_seconds=0.01)
    c, r = duet.run_pair(TTA, candidate=cand, reference=ref, seed=3, module=TTA_MODULE, spec={"max_epochs": 20},
                         figures=convergence.figures)
    assert c.ok and r.ok, (c.message, r.message)
    assert c.meta["result"]["rounds"] == c.meta["duet"]["rounds"] == 12
    assert r.meta["result"]["rounds"] == r.meta["duet"]["rounds"] == 20
    assert c.meta["result"]["seed"] == r.meta["result"]["seed"] == 3  # one seed: one run on each setup
    assert c.value("seconds_to_target") == pytest.approx(12 * 0.02)
    assert r.value("seconds_to_target") == pytest.approx(20 * 0.01)
    assert (c.value("epochs_to_target"), r.value("epochs_to_target")) == (3.0, 5.0)
    assert not _children()


def test_a_time_to_accuracy_side_that_hangs_ends_the_pair_and_leaves_no_process(make_stub_python):
    cand, ref = make_stub_python("cand", epochs=3), make_stub_python("ref", epochs=3, duet_hang_after=5)
    c, r = duet.run_pair(TTA, candidate=cand, reference=ref, seed=0, module=TTA_MODULE, spec={}, timeout=3,
                         figures=convergence.figures)
    assert r.status == "timeout" and c.status == "error" and "the reference" in c.message, (c, r)
    assert not _children()


def test_a_side_that_never_finishes_fails_the_pair_at_the_bound(make_stub_python, monkeypatch):
    monkeypatch.setattr(duet, "MAX_TO_THE_END_ROUNDS", 6)
    cand, ref = make_stub_python("cand", epochs=1), make_stub_python("ref", epochs=9)
    c, r = duet.run_pair(TTA, candidate=cand, reference=ref, seed=0, module=TTA_MODULE, spec={},
                         figures=convergence.figures)
    assert not r.ok and "did not finish in 6 rounds" in r.message, (r.status, r.message)
    assert not c.ok and "its duet partner (the reference) failed" in c.message
    assert not _children()


def test_a_real_time_to_accuracy_duet_pair_trains_one_seed_on_both_sides():
    """Real MXNet on both sides (this interpreter), the default selection's cell with the seed
    that reaches the target in the fewest epochs: each side trains the same epochs, in
    DUET_EPOCH_ROUNDS rounds an epoch (a quarter of its steps each, the last round of an
    epoch evaluating it), and its seconds to accuracy are the sum of its rounds. With the sides
    binding one at a time, as a GPU duet's do (``solo_warmup``; the turn path, run here on a CPU)."""
    spec = {"model": "lenet", "contexts": ["cpu:0"], "batch_size": 64, "target_accuracy": 0.95, "max_epochs": 20}
    c, r = duet.run_pair(TTA, candidate=None, reference=None, seed=2, module=TTA_MODULE, spec=spec,
                         figures=convergence.figures, extra_env=ONE_THREAD, solo_warmup=True)
    assert c.ok and r.ok, (c.message, r.message, r.stderr_tail[-3:])
    assert sorted((c.meta["duet"]["warmup_turn"], r.meta["duet"]["warmup_turn"])) == [1, 2]
    for side in (c, r):
        res = side.meta["result"]
        assert res["reached"] and res["epochs"] == c.meta["result"]["epochs"]
        assert res["steps_per_round"] == -(-res["steps_per_epoch"] // convergence.DUET_EPOCH_ROUNDS)
        assert res["rounds"] == res["epochs"] * convergence.DUET_EPOCH_ROUNDS == side.meta["duet"]["rounds"]
        assert res["seconds_to_accuracy"] == res["elapsed_seconds"] > res["train_seconds"] > 0
        # each side waited on its pipe while the other trained: far under a CPU a second
        assert side.meta["duet"]["waiting_cpu_share"] < 0.5, side.meta["duet"]
    assert not _children()


def test_the_plan_says_which_cells_run_process_pairs():
    from pytest_mxperf.measure import planning
    from pytest_mxperf.model.options import PerfOptions
    from pytest_mxperf.output import report
    line = report.plan_line(4, PerfOptions(reference="/x/python"), 8, 3, duet_tests=3, ab=True)
    assert "score, train, latency, kvstore, dist, convergence, io, serving_peak, serving, your own network" in line
    assert "a worker kind that cannot be resident runs 8 process pairs" in line
    options = PerfOptions(reference="/x/python")
    pair = planning.duet_pair_seconds(options)
    first = 3 * 3 * pair + planning.planned_test_seconds(options, True, 3, 8, duet=False)  # 3 duet cells, 1 of 8 process pairs
    most = first + 3 * planning.SECOND_STAGE_PAIRS * pair                             # each duet cell 5 more pairs
    assert (f"expected about {report.duration_text(first)} when no cell needs a second stage, about "
            f"{report.duration_text(most)} when every cell does") in line, line


KV = Workload(model="resnet50_v2", mode="kvstore", batch_size=8, contexts=("cpu:0", "cpu:1"), kvstore="device")


def _comm_figures(payload):
    return {"comm_seconds": payload["comm_seconds"], "bandwidth_gbps": payload["bandwidth_gbps"]}


def test_a_kvstore_duet_pair_of_stand_ins_times_push_pull_rounds(make_stub_python):
    cand, ref = make_stub_python("cand", comm_seconds=0.055), make_stub_python("ref", comm_seconds=0.05)
    c, r = duet.run_pair(KV, candidate=cand, reference=ref, seed=1, time_budget=0.5, memory_limit=None,
                         module="pytest_mxperf.workers.commbench", spec={"kvstore": "device"},
                         figures=_comm_figures)
    assert c.ok and r.ok, (c.message, r.message)
    n = duet.rounds_for(0.5, c.meta["duet"]["sizing_round_seconds"])
    assert len(c.round_seconds) == len(r.round_seconds) == n and n < duet.rounds_for(0.5)  # 0.165 s rounds
    assert c.batches_per_round == r.batches_per_round == c.meta["duet"]["batches_per_round"] >= 1
    assert c.meta["result"]["duet"] is True and c.meta["duet"]["side"] == "candidate"
    assert c.value("comm_seconds") == pytest.approx(0.055, rel=0.02)
    assert r.value("comm_seconds") == pytest.approx(0.05, rel=0.02)
    assert not _children()


def test_a_duet_pairs_log_ratio_follows_the_direction_of_the_figure_the_rounds_time():
    """comm_seconds is a time (lower is better), samples/s a rate: the same rounds, 10%
    longer on the candidate's side, are log(1.1) worse in seconds and log(1/1.1) in samples/s."""
    import math

    from pytest_mxperf.outcome import ab_judging
    from pytest_mxperf.model.measurement import METRICS, RunResult
    ref_rounds = [0.1, 0.2, 0.1, 0.15, 0.12]
    for mode, metric, expect in (("kvstore", "comm_seconds", math.log(1.1)), ("io", "samples_per_s", -math.log(1.1)),
                                 ("score", "throughput", -math.log(1.1))):
        w = Workload(model="m", mode=mode, batch_size=8)
        c = RunResult(w, "ok", batches_per_round=3, round_seconds=[1.1 * t for t in ref_rounds],
                      figures={metric: 1.0}, meta={"duet": {}})
        r = RunResult(w, "ok", batches_per_round=3, round_seconds=ref_rounds, figures={metric: 1.0}, meta={"duet": {}})
        assert ab_judging.duet_log_ratio(c, r, METRICS[metric]) == pytest.approx(expect), metric


KV_SESSION = """
import pytest
from pytest_mxperf.model.workload import Workload

def figures(payload):
    return {"comm_seconds": payload["comm_seconds"], "bandwidth_gbps": payload["bandwidth_gbps"]}

@pytest.mark.cpu
@pytest.mark.multi_device
def test_kv(mxperf):
    w = Workload(model="resnet50_v2", mode="kvstore", batch_size=8, contexts=("cpu:0", "cpu:1"), kvstore="device")
    mxperf.expect_ok(mxperf.measure_module("pytest_mxperf.workers.commbench", {"kvstore": "device"}, w, figures))
"""

KV_KEY = "kvstore/resnet50_v2/b8/cpu:0,cpu:1/float32/threads=auto/kv=device"


def _kv_ab(pytester, make_stub_python, cand, ref):
    import json
    pytester.makepyfile(test_kv=KV_SESSION)
    r = stand_ins.session(pytester, "-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box",
                                      "--perf-baselines-dir", str(pytester.path / "bl"),
                                      "--perf-python", make_stub_python("cand", **cand),
                                      "--perf-reference", make_stub_python("ref", **ref),
                                      "--perf-report", "rep", "--perf-no-probe")
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    (rec,) = [x for x in doc["records"] if x["key"] == KV_KEY]
    return r, r.stdout.str(), rec


def test_ab_a_kvstore_cell_runs_duet_pairs_and_a_10_percent_slower_candidate_fails(pytester, make_stub_python):
    from pytest_mxperf.judge import verdict_duet
    r, out, rec = _kv_ab(pytester, make_stub_python, {"comm_seconds": 0.055, "version": "1.9.1"},
                         {"comm_seconds": 0.05, "version": "1.8.0"})
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert f"A/B mode: 1 cell(s) x {verdict_duet.STAGE1_PAIRS} duet pairs" in out
    assert f"REGRESSION {KV_KEY}" in out and "candidate/reference 1.1" in out and "duet pairs" in out
    assert rec["ab"]["verdict"] == "regression"
    # called at its first look (the stand-in's pairs agree closely), every pair a duet pair
    assert len(rec["runs"]) == len(rec["reference_runs"]) == rec["ab"]["pairs"] == verdict_duet.STAGE1_PAIRS
    assert all(x["meta"]["duet"]["side"] == "candidate" for x in rec["runs"])
    assert all(x["meta"]["duet"]["side"] == "reference" for x in rec["reference_runs"])
    assert all(len(x["round_seconds"]) == len(y["round_seconds"]) > 1
               for x, y in zip(rec["runs"], rec["reference_runs"]))


def test_ab_equal_kvstore_cells_pass(pytester, make_stub_python):
    r, out, rec = _kv_ab(pytester, make_stub_python, {"comm_seconds": 0.05}, {"comm_seconds": 0.05})
    assert r.ret == 0, out
    assert "REGRESSION" not in out and rec["ab"]["verdict"] == "unchanged"
    assert all("duet" in x["meta"] for x in rec["runs"] + rec["reference_runs"])


# real MXNet on both sides (this interpreter twice), kept small: a few seconds each

def test_a_real_kvstore_duet_side_measures_and_idles_while_it_waits(spinning):
    c, r = duet.run_pair(KV, candidate=spinning(comm_seconds=1.0), reference=None, seed=0, time_budget=0.5,
                         module="pytest_mxperf.workers.commbench", extra_env=ONE_THREAD,
                         spec={"network": {"model": "lenet"}, "contexts": ["cpu:0", "cpu:1"], "kvstore": "device",
                               "batch_size": 8},
                         figures=_comm_figures)
    assert c.ok and r.ok, (c.message, r.message, c.stderr_tail[-3:], r.stderr_tail[-3:])
    n = duet.rounds_for(0.5, c.meta["duet"]["sizing_round_seconds"])
    assert len(c.round_seconds) == len(r.round_seconds) == n
    assert r.meta["result"]["error"] < 1e-5  # pulled == the sum of the pushed gradients
    assert r.value("comm_seconds") > 0 and r.batches_per_round == r.meta["duet"]["batches_per_round"]
    assert_the_waiting_side_idles(r, c)
    assert not _children()


def test_the_side_whose_round_ran_first_measures_its_parts_first(make_stub_python):
    """An input pipeline's parts (the loader alone, the trainer alone) are measured after the
    rounds, each side alone, one side right after the other, and judged by the ratio of the
    two: the side that ran first in the rounds goes first, so that the order alternates from
    pair to pair as the rounds' does (before, the candidate always went first: every pair's
    ratio carried the same order)."""
    w = Workload(model="pipeline", mode="io", batch_size=16)
    spec = {"loader": "ndarray", "batch_size": 16, "seconds": 0.3}
    figures = lambda p: {"samples_per_s": p["samples_per_s"]}  # noqa: E731
    for candidate_first in (True, False):
        cand = make_stub_python("cand", unit_seconds=0.01, after_rounds_s=0.3)
        ref = make_stub_python("ref", unit_seconds=0.01, after_rounds_s=0.3)
        c, r = duet.run_pair(w, candidate=cand, reference=ref, seed=0, candidate_first=candidate_first,
                             time_budget=0.5, module="pytest_mxperf.workers.pipeline", spec=spec, figures=figures,
                             memory_limit=None)
        assert c.ok and r.ok, (c.message, r.message)
        first, second = (c, r) if candidate_first else (r, c)
        assert first.meta["duet"]["ran_first"] and not second.meta["duet"]["ran_first"]
        # the second side's parts start only after the first side's ended: each ran alone
        assert first.meta["result"]["after_rounds_ended"] <= second.meta["result"]["after_rounds_started"], \
            candidate_first
    assert not _children()


def test_an_input_pipelines_parts_are_judged_as_process_pairs_are():
    """A training cell's end-to-end rate is judged from the duet's rounds; its loader's and
    trainer's rates, measured after the rounds by each side alone, as process pairs are (the
    fast-end rule): a trainer 20% slower on the candidate's side is a regression, while an A/A
    whose trainer read 25% low on one side of a pair now and then (as it did in 5 of 40 real
    pairs) is not a change, where the mean of its pairs' ratios (x0.976) would have been
    judged on a spread of 9%."""
    import math

    from pytest_mxperf.measure.ledger import CellRecord
    from pytest_mxperf.model.measurement import CellMeasurement, RunResult, metric_key
    from pytest_mxperf.outcome import ab_judging

    w = Workload(model="lenet+imagerecord-t1-1x28x28", mode="io", batch_size=64)

    def side(i, trainer):
        wobble = 1.0 + 0.01 * ((i % 3) - 1)  # the pair's spell, on both sides alike
        return RunResult(w, "ok", batches_per_round=2, round_seconds=[0.1 * wobble] * 8, meta={"duet": {}},
                         figures={"samples_per_s": 1280.0 / wobble, "loader_samples_per_s": 3000.0 / wobble,
                                  "trainer_samples_per_s": trainer,
                                  "load_seconds_per_batch": 0.01, "compute_seconds_per_batch": 0.04})

    def judged(cand, ref):
        v = ab_judging.judge_ab_once({w.key(): CellRecord("t", CellMeasurement(w, cand, ref))}, {w.key()}, 0.05)
        return {name: v[metric_key(w.key(), name, "io")] for name in ("samples_per_s", "loader_samples_per_s", "trainer_samples_per_s")}

    steady = [3400.0 * (1.0 + 0.004 * ((i % 5) - 2)) for i in range(12)]
    slower = judged([side(i, 0.8 * t) for i, t in enumerate(steady)], [side(i, t) for i, t in enumerate(steady)])
    assert slower["trainer_samples_per_s"].kind == "regression", slower["trainer_samples_per_s"]
    assert slower["trainer_samples_per_s"].n_current == 12
    assert math.isclose(1 + slower["trainer_samples_per_s"].change, 0.8, rel_tol=0.01), slower["trainer_samples_per_s"]
    for name in ("samples_per_s", "loader_samples_per_s"):
        assert slower[name].kind == "unchanged" and abs(slower[name].change) < 0.01, (name, slower[name])

    low = {0: "r", 4: "c", 7: "c", 9: "r", 11: "c"}  # pairs where one side's trainer read 25% low
    cand = [side(i, t * (0.75 if low.get(i) == "c" else 1.0)) for i, t in enumerate(steady)]
    ref = [side(i, t * (0.75 if low.get(i) == "r" else 1.0)) for i, t in enumerate(steady)]
    ratios = [math.log(c.value("trainer_samples_per_s") / r.value("trainer_samples_per_s")) for c, r in zip(cand, ref)]
    assert sum(ratios) / len(ratios) < math.log(0.98)  # what the pairs' mean would have said
    aa = judged(cand, ref)
    assert aa["trainer_samples_per_s"].kind == "unchanged", aa["trainer_samples_per_s"]
    assert abs(aa["trainer_samples_per_s"].change) < 0.01, aa["trainer_samples_per_s"]


def test_a_duet_cell_with_parts_gets_as_many_pairs_as_a_cell_of_process_pairs_while_a_part_is_a_suspect():
    """Its 3 first pairs cannot settle a part judged by the fast-end rule (the smallest p of 3
    pairs is 1/8): its next look brings it to the process pairs a stage gives (here 12),
    whatever its rounds alone would ask, and it is final after them; a cell without parts asks
    what its rounds ask."""
    from pytest_mxperf.judge.verdict_record import Verdict
    from pytest_mxperf.measure.ledger import CellRecord
    from pytest_mxperf.model.measurement import CellMeasurement, RunResult
    from pytest_mxperf.outcome import ab_judging

    def cell(mode, figures):
        w = Workload(model="m", mode=mode, batch_size=64)
        runs = [RunResult(w, "ok", batches_per_round=2, round_seconds=[0.1 * (1 + 0.001 * i)] * 8, meta={"duet": {}},
                          figures=dict(figures)) for i in range(3)]
        ref = [RunResult(w, "ok", batches_per_round=2, round_seconds=[0.1] * 8, meta={"duet": {}},
                         figures=dict(figures)) for _ in range(3)]
        return w.key(), CellRecord("t", CellMeasurement(w, runs, ref))
    io = cell("io", {"samples_per_s": 1280.0, "loader_samples_per_s": 3000.0, "trainer_samples_per_s": 1600.0,
                     "load_seconds_per_batch": 0.01, "compute_seconds_per_batch": 0.04})
    score = cell("score", {"throughput": 100.0})
    cells = dict([io, score])
    verdicts = ab_judging.judge_ab_once(cells, set(), 0.05)
    assert verdicts[io[0]].kind == "unchanged"
    # as if the trainer alone were a suspect after its first pairs
    verdicts[f"{io[0]}#trainer_samples_per_s"] = Verdict("suspect", "x", metric="trainer_samples_per_s")
    alone = ab_judging.next_looks(cells, verdicts, 0.05)
    with_parts = ab_judging.next_looks(cells, verdicts, 0.05, process_pairs=12)
    assert alone(io[0]) == (0, True) and with_parts(io[0]) == (9, True)
    assert with_parts(score[0]) == alone(score[0])
    # after one pair (planning.first_pairs) the parts first reach the first stage's three pairs, not
    # yet final: a fast-end test of one pair asks for more whatever it reads
    one = {k: CellRecord("t", CellMeasurement(r.cell.workload, r.cell.runs[:1], r.cell.reference[:1]))
           for k, r in cells.items()}
    one_verdicts = ab_judging.judge_ab_once(one, set(), 0.05)
    one_verdicts[f"{io[0]}#trainer_samples_per_s"] = Verdict("suspect", "x", metric="trainer_samples_per_s")
    assert ab_judging.next_looks(one, one_verdicts, 0.05, process_pairs=12)(io[0]) == (2, False)


@pytest.mark.parametrize("spec", [
    pytest.param({"loader": "imagerecord", "threads": 2, "augment": True}, id="loader-alone-epochs"),
    pytest.param({"loader": "prefetch-imagerecord", "threads": 1, "train_model": "lenet", "train_batches": 3,
                  "data_shape": [1, 28, 28]}, id="lenet-fed-steps"),
])
def test_a_real_input_pipeline_duet_side_measures_and_idles_while_it_waits(tmp_path, spec, spinning):
    """ImageRecordIter decodes ahead in its own threads: each round ends only when no thread
    of the worker computes any more, so its partner's rounds run alone."""
    spec = dict({"batch_size": 16, "n_images": 64, "data_shape": [3, 32, 32], "seconds": 0.3,
                 "data_dir": str(tmp_path)}, **spec)
    w = Workload(model="pipeline", mode="io", batch_size=16)
    train = "train_model" in spec
    suite = stand_ins.repository_module("perf_tests/test_input_pipeline.py")  # the suite's own figures of each kind
    figures = suite.training_figures if train else suite.loader_figures
    c, r = duet.run_pair(w, candidate=spinning(unit_seconds=1.0), reference=None, seed=0, time_budget=0.5,
                         module="pytest_mxperf.workers.pipeline", spec=spec, figures=figures, extra_env=ONE_THREAD)
    assert c.ok and r.ok, (c.message, r.message, c.stderr_tail[-3:], r.stderr_tail[-3:])
    n = duet.rounds_for(0.5, c.meta["duet"]["sizing_round_seconds"])
    assert len(c.round_seconds) == len(r.round_seconds) == n
    res = r.meta["result"]
    assert r.value("samples_per_s") > 0
    assert res["batches"] == n * r.batches_per_round if not train else res["batches"] > 0
    if train:  # the parts, measured after the rounds, figures of both sides; the split from the rounds
        assert res["synthetic_samples_per_s"] > 0 and res["samples_per_s"] > 0
        for side in (c, r):
            assert side.value("trainer_samples_per_s") > 0 and side.value("loader_samples_per_s") > 0
        assert 0 < res["load_share"] < 1
        assert res["loader_bound"] == (res["samples_per_s"] < res["synthetic_samples_per_s"])
    assert_the_waiting_side_idles(r, c)
    assert not _children()


def test_rounds_a_side_follow_the_round_length_within_their_bounds():
    assert duet.rounds_for(1.5) == 20                      # 3 s of timed work in 0.15 s rounds
    assert duet.rounds_for(1.5, 0.42) == 7                 # ResNet-50 v2 b8 here: one batch a round
    assert duet.rounds_for(1.5, 5.0) == duet.MIN_ROUNDS    # never fewer
    assert duet.rounds_for(60.0) == duet.MAX_ROUNDS        # never more


def test_real_workers_serve_two_cells_in_one_pair():
    """``duet.run_cells_pair`` with the real throughput worker on both sides: one pair, two cells."""
    cells = [Workload(model="lenet", mode="score", batch_size=4, threads="1"),
             Workload(model="mlp", mode="latency", batch_size=1, threads="1")]
    pairs = duet.run_cells_pair(cells, candidate=None, reference=None, seed=1, time_budget=0.3)
    for i, (c, r) in enumerate(pairs):
        assert c.ok and r.ok, (c.message, r.message, c.stderr_tail)
        assert c.meta.process_cells["index"] == r.meta.process_cells["index"] == i
        assert len(c.round_seconds) == len(r.round_seconds) >= duet.MIN_ROUNDS
        # the same MXNet on both sides: round pairs within a factor of two of each other
        ratios = sorted(rr / cc for cc, rr in zip(c.round_seconds, r.round_seconds))
        assert 0.5 < ratios[len(ratios) // 2] < 2.0, ratios
    assert "latency_p50_ms" in pairs[1][0].figures and "latency_p50_ms" not in pairs[0][0].figures
