"""Issue 75's sessions with real MXNet and the real machine probe, on the machine at hand (run
it alone: the figures are the machine's). One baseline is recorded here, then baselines are
built from it as a host 25% faster of the same machine type would have recorded them
(``faster_baseline``), each with the same MXNet release:

* ``old``: old-format (no install, no probes, no measuring method);
* ``probes``: current, its recorded probe readings 25% faster too;
* ``figures``: current, its figures alone 25% faster;

and each is judged twice: by this interpreter's MXNet (the same release: what moved is the
"host"), and by a candidate that really is slower (oneDNN's fusion off in its own interpreter,
``MXNET_SUBGRAPH_BACKEND=NONE exec python``). The recorded setup each session settles against
is this interpreter, put in the sessions' venv cache as a first build leaves it. Prints one row
a session: exit status, the cell's verdict and its reason, the session's minutes.

    .venv/bin/python benchmarks/slower_host_sessions.py --out benchmarks/results/slower-host-sessions-2026-12-02.txt

``tests/test_slower_host.py`` runs the same sessions with stand-in workers and a given machine
state, the same on any machine, in the test command.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from worker_start import cpu_model, report  # noqa: E402

#: a cell whose oneDNN fusions (convolution with batch norm and activation) carry a fifth of its
#: speed and whose processes agree within a few percent (on a 2-vCPU Xeon, family 6 model 207:
#: 53.4 img/s, processes within 1.5%; 43.0 with fusion off)
MODEL, BATCH = "inception-bn", 4
CELLS = f"""
import pytest

@pytest.mark.mxperf_grid(models=({MODEL!r},), batch_sizes=({BATCH},))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""
KEY = f"score/{MODEL}/b{BATCH}/cpu:0/float32/threads=auto"
FACTOR = 1.25
BASELINES = (("old", dict(old=True)), ("probes", dict(probes_of=(KEY,))), ("figures", {}))


def faster_baseline(doc, name, factor=FACTOR, probes_of=(), old=False):
    """The baseline document ``name`` built from a recorded one (``doc``) as a host ``factor``
    faster would have recorded it: each cell's processes at its recorded median x ``factor``
    (/ ``factor`` for a figure where less is better: ms, s/batch), a
    fixed 1% apart (the resolution, worked out again as the file loads, then resolves a change
    of a few percent: a one-session baseline's comes from its processes' spread, which one
    outlier process of six made 28% on a shared VM, wider than the change these sessions are
    about); the cells whose keys are in ``probes_of`` with their machine probe readings x
    ``factor`` too; ``old``: as recorded before installs, probes and the measuring method were
    kept (no install, requirement, probes, states or suite)."""
    from pytest_mxperf.model.measurement import METRICS
    doc = copy.deepcopy(doc)
    doc["machine_id"] = name
    for key, cell in doc["cells"].items():
        for rec in cell["history"]:
            metric = METRICS.get(rec.get("metric"))
            # faster: more img/s, fewer ms or s/batch
            f = factor if metric is None or metric.higher_is_better else 1.0 / factor
            n = len(rec["process_medians"])
            median = sorted(rec["process_medians"])[n // 2]
            rec["process_medians"] = [median * f * (1 + 0.002 * (i - (n - 1) / 2)) for i in range(n)]
            rec["median"] = median * f
            rec.pop("resolution", None)
            for ms in (rec.get("process_probes") or []) if key in probes_of else []:
                for part in ("probe_before", "probe_after"):
                    for fig in ("gemm_gflops", "stream_gbps"):
                        if isinstance((ms.get(part) or {}).get(fig), (int, float)):
                            ms[part][fig] *= factor
            if old:
                for field in ("install", "mxnet_requirement", "process_probes", "process_states", "suite"):
                    rec.pop(field, None)
    if old:
        doc.pop("mxnet_requirement", None)
    return doc


def cached_setup(cache: Path, baseline, python: str) -> None:
    """``python`` where a session against ``baseline`` finds the setup it recorded (its
    requirement, or the wheel that fits its recorded release, with its numpy) in the venv cache
    ``cache``: what a first build leaves there."""
    from pytest_mxperf.command_line import _fitted_requirement
    from pytest_mxperf.proc import distributions, installs
    spec = baseline.recorded_requirement() or _fitted_requirement(baseline)[0]
    release = baseline.recorded_release() or {}
    numpy = (baseline.recorded_install() or {}).get("numpy_version") or release.get("numpy_version")
    reqs = installs.requirements_for(spec, installs._pinned(distributions.companion_requirements(python),
                                                           {"numpy": numpy} if numpy else {}))
    root = cache / "venvs" / installs.venv_slug(spec, reqs)
    exe = installs.venv_python(root / "venv")
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.unlink(missing_ok=True)
    exe.write_text(f'#!/bin/sh\nexec {python} "$@"\n')
    exe.chmod(0o755)
    (root / installs.COMPLETE_MARKER).write_text(json.dumps({"spec": spec, "requirements": reqs}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="also write the table here")
    args = ap.parse_args()
    from pytest_mxperf.store.baselines import Baseline
    base = Path(tempfile.mkdtemp(prefix="slower-host-"))
    project, cache = base / "project", base / "cache"
    project.mkdir()
    (project / "test_cells.py").write_text(CELLS)
    env = dict(os.environ, HOME=str(base), MXPERF_CACHE_DIR=str(cache), PIP_NO_INDEX="1",
               PIP_INDEX_URL="http://127.0.0.1:9/simple")
    bl = project / "bl"
    lines = [f"# issue 75's sessions, real MXNet and probes: {MODEL} b{BATCH}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"# CPU: {cpu_model()} ({platform.machine()}), {os.cpu_count()} vCPUs; python "
             f"{platform.python_version()}; {sys.executable}",
             f"# {' '.join(sys.argv)}"]

    def session(*a):
        t0 = time.time()
        r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "cpu",
                            "--perf-baselines-dir", str(bl), *a], cwd=project, env=env, capture_output=True, text=True)
        return r, (time.time() - t0) / 60

    r, minutes = session("--perf-machine", "here", "--perf-update-baselines")
    if r.returncode != 0:
        sys.exit(f"the recording failed (exit {r.returncode}): {r.stdout[-2000:]}")
    doc = json.loads((bl / "here.json").read_text())
    rec = doc["cells"][KEY]["history"][-1]
    lines.append(f"recorded: {KEY}: processes {[round(v, 2) for v in rec['process_medians']]}, "
                 f"{len(rec.get('process_probes') or [])} probe records, {minutes:.1f} min")
    for name, kw in BASELINES:
        (bl / f"{name}.json").write_text(json.dumps(faster_baseline(doc, name, **kw)))
        cached_setup(cache, Baseline.load(bl / f"{name}.json"), sys.executable)
    off = base / "python-fusion-off"
    off.write_text(f'#!/bin/sh\nMXNET_SUBGRAPH_BACKEND=NONE exec {sys.executable} "$@"\n')
    off.chmod(0o755)
    lines.append("baseline  candidate         exit  kind             min   verdict")
    for name, _ in BASELINES:
        for label, python in (("this MXNet", sys.executable), ("fusion off", str(off))):
            rep = project / f"rep-{name}-{label.replace(' ', '-')}"
            r, minutes = session("--perf-machine", name, "--perf-python", python, "--perf-report", str(rep))
            verdict = {}
            if (rep / "results.json").is_file():
                verdict = next((c["verdict"] for c in json.loads((rep / "results.json").read_text())["records"]
                                if c["key"] == KEY), {}) or {}
            first = next((x for x in r.stdout.splitlines() if x.startswith("mxperf: ") and "measuring test" in x), "")
            lines.append(f"{name:<9} {label:<17} {r.returncode:<5} {verdict.get('kind', '-'):<16} {minutes:4.1f}  "
                         f"{verdict.get('reason', '')}")
            lines.append(f"{'':<9} first line: {first}")
    report(lines, args.out)


if __name__ == "__main__":
    main()
