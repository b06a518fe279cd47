"""Replay: the verdict on real per-process medians measured on this (shared, noisy) machine.

``benchmarks/data/replay-*.json`` holds per-process medians of unchanged cells, measured by
``benchmarks/collect_replay_data.py`` in fresh worker processes, interleaved, while other
engineers were measuring on the same 2 cores (so many processes were CPU-starved: that is
the noise the gate must live with); ``replay-*-quiet.json`` holds the same cells measured
later on the same machine with nothing else running. Each resample is one simulated session: for every cell,
draw a "baseline" set of BASE processes and a disjoint "current" set of CUR processes
without replacement, judge all cells together (Benjamini-Hochberg across them), and, like
the plugin, re-measure suspects: add processes from the rest of the pool until the current
side has CONFIRM_PROCESSES, then judge that cell again.

* false alarms: unchanged data, a session with any "regression" is a false alarm; the rate
  must be at or below verdict.FDR_Q (under the global null BH controls exactly this).
* detection: the current draw scaled by 0.76 (the measured effect of
  MXNET_SUBGRAPH_BACKEND=NONE on ResNet-50) must end as "regression" in >= 95% of resamples.
"""

import json
import random
from pathlib import Path

import pytest

from pytest_mxperf import verdict as V

DATA_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
FILES = sorted(DATA_DIR.glob("replay-*.json"))
RESAMPLES = 1000
SEED = 20261122
BASE, CUR = 5, 5
SLOWDOWN = 0.76

pytestmark = pytest.mark.skipif(not FILES, reason="no replay data (run benchmarks/collect_replay_data.py)")


def load_pool(path):
    data = json.loads(path.read_text())
    pools = {}
    for key, cell in data["cells"].items():
        procs = [p for p in cell["processes"] if p.get("status") == "ok" and p.get("median")]
        pools[key] = [(p["median"], V.cpu_share({"cpu_utilization": p.get("cpu_utilization"),
                                                 "threads": {"openmp": p.get("openmp_threads")},
                                                 "env_defaults_applied": p.get("env_defaults_applied") or {}}))
                      for p in procs]
    return pools


def simulate(pools, scale, rng, resamples=RESAMPLES, confirm=True):
    """Return {"session_false": n sessions with a regression, "per_cell": {key: {kind: n}}}."""
    per_cell = {k: {} for k in pools}
    sessions_with_regression = 0
    for _ in range(resamples):
        draws, items = {}, {}
        for key, pool in pools.items():
            idx = list(range(len(pool)))
            rng.shuffle(idx)
            b, c, rest = idx[:BASE], idx[BASE:BASE + CUR], idx[BASE + CUR:]
            draws[key] = (b, c, rest)
            items[key] = ([pool[i][0] * scale for i in c], [pool[i][0] for i in b],
                          [pool[i][1] for i in c], [pool[i][1] for i in b])
        verdicts = V.judge_session(items)
        for key, v in verdicts.items():
            if v.kind == "suspect" and confirm:
                b, c, rest = draws[key]
                more = c + rest[:max(0, V.CONFIRM_PROCESSES - len(c))]
                pool = pools[key]
                v = V.judge([pool[i][0] * scale for i in more], [pool[i][0] for i in b],
                            current_cpu=[pool[i][1] for i in more], baseline_cpu=[pool[i][1] for i in b])
                verdicts[key] = v
            per_cell[key][v.kind] = per_cell[key].get(v.kind, 0) + 1
        sessions_with_regression += any(v.kind == "regression" for v in verdicts.values())
    return {"session_false": sessions_with_regression, "per_cell": per_cell}


@pytest.fixture(scope="module", params=FILES, ids=lambda p: p.stem)
def pools(request):
    pools = load_pool(request.param)
    assert all(len(p) >= 12 for p in pools.values()), "need >= 12 processes per cell"
    return pools


def _rates(counts):
    n = sum(counts.values())
    return {k: round(v / n, 3) for k, v in sorted(counts.items())}


def test_false_alarm_rate_at_or_below_fdr(pools):
    out = simulate(pools, 1.0, random.Random(SEED))
    rate = out["session_false"] / RESAMPLES
    print(f"\nfalse alarms: {rate:.3f} of sessions ({len(pools)} cells each); per cell:",
          {k.split('/')[1]: _rates(c) for k, c in out["per_cell"].items()})
    assert rate <= V.FDR_Q


def test_slowdown_is_flagged(pools):
    """With CPU-starved processes in the pool, x0.76 must never pass silently: it ends as
    "regression", or as "suspect" when the verdict could not trust the comparison (machine
    busy); never "unchanged" or "improvement" in more than 5% of sessions."""
    out = simulate(pools, SLOWDOWN, random.Random(SEED + 1))
    rates = {k: _rates(c) for k, c in out["per_cell"].items()}
    print("\nx0.76, all processes, per cell:", {k.split('/')[1]: r for k, r in rates.items()})
    for key, r in rates.items():
        assert r.get("regression", 0) + r.get("suspect", 0) >= 0.95, (key, r)


def clean_pools(pools):
    """Only the processes that got >= STARVED_RATIO of the best CPU share of their cell."""
    out = {}
    for key, pool in pools.items():
        best = max(s for _, s in pool if s is not None)
        out[key] = [(m, s) for m, s in pool if s is None or s >= V.STARVED_RATIO * best]
    return out


def test_slowdown_is_detected_as_regression_on_unstarved_processes(pools):
    """The same effect measured by processes that got their CPUs: a confirmed regression
    (single-cell verdicts, k vs k processes without replacement, k = min(5, n // 2))."""
    rng = random.Random(SEED + 2)
    clean = clean_pools(pools)
    rates = {}
    for key, pool in clean.items():
        k = min(BASE, len(pool) // 2)
        if k < 3:
            continue  # 3 vs 3 is the smallest split whose exact U test can reach p = 0.05
        counts = {}
        for _ in range(RESAMPLES):
            idx = rng.sample(range(len(pool)), 2 * k)
            v = V.judge([pool[i][0] * SLOWDOWN for i in idx[k:]], [pool[i][0] for i in idx[:k]],
                        current_cpu=[pool[i][1] for i in idx[k:]], baseline_cpu=[pool[i][1] for i in idx[:k]])
            counts[v.kind] = counts.get(v.kind, 0) + 1
        rates[key] = (k, len(pool), _rates(counts))
    print("\nx0.76, unstarved processes only (k per side, pool size, rates):",
          {k.split('/')[1]: r for k, r in rates.items()})
    if not rates:
        pytest.skip("fewer than 6 unstarved processes per cell in the replay data")
    for key, (k, n, r) in rates.items():
        assert r.get("regression", 0) >= 0.95, (key, k, n, r)


def test_slowdown_is_a_regression_when_no_process_was_starved(pools):
    """On data where every process got its CPUs (a quiet machine), x0.76 must end as a
    confirmed "regression" (not merely "suspect") in >= 95% of simulated sessions."""
    if clean_pools(pools) != pools or any(s is None for p in pools.values() for _, s in p):
        pytest.skip("this data set has CPU-starved processes; see the starved-data tests")
    out = simulate(pools, SLOWDOWN, random.Random(SEED + 3))
    rates = {k: _rates(c) for k, c in out["per_cell"].items()}
    print("\nx0.76, quiet data, per cell:", {k.split('/')[1]: r for k, r in rates.items()})
    for key, r in rates.items():
        assert r.get("regression", 0) >= 0.95, (key, r)
