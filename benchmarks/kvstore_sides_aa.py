"""Issue 76, part 3: do the two sides of a baseline's paired path differ for the kvstore cells? An
A/A of duet pairs (``duet.run_pair`` of the commbench worker, with perf_tests/test_kvstore.py's spec) of the current install (this
interpreter) against (a) its recorded setup, the venv the suite rebuilt, run with each cell's
recorded variables (``Baseline.recorded_env``, laid over this environment as
``scheduler.Side.environ`` does), and (b) this same interpreter and environment on both sides;
the two ways alternate round by round, the candidate first in odd rounds. Per cell and way: the
pairs' mean log ratio (``stats.duet_pair_log_ratio``, the product's) exponentiated, its 95%
t interval and the spread; then (a) against (b) by Welch's test. A bias that (a) shows and (b)
does not is the setup's, not the duet's.

usage: .venv/bin/python benchmarks/kvstore_sides_aa.py BASELINE.json REBUILT_PYTHON ROUNDS OUT.json [WAYS [CELL]]
  WAYS: two of rebuilt, same, swapped (the rebuilt setup as the candidate, this interpreter the reference),
        evicted (as rebuilt, both installs' native libraries dropped from the page cache before each pair:
        ``drop_installs`` below, posix_fadvise DONTNEED between pairs; what of each libmxnet.so stayed resident
        is recorded): whether the pages an install's code runs from make the side's lean);
  CELL: only the kvstore cells whose key holds it
"""

import functools
import json
import math
import os
import statistics
import sys
import time
from typing import Iterable, Optional, Tuple

from scipy import stats as sstats

from pytest_mxperf.measure import duet
from pytest_mxperf.measure.scheduler import Side
from pytest_mxperf.proc import distributions
from pytest_mxperf.model import stats
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.store.baselines import Baseline
from pytest_mxperf.workers import commbench

KINDS = ("kvstore",)


_WHERE_SCRIPT = r"""
import importlib.util, json, os, sys
out = []
for name in ("mxnet", "numpy"):
    spec = importlib.util.find_spec(name)   # finds the package without importing it
    for d in (spec.submodule_search_locations or []) if spec else []:
        out.append(d)
        libs = os.path.join(os.path.dirname(d), name + ".libs")
        if os.path.isdir(libs):
            out.append(libs)
json.dump(out, sys.stdout)
"""


def _is_library(name: str) -> bool:
    return name.endswith(".so") or ".so." in name


@functools.lru_cache(maxsize=16)
def native_libraries(python: str) -> Tuple[str, ...]:
    """The shared libraries ``python``'s MXNet and numpy load (their packages' folders walked,
    never imported); () when it has neither or cannot be asked."""
    try:
        folders = distributions._ask(python, _WHERE_SCRIPT, "say where MXNet is", distributions.PROBE_TIMEOUT_S)
    except distributions.InstallError:
        return ()
    found = []
    for top in folders if isinstance(folders, list) else []:
        for root, _, files in os.walk(str(top)):
            found.extend(os.path.join(root, f) for f in sorted(files) if _is_library(f))
    return tuple(sorted(set(found)))


def drop(paths: Iterable[str]) -> int:
    """Drops ``paths``' pages that no process maps from the page cache; the bytes asked for
    (a file that cannot be opened is skipped: it is not in the cache to matter)."""
    asked = 0
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            asked += os.fstat(fd).st_size
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
        finally:
            os.close(fd)
    return asked


def drop_installs(*pythons: Optional[str]) -> int:
    """``drop`` for the native libraries of each interpreter's install (None: this one's)."""
    return drop(lib for py in dict.fromkeys(p or sys.executable for p in pythons) for lib in native_libraries(py))

MODULE = "pytest_mxperf.workers.commbench"


def spec_of(w):
    """The commbench spec perf_tests/test_kvstore.py's ``_comm`` gives the cell in the default selection
    (the wide MLP's compute measured after the rounds, as its test asks)."""
    wide = w.model.startswith("wide_mlp_")
    network = {"wide_mlp": commbench.WIDE_MLP_SCALED} if wide else {"model": w.model}
    return {"network": network, "contexts": list(w.contexts), "kvstore": w.kvstore, "batch_size": w.batch_size,
            "rounds": 8, "compute": wide, "compute_rounds": 6}


def resident(python):
    """Bytes of the install's libmxnet.so in the page cache (util-linux's fincore), or None."""
    import subprocess
    lib = [p for p in native_libraries(python) if p.endswith("/libmxnet.so")]
    if not lib:
        return None
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "-o", "RES", lib[0]], capture_output=True, text=True)
    return int(out.stdout.split()[0]) if out.returncode == 0 and out.stdout.strip() else None


def main(baseline_path, rebuilt, rounds, out_path, ways=("rebuilt", "same"), only=""):
    baseline = Baseline.load(baseline_path)
    cells = [Workload.from_dict(baseline.workload(k)) for k in sorted(baseline.keys())
             if k.split("/")[0] in KINDS and only in k]
    here = dict(os.environ)
    py = sys.executable
    rows = []
    for i in range(rounds):
        first = bool(i % 2)
        for way in (ways if i % 2 == 0 else ways[::-1]):
            for w in cells:
                setup = Side(rebuilt, tuple(sorted(baseline.recorded_env(w.key()).items())))
                cand, ref = {"rebuilt": (Side(py), setup), "same": (Side(py), Side(py)), "evicted": (Side(py), setup),
                             "swapped": (setup, Side(py))}[way]  # swapped: the rebuilt setup as the candidate
                kept = None
                if way == "evicted":
                    drop_installs(py, rebuilt)
                    kept = [resident(py), resident(rebuilt)]
                t0 = time.perf_counter()
                c, r = duet.run_pair(w, candidate=cand.python, reference=ref.python, seed=i, candidate_first=first,
                                     env=cand.environ(here), reference_env=ref.environ(here), timeout=600,
                                     module=MODULE, spec=spec_of(w))
                ok = c.ok and r.ok
                rows.append({"round": i, "way": way, "cell": w.key(), "wall": time.perf_counter() - t0,
                             "log_ratio": stats.duet_pair_log_ratio(c.seconds_per_batch, r.seconds_per_batch)
                             if ok else None, "status": [c.status, r.status],
                             "message": None if ok else (c.message or r.message), "resident_after_drop": kept,
                             "env_differs": sorted(k for k in set(c.env) | set(r.env) if c.env.get(k) != r.env.get(k))})
                print(f"round {i} {way} {w.key()[:40]}: {rows[-1]['log_ratio']} ({rows[-1]['wall']:.1f} s)", flush=True)
    summary = []
    for w in cells:
        got = {way: [x["log_ratio"] for x in rows if x["cell"] == w.key() and x["way"] == way
                     and x["log_ratio"] is not None] for way in ways}
        row = {"cell": w.key()}
        for way, v in got.items():
            m, s = statistics.fmean(v), statistics.stdev(v)
            h = sstats.t.ppf(0.975, len(v) - 1) * s / math.sqrt(len(v))
            row[way] = {"pairs": len(v), "ratio": math.exp(m), "interval": [math.exp(m - h), math.exp(m + h)],
                        "sd_log": s}
        row["welch_p"] = float(sstats.ttest_ind(got[ways[0]], got[ways[1]], equal_var=False).pvalue)
        summary.append(row)
    with open(out_path, "w") as fh:
        json.dump({"rounds": rounds, "rebuilt": rebuilt, "ways": list(ways), "rows": rows, "summary": summary}, fh,
                  indent=1)
    print(f"{'cell':66s} {'way':8s} pairs  cand/ref  95% interval      sd")
    for s in summary:
        for way in ways:
            x = s[way]
            print(f"{s['cell'][:66]:66s} {way:8s} {x['pairs']:5d}  {x['ratio']:.3f}  [{x['interval'][0]:.3f}, "
                  f"{x['interval'][1]:.3f}]  {100 * x['sd_log']:4.1f}%")
        print(f"{'':66s} {ways[0]} against {ways[1]}: Welch p = {s['welch_p']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4],
         tuple(sys.argv[5].split(",")) if len(sys.argv) > 5 else ("rebuilt", "same"),
         sys.argv[6] if len(sys.argv) > 6 else "")
