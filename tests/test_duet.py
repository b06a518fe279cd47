"""Duet pairs (pytest_mxperf/duet.py): two resident workers taking turns at timed rounds,
run here against stand-in workers that speak the real round protocol
(``workers/protocol.serve_rounds``), and once against real MXNet."""

import os

import psutil
import pytest

from pytest_mxperf import duet
from pytest_mxperf.workload import Workload

W = Workload(model="lenet", mode="score", batch_size=4)


def _children():
    return [p for p in psutil.Process().children(recursive=True) if p.is_running()]


def test_a_duet_pair_alternates_rounds_of_equal_size(make_stub_python):
    cand, ref = make_stub_python("cand", rate=90.0), make_stub_python("ref", rate=100.0)
    c, r = duet.run_pair(W, candidate=cand, reference=ref, seed=1, candidate_first=False, time_budget=0.5,
                         memory_limit=None)
    assert c.ok and r.ok, (c.message, r.message)
    n = duet.rounds_for(0.5)
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


def test_a_real_duet_pair_of_one_install_measures_both_sides_and_the_waiting_side_idles():
    """Real MXNet on both sides (this interpreter twice): both measure, and the side that
    waits on its pipe uses (almost) no CPU while its partner runs: OpenMP threads do not
    spin between rounds."""
    c, r = duet.run_pair(W, candidate=None, reference=None, seed=0, time_budget=0.5)
    assert c.ok and r.ok, (c.message, r.message, c.stderr_tail[-3:])
    assert len(c.round_seconds) == len(r.round_seconds) == duet.rounds_for(0.5)
    assert c.meta["mxnet_version"] == r.meta["mxnet_version"]
    for side in (c, r):
        share = side.meta["duet"]["waiting_cpu_share"]
        assert share is not None and share < 0.1, (side.meta["duet"], side.meta.get("threads"))
    assert not _children()
