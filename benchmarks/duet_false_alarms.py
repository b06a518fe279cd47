"""Duet A/B sessions simulated on the recorded speed regimes: false alarms and detections.

How often does a session of N cells with equal installs fail (regression, unresolved or
floor) at the end of a session (the product's: duet pairs, ``verdict_duet``'s rule and its
two stages), whatever N? How often is a 10% and a 24% slower candidate flagged? And the old
rule (``ab_pairs.judge_ab`` on the medians of fresh processes, back to back, through the
same end of a session) on the same machine model, for contrast.

The machine model, from ``benchmarks/data/vm-regimes-amd-epyc-2vcpu.json`` (a shared
2-vCPU AMD EPYC KVM that switches between speed regimes within seconds):

- machine speed s(t): the three recorded traces of 0.5-s throughput inside one process
  (AlexNet b8, 85-164 img/s), divided by 150 img/s, block-resampled in blocks of
  ``BLOCK_SLOTS`` x 0.5 s from random traces and offsets, so the regime switches inside the
  traces are kept (and block joins add more of them); constant within each 0.5-s slot;
- a worker does ``ROUND_S`` seconds of work (at speed 1) per round; its round time is the
  time s(t) x its speed takes to get through that work (exactly, across slot boundaries),
  times a round noise of SD ``ROUND_SD`` (log), independent per round;
- each worker process has a speed factor for its whole life, lognormal with SD sigma_p:
  what rounds cannot cancel. Two settings: ``SIGMA_AA`` (the main one), the pooled
  within-regime SD of the log process medians of the 12 recorded A/A pairs (regimes split
  at 120 img/s: 16 fast, 8 slow processes), 0.048; this is an upper bound, as it also holds
  the machine's own wander within a regime over each process's ~1 s, which duet rounds
  cancel (the model's machine alone gives fresh 1-s processes about that spread:
  ``calibration``). ``SIGMA_DUET``: what the seven measured duet pairs imply (per-pair
  medians of round ratios 0.995, 1.003, 1.003, 1.018 on ResNet-50 v2 b2, 1.010, 0.986,
  0.978 on AlexNet b8, same MXNet both sides: pooled pair SD 0.0129, / sqrt 2), 0.009;
- a duet pair: two workers, ``ROUNDS`` rounds each, scheduled A, B, B, A, A, B, ... back
  to back with one running at a time; the pair's estimate is
  ``stats.duet_pair_log_ratio`` (the even and odd rounds' median log ratios, averaged); pairs independent
  (each on its own resampled stretch of s(t));
- the old A/B: each process's figure is the median throughput over ``AB_ROUNDS`` rounds
  (~1 s, as recorded) after ``AB_STARTUP_S`` of start-up; the two processes of a pair back to
  back, order alternated; per-process factor ``SIGMA_DUET`` (the machine already gives these
  processes the recorded A/A spread). A contrast only: judge_ab is slow at 20 cells, so
  that row has fewer sessions.

A session: N cells, the candidate slower (x0.90, x0.76) in the first cell only, the others
equal (the hard case for a correction across cells). Nothing here judges: each simulated
cell's pairs become RunResults (a duet pair: both sides' round times, in the order they
ran, and ``meta["duet"]``; an old-rule pair: two one-round fresh processes) with a
``remeasure`` that simulates more pairs of the same cell, and the session goes through the
product's end of a session (``replay_lib.run_session``: ``Measurer.check_floor``, then
``outcome.finish.end_session``, whose A/B comparator (``outcome/comparators.py``) runs the first stage, the
second stage of the suspects and the final verdicts, at the default options). Failed: the
session failed (a regression, an unresolved slowdown or a floor); flagged: the slower cell
failed. The same judge on recorded pairs instead of this model:
``benchmarks/replay_error_rates.py``.

    .venv/bin/python benchmarks/duet_false_alarms.py                # the full table (>= 500 sessions a row)
    .venv/bin/python benchmarks/duet_false_alarms.py --sessions 100 --cells 1 6 --no-old
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path
from typing import List, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import replay_lib  # noqa: E402

from pytest_mxperf.judge import thresholds  # noqa: E402
from pytest_mxperf.judge import verdict_duet as D  # noqa: E402
from pytest_mxperf.model.measurement import CellMeasurement, RunResult  # noqa: E402
from pytest_mxperf.model.run_facts import Facts  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "vm-regimes-amd-epyc-2vcpu.json"
OUT = ROOT / "benchmarks" / "results" / "duet-false-alarms-2026-11-23.txt"
SEED = 20261123
SLOT = 0.5               # seconds per recorded trace value
NOMINAL = 150.0          # img/s taken as speed 1
BLOCK_SLOTS = 12         # block-resampling length: 6 s
SLOTS = 96               # 48 s of machine per pair (enough for the slowest pair)
ROUND_S = 0.15           # seconds of work per round at speed 1
ROUNDS = 20              # rounds per side in a duet pair
ROUND_SD = 0.02          # per-round noise (log SD)
AB_ROUNDS = 7            # old A/B: rounds of a process's timed part (~1 s)
AB_STARTUP_S = 4.0       # old A/B: start-up before a process's timed part
CHUNK = 20000            # duet pairs simulated at once (bounds the memory to ~100 MB)
MEASURED_DUET = {"resnet50_v2_b2": [0.995, 1.003, 1.003, 1.018], "alexnet_b8": [1.010, 0.986, 0.978]}


def _data() -> dict:
    return json.loads(DATA.read_text())


def traces() -> List[np.ndarray]:
    """The recorded one-process traces as machine speeds (1 = 150 img/s)."""
    return [np.asarray(t, dtype=float) / NOMINAL for t in _data()["one_process_traces_alexnet_b8"]["traces"]]


def _pooled_sd(groups: Sequence[Sequence[float]]) -> float:
    resid = np.concatenate([np.asarray(g) - np.mean(g) for g in groups])
    return float(math.sqrt((resid ** 2).sum() / (len(resid) - len(groups))))


def sigma_aa() -> float:
    """Pooled within-regime SD of the log process medians of the recorded A/A pairs."""
    aa = _data()["aa_pairs_alexnet_b8"]
    v = np.log(np.asarray(aa["A"] + aa["B"], dtype=float))
    fast = v > math.log(120.0)
    return _pooled_sd([v[fast], v[~fast]])


def sigma_duet() -> float:
    """Per-process SD implied by the measured duet pairs: pooled pair SD / sqrt(2)."""
    return _pooled_sd([np.log(x) for x in MEASURED_DUET.values()]) / math.sqrt(2.0)


SIGMA_AA = round(sigma_aa(), 4)
SIGMA_DUET = round(sigma_duet(), 4)


# ----------------------------------------------------------------------------- machine model

def timelines(rng: np.random.Generator, k: int, slots: int = SLOTS) -> np.ndarray:
    """k machine-speed timelines of ``slots`` 0.5-s slots, block-resampled from the traces."""
    tr = traces()
    blocks = -(-slots // BLOCK_SLOTS)
    out = np.empty((k, blocks * BLOCK_SLOTS))
    which = rng.integers(0, len(tr), size=(k, blocks))
    for b in range(blocks):
        for i, t in enumerate(tr):
            rows = np.nonzero(which[:, b] == i)[0]
            start = rng.integers(0, len(t) - BLOCK_SLOTS + 1, size=len(rows))
            out[rows, b * BLOCK_SLOTS:(b + 1) * BLOCK_SLOTS] = t[start[:, None] + np.arange(BLOCK_SLOTS)]
    return out[:, :slots]


def finish_times(speed: np.ndarray, work: np.ndarray) -> np.ndarray:
    """When each of consecutive pieces of ``work`` (k, r) ends on machine ``speed`` (k, slots),
    starting at t = 0: the inverse of the cumulative work W(t) = integral of s, exact across
    slot boundaries. Work that runs past the timeline raises."""
    k, slots = speed.shape
    cum = np.concatenate([np.zeros((k, 1)), np.cumsum(speed * SLOT, axis=1)], axis=1)
    target = np.cumsum(work, axis=1)
    if np.any(target[:, -1] >= cum[:, -1]):
        raise ValueError("timeline too short for the work")
    span = cum[:, -1:].max() + 1.0
    offs = np.arange(k)[:, None] * span
    flat = (cum + offs).ravel()
    idx = np.searchsorted(flat, (target + offs).ravel(), side="right") - 1
    idx = idx.reshape(target.shape) - np.arange(k)[:, None] * (slots + 1)
    rows = np.arange(k)[:, None]
    return idx * SLOT + (target - cum[rows, idx]) / speed[rows, idx]


def _process_factors(rng: np.random.Generator, k: int, sigma_p: float) -> np.ndarray:
    return np.exp(rng.normal(0.0, sigma_p, size=k))


def duet_pair_ratios(rng: np.random.Generator, effects: np.ndarray, sigma_p: float,
                     rounds: int = ROUNDS, seconds: bool = False):
    """One duet pair per entry of ``effects`` (the candidate's speed factor): the pair log
    ratios, or with ``seconds`` the per-round (candidate, reference) times as well.
    Simulated CHUNK pairs at a time (a few KB of arrays per pair)."""
    effects = np.asarray(effects, dtype=float)
    if len(effects) > CHUNK:
        parts = [duet_pair_ratios(rng, effects[i:i + CHUNK], sigma_p, rounds, seconds)
                 for i in range(0, len(effects), CHUNK)]
        if not seconds:
            return np.concatenate(parts)
        return tuple(np.concatenate([p[j] for p in parts]) for j in range(3))
    k = len(effects)
    f_c = _process_factors(rng, k, sigma_p) * effects
    f_r = _process_factors(rng, k, sigma_p)
    cand_first = (np.arange(2 * rounds) // 2) % 2 == 0           # C,R | R,C | C,R ...: A,B,B,A,A,B
    pos = np.arange(2 * rounds)
    first = pos % 2 == 0
    is_cand = np.where(first, cand_first, ~cand_first)
    speed = np.where(is_cand[None, :], f_c[:, None], f_r[:, None])
    noise = np.exp(rng.normal(0.0, ROUND_SD, size=(k, 2 * rounds)))
    work = ROUND_S * noise / speed
    ends = finish_times(timelines(rng, k), work)
    dur = np.diff(np.concatenate([np.zeros((k, 1)), ends], axis=1), axis=1)
    cand = dur[:, is_cand]
    ref = dur[:, ~is_cand]
    logs = np.log(ref / cand)
    ratios = (np.median(logs[:, 0::2], axis=1) + np.median(logs[:, 1::2], axis=1)) / 2  # stats.duet_pair_log_ratio
    return (ratios, cand, ref) if seconds else ratios


def ab_process_pairs(rng: np.random.Generator, effects: np.ndarray, sigma_p: float):
    """Old A/B: one pair of fresh processes per entry of ``effects``, back to back, order
    alternated; each figure the median throughput (img/s) over AB_ROUNDS rounds after
    AB_STARTUP_S of start-up. Returns (candidate figures, reference figures)."""
    effects = np.asarray(effects, dtype=float)
    k = len(effects)
    f_c = _process_factors(rng, k, sigma_p) * effects
    f_r = _process_factors(rng, k, sigma_p)
    cand_first = np.arange(k) % 2 == 0
    f1 = np.where(cand_first, f_c, f_r)
    f2 = np.where(cand_first, f_r, f_c)
    noise = np.exp(rng.normal(0.0, ROUND_SD, size=(k, 2 * AB_ROUNDS)))
    # start-up of the first process, its rounds, start-up of the second, its rounds (in work
    # units: the start-up is taken as work at speed 1, as its time moves with the machine too)
    startup = np.full((k, 1), AB_STARTUP_S)
    work = np.concatenate([startup, ROUND_S * noise[:, :AB_ROUNDS] / f1[:, None],
                           startup, ROUND_S * noise[:, AB_ROUNDS:] / f2[:, None]], axis=1)
    ends = finish_times(timelines(rng, k), work)
    dur = np.diff(np.concatenate([np.zeros((k, 1)), ends], axis=1), axis=1)
    fig1 = NOMINAL * ROUND_S / np.median(dur[:, 1:1 + AB_ROUNDS], axis=1)
    fig2 = NOMINAL * ROUND_S / np.median(dur[:, 2 + AB_ROUNDS:], axis=1)
    return np.where(cand_first, fig1, fig2), np.where(cand_first, fig2, fig1)


# ----------------------------------------------------------------------------- sessions

#: the cell the traces were recorded on; its floor is the recording machine's (a 2-vCPU AMD EPYC)
WORKLOAD = Workload("alexnet", batch_size=8)
MACHINE = replay_lib.Corpus("regime model", "amd-epyc-2vcpu", "AMD EPYC", 2, [], str(DATA.relative_to(ROOT)))


def _effects(n_cells: int, effect: float) -> np.ndarray:
    e = np.ones(n_cells)
    e[0] = effect
    return e


def duet_measurement(w: Workload, cand: np.ndarray, ref: np.ndarray) -> CellMeasurement:
    """Simulated duet pairs of one cell as the duet gives them: each side's round times
    (``cand``, ``ref``: one row a pair) in the order they ran, in seconds a batch of ``w``
    (speed 1 is NOMINAL img/s), and ``meta["duet"]``."""
    per_batch = w.total_batch / (NOMINAL * ROUND_S)
    runs, refs = [], []
    for i in range(len(cand)):
        for side, times, out in (("candidate", cand[i], runs), ("reference", ref[i], refs)):
            out.append(RunResult(w, "ok", batches_per_round=1, round_seconds=(times * per_batch).tolist(),
                                 meta=_duet_facts(i, side, len(times)), wall_seconds=float(times.sum() * 2)))
    return CellMeasurement(w, runs, refs)


@functools.lru_cache(maxsize=None)
def _duet_facts(pair: int, side: str, rounds: int) -> Facts:
    """A duet side's facts, made once per (pair, side, rounds): Facts is immutable and copies
    what it is given, and a study makes the same few hundred of them for a quarter of a
    million processes (copying each was an eighth of the largest study's time)."""
    return Facts({"duet": {"pair": pair, "side": side, "rounds": rounds,
                           "ran_first": (side == "candidate") == (pair % 2 == 0)}})


def duet_cell(rng: np.random.Generator, w: Workload, effect: float, sigma_p: float, n: int) -> CellMeasurement:
    """n simulated duet pairs of one cell (``duet_measurement``)."""
    _, cand, ref = duet_pair_ratios(rng, np.full(n, effect), sigma_p, seconds=True)
    return duet_measurement(w, cand, ref)


def process_pair_cell(rng: np.random.Generator, w: Workload, effect: float, sigma_p: float, n: int) -> CellMeasurement:
    """n simulated pairs of fresh processes back to back (the old A/B): each process one
    figure (img/s), kept as one round that gives exactly it; no ``meta["duet"]``."""
    cand, ref = ab_process_pairs(rng, np.full(n, effect), sigma_p)

    def run(v):
        return RunResult(w, "ok", batches_per_round=1, round_seconds=[w.total_batch / float(v)])
    return CellMeasurement(w, [run(v) for v in cand], [run(v) for v in ref])


def _sessions(cell, n_cells: int, effect: float, sigma_p: float, sessions: int, rng: np.random.Generator,
              duet: bool) -> List[replay_lib.SessionResult]:
    out = []
    eff = _effects(n_cells, effect)
    n1 = D.STAGE1_PAIRS
    first = None
    if duet:   # every session's first stage simulated at once (a second stage, pair by pair call)
        _, cand, ref = duet_pair_ratios(rng, np.tile(np.repeat(eff, n1), sessions), sigma_p, seconds=True)
        first = (cand.reshape(sessions, n_cells, n1, -1), ref.reshape(sessions, n_cells, n1, -1))
    for s in range(sessions):
        measures = []
        for c in range(n_cells):
            w = replay_lib.replica(WORKLOAD, c)
            pre = [(first[0][s, c], first[1][s, c])] if first is not None else []

            def measure(n, paired=True, w=w, e=eff[c], pre=pre):
                if pre and len(pre[0][0]) == n:
                    return duet_measurement(w, *pre.pop())
                return cell(rng, w, e, sigma_p, n)
            measures.append(measure)
        out.append(replay_lib.run_session(MACHINE, measures, ab=True, duet=[duet] * n_cells))
    return out


def _tally(results: List[replay_lib.SessionResult], effect: float) -> dict:
    n = len(results)
    failing = set(thresholds.FAILING) | {"floor"}
    row = {"sessions": n, "failed": sum(s.failed for s in results) / n,
           "regression": sum("regression" in s.kinds for s in results) / n,
           "pairs_per_cell": sum(s.units for s in results) / sum(len(s.cell_kinds) for s in results)}
    if effect != 1.0:
        row["flagged"] = sum(s.caught for s in results) / n
        row["flagged_regression"] = sum(s.changed_kind == "regression" for s in results) / n
        row["others_failed"] = sum(any(k in failing for k in s.cell_kinds[1:]) for s in results) / n
    return row


def duet_sessions(n_cells: int, effect: float, sigma_p: float, sessions: int, seed: int = SEED) -> dict:
    """``sessions`` duet sessions of ``n_cells`` cells through the product's end of a session."""
    rng = np.random.default_rng([seed, n_cells, round(effect * 1000), round(sigma_p * 1e5), 1])
    return _tally(_sessions(duet_cell, n_cells, effect, sigma_p, sessions, rng, True), effect)


def ab_sessions(n_cells: int, effect: float, sigma_p: float, sessions: int, seed: int = SEED) -> dict:
    """The same sessions with the old A/B: fresh process pairs, ``ab_pairs.judge_ab`` through
    the same end of a session (stats.pairs_needed pairs, as many again for suspects)."""
    rng = np.random.default_rng([seed, n_cells, round(effect * 1000), round(sigma_p * 1e5), 2])
    return _tally(_sessions(process_pair_cell, n_cells, effect, sigma_p, sessions, rng, False), effect)


# ----------------------------------------------------------------------------- report

def calibration(seed: int = SEED, k: int = 4000) -> str:
    """How fresh ~1-s processes look on the machine model alone (no per-process factor),
    against the recorded A/A processes: within-regime spread and share in the slow regime."""
    rng = np.random.default_rng([seed, 0])
    cand, ref = ab_process_pairs(rng, np.ones(k), 0.0)
    v = np.log(np.concatenate([cand, ref]))
    fast = v > math.log(120.0)
    aa = _data()["aa_pairs_alexnet_b8"]
    rec = np.asarray(aa["A"] + aa["B"])
    return (f"machine model alone (sigma_p 0): fresh ~1-s processes have a within-regime SD of "
            f"{_pooled_sd([v[fast], v[~fast]]):.3f} (log) and {100 * (~fast).mean():.0f}% in the slow regime; "
            f"recorded A/A: {SIGMA_AA:.3f} and {100 * (rec <= 120).mean():.0f}%")


def _fmt(row: dict) -> str:
    txt = (f"failed {100 * row['failed']:5.1f}%  (regression {100 * row['regression']:5.1f}%)")
    if "flagged" in row:
        txt = (f"slower cell flagged {100 * row['flagged']:5.1f}% (as regression {100 * row['flagged_regression']:5.1f}%)"
               f"  equal cells failed {100 * row['others_failed']:4.1f}%")
    return f"{txt}  pairs/cell {row['pairs_per_cell']:5.2f}  sessions {row['sessions']}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--old-sessions", type=int, default=500)
    ap.add_argument("--old-sessions-20", type=int, default=100,
                    help="old rule, sessions of 20 cells or more (slow: the fast-end bounds of every cell)")
    ap.add_argument("--cells", type=int, nargs="+", default=[1, 6, 20, 50])
    ap.add_argument("--old-cells", type=int, nargs="+", default=[1, 6, 20])
    ap.add_argument("--effects", type=float, nargs="+", default=[1.0, 0.90, 0.76])
    ap.add_argument("--no-old", action="store_true", help="skip the old rule (judge_ab)")
    ap.add_argument("--out", type=Path, default=None, help=f"write the table here too (default: print only; "
                    f"the committed run wrote {OUT.relative_to(ROOT)})")
    a = ap.parse_args(argv)
    t0 = time.time()
    lines = [f"duet A/B sessions simulated on {DATA.name} (seed {SEED}); "
             f"{ROUNDS} rounds of {ROUND_S} s per side per pair, round noise {ROUND_SD}, "
             f"machine speed block-resampled in {BLOCK_SLOTS * SLOT:g}-s blocks from the 0.5-s traces",
             "judged by the product: each session through outcome.finish.end_session (the A/B comparator: "
             f"stage 1 {D.STAGE1_PAIRS} duet pairs a cell, the suspects' second stage, the final verdicts; default "
             f"options: min effect {thresholds.MIN_EFFECT:g}, q {thresholds.FDR_Q:g}), floors by Measurer.check_floor",
             "the slower candidate (x0.90, x0.76) in one cell of N, the others equal; failed: a regression, "
             "unresolved or floor anywhere; flagged: the slower cell failed; pairs/cell: all stages",
             ""]
    lines += [calibration(), "(so the A/A spread within a regime is mostly the machine's own wander, which duet rounds "
              "cancel: sigma_p = that spread is a stress bound; the measured duet pairs say sigma_p ~ "
              f"{SIGMA_DUET:.3f})", ""]
    settings = [("sigma_p %.4f (A/A within regime, upper bound)" % SIGMA_AA, SIGMA_AA),
                ("sigma_p %.4f (as the measured duet pairs)" % SIGMA_DUET, SIGMA_DUET)]
    for name, sigma in settings:
        lines.append(f"duet, per-process factor {name}:")
        for n in a.cells:
            for e in a.effects:
                row = duet_sessions(n, e, sigma, a.sessions)
                lines.append(f"  N={n:<3d} x{e:.2f}  " + _fmt(row))
                print(lines[-1], flush=True)
        lines.append("")
    if not a.no_old:
        lines.append(f"old rule (fresh ~1-s process pairs, judged by the same end of a session: ab_pairs.judge_ab, "
                     f"stats.pairs_needed pairs + as many again), per-process factor {settings[1][0]} "
                     "(the machine model alone already gives "
                     "these processes the recorded A/A spread):")
        for n in a.old_cells:
            for e in a.effects:
                row = ab_sessions(n, e, SIGMA_DUET, a.old_sessions if n < 20 else a.old_sessions_20)
                lines.append(f"  N={n:<3d} x{e:.2f}  " + _fmt(row))
                print(lines[-1], flush=True)
        lines.append("")
    lines.append(f"took {time.time() - t0:.0f} s")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
