"""Stand-ins the tests put in place of a worker process."""

import contextlib
import json
import os
import sys
from pathlib import Path
from unittest import mock

# The libraries a session imports, loaded in the test process when the tests are collected,
# before any in-process session (``session``): pytester puts sys.modules back as it was after
# each session and each test, and a library with compiled parts does not survive a second
# import in one process (numpy's sentinels, matplotlib's classes: its GridSpec of one copy is
# not the other's SubplotSpec)
import sqlite3  # noqa: F401

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402,F401
import matplotlib.ticker  # noqa: E402,F401
import numpy  # noqa: E402,F401
import scipy.special  # noqa: E402,F401
import scipy.stats  # noqa: E402,F401

try:
    import psycopg  # noqa: F401
except ImportError:  # the PostgreSQL store's tests skip without it
    pass

from pytest_mxperf.measure import profiling


#: the stand-in worker (a Python whose MXNet is a stand-in, configured by MXPERF_STUB)
STUB = Path(__file__).resolve().parent / "stub_worker.py"


def stub_python(path, *, site: bool = False, **config) -> str:
    """Write at ``path`` an executable that acts as a Python with a stand-in MXNet
    (tests/stub_worker.py) configured by ``config``; returns its path. The stand-in needs
    nothing of site-packages (the session puts the package on its PYTHONPATH, as for any
    worker): it starts without the ``site`` module (``-S``: 17 of its 26 ms of CPU here, over
    a thousand stand-ins a test run), unless ``site`` (a test that watches children through
    a ``sitecustomize`` of its own)."""
    path = Path(path)
    flag = "" if site else " -S"
    path.write_text("#!/bin/sh\n"
                    f"MXPERF_STUB='{json.dumps(config)}' exec {sys.executable}{flag} {STUB} \"$@\"\n")
    os.chmod(path, 0o755)
    return str(path)


@contextlib.contextmanager
def no_profile_worker():
    """Sessions replayed from recorded figures have no MXNet worker to profile their failing
    cells: the profile worker answers "unavailable", as it does where MXNet cannot run one."""
    def unavailable(*args, **kwargs):
        return {"status": "unavailable", "message": "replayed session: no worker to profile", "operators": []}
    with mock.patch.object(profiling, "run_profile", unavailable):
        yield


def session(pytester, *args):
    """A pytest session of the test's project with the plugin, in this process (pytest.main,
    as pytester runs it: about 0.4 s where a fresh interpreter takes 2.3 s, most of it
    importing scipy), except where a stand-in NVML is in use: that reaches only the
    processes started after it (``fake_nvml.use_in_subprocesses``), so the session is one;
    and where xdist is asked for (``-n``: its workers would be this process's). The libraries
    a session imports are loaded when this module is (above)."""
    import fake_nvml
    if fake_nvml.FAKE_ENV in os.environ or "-n" in args:
        return pytester.runpytest_subprocess(*args)
    return pytester.runpytest_inprocess(*args)


def run_box(pytester, *args):
    """A pytest session of stand-ins (``session``) on the machine "box": no machine probe,
    baselines in the test's own directory."""
    return session(pytester, "-p", "no:cacheprovider", "--perf-no-probe", "--perf-machine", "box",
                   "--perf-baselines-dir", str(pytester.path / "bl"), *args)


def box_records(pytester, report="rep"):
    """The records of results.json that a ``run_box`` session wrote with ``--perf-report rep``."""
    import json
    return json.loads((pytester.path / report / "results.json").read_text())["records"]


#: the pids this pytest process had running when the current test began (tests/conftest.py)
PROCESSES_BEFORE_THE_TEST: set = set()


def repository_module(relative):
    """A module of the repository outside the package and the tests (``perf_tests/...py``,
    ``benchmarks/...py``), loaded from its file for the functions it defines; the ones the
    tests load import no MXNet."""
    import importlib.util
    path = Path(__file__).resolve().parent.parent / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def new_children():
    """The processes this test started (children of this pytest process, at any depth) that
    still run: a test that leaves none leaves this empty, whatever other tests of the same
    process (an xdist worker runs several modules) started before it."""
    import psutil
    return [p for p in psutil.Process().children(recursive=True)
            if p.pid not in PROCESSES_BEFORE_THE_TEST and p.is_running()]


def cached_setup(cache, python, like=None, spec="mxnet==1.9.1", numpy="1.23.5"):
    """Put the interpreter ``python`` where a baseline-mode session whose candidate is
    ``like`` (None: this interpreter) finds the setup its baseline recorded, ``spec`` with numpy
    ``numpy``: what a first build of it leaves in the venv cache ``cache`` (a finished venv), so
    that no test builds one from a package index. ``python`` is run through a script of its own
    (a venv's interpreter is found by its path)."""
    import json
    import os
    from pathlib import Path

    from pytest_mxperf.proc import distributions, installs
    reqs = installs.requirements_for(spec, installs._pinned(distributions.companion_requirements(like),
                                                           {"numpy": numpy} if numpy else {}))
    root = Path(cache) / "venvs" / installs.venv_slug(spec, reqs)
    exe = installs.venv_python(root / "venv")
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.unlink(missing_ok=True)
    exe.write_text(f'#!/bin/sh\nexec {python} "$@"\n')
    os.chmod(exe, 0o755)
    (root / installs.COMPLETE_MARKER).write_text(json.dumps({"spec": spec, "requirements": reqs}))
    return str(exe)


def recorded_setup_is(project, baselines_dir, python, like, machine="box"):
    """What a first build leaves on a machine whose baseline (``baselines_dir``/``machine``.json)
    was recorded by ``python``, in the venv cache of a pytester project (``project``/.cache/
    pytest-mxperf: pytester's HOME), for a session whose candidate is ``like``
    (``cached_setup_in``). Baseline mode settles what the baseline alone cannot against it,
    and no test builds anything from a package index."""
    from pathlib import Path
    return cached_setup_in(Path(project) / ".cache" / "pytest-mxperf", baselines_dir, machine, python, like)


def cached_setup_in(cache, baselines_dir, machine, python, like):
    """Put ``python`` in the venv cache ``cache`` as the setup the baseline ``machine`` (in
    ``baselines_dir``) recorded: its recorded requirement, or for a baseline that names none
    the wheel that fits its recorded release, with its recorded numpy."""
    from pathlib import Path

    from pytest_mxperf.measure.comparison import _fitted_requirement
    from pytest_mxperf.store.baselines import Baseline
    b = Baseline.load(Path(baselines_dir) / f"{machine}.json")
    spec = b.recorded_requirement() or _fitted_requirement(b)[0]
    numpy = (b.recorded_install() or {}).get("numpy_version") or (b.recorded_release() or {}).get("numpy_version")
    return cached_setup(cache, python, like=like, spec=spec, numpy=numpy)


def faster_baseline(doc, name, factor=1.25, probes_of=(), old=False):
    """``benchmarks/slower_host_sessions.faster_baseline``: the baseline ``name`` built from a
    recorded one as a host ``factor`` faster would have recorded it (the benchmark runs the same
    sessions with real MXNet)."""
    return repository_module("benchmarks/slower_host_sessions.py").faster_baseline(doc, name, factor, probes_of, old)
