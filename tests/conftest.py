import sys

import pytest

# Imported once here, before any in-process session: pytester's in-process runs drop the
# modules a run imported when it ends, so a module first imported inside one run (the plugin
# imports these lazily) would be a new object in the next, and its exceptions another class
# than the one an older module's ``except`` names (seen: distributions.InstallError raised
# past ``baseline_requirement``'s handler as an INTERNALERROR, only after test_deadline ran)
import pytest_mxperf.collection  # noqa: E402,F401
import pytest_mxperf.command_line  # noqa: E402,F401
import pytest_mxperf.session_start  # noqa: E402,F401
import pytest_mxperf.proc.distributions  # noqa: E402,F401

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _history_store_of_this_test(tmp_path_factory):
    """The sessions the plugin's own tests run (pytester, subprocesses) append to a store of
    this test, not to the user's default one nor to one other tests wrote: what a machine's last
    sessions say decides a session's path (``planning.first_path``) and its estimate, so a store
    shared between tests would make one test's outcome depend on which ran before it."""
    import os
    old = os.environ.get("MXPERF_HISTORY")
    os.environ["MXPERF_HISTORY"] = str(tmp_path_factory.mktemp("history") / "history.sqlite")
    yield
    if old is None:
        os.environ.pop("MXPERF_HISTORY", None)
    else:
        os.environ["MXPERF_HISTORY"] = old


#: the plugin the pytest sessions these tests start never use: hypothesis's (importing
#: hypothesis took 0.76 of a 1.4-s start here). xdist's stays: a test checks that -n is refused
INNER_SESSIONS_WITHOUT = "-p no:hypothesispytest"


@pytest.fixture(autouse=True, scope="session")
def _inner_sessions_start_lighter():
    """The pytest sessions the tests start in subprocesses (a user's project, a killed
    session) load no plugins they do not use: each starts in about half the time. The
    plugin under test still loads."""
    import os
    old = os.environ.get("PYTEST_ADDOPTS")
    os.environ["PYTEST_ADDOPTS"] = f"{old} {INNER_SESSIONS_WITHOUT}" if old else INNER_SESSIONS_WITHOUT
    yield
    if old is None:
        os.environ.pop("PYTEST_ADDOPTS", None)
    else:
        os.environ["PYTEST_ADDOPTS"] = old


@pytest.fixture(autouse=True, scope="session")
def _children_keep_their_bytecode():
    """Where the environment says PYTHONDONTWRITEBYTECODE (these machines do), every process
    the tests start (pytest sessions, stand-in workers) would compile the plugin's modules
    again, and pytest rewrite the asserts of its ~100 modules: about 1.4 s of each stand-in
    session here. The children write their caches and use them."""
    import os
    old = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    yield
    if old is not None:
        os.environ["PYTHONDONTWRITEBYTECODE"] = old


#: OpenMP's threads sleep at a barrier instead of spinning, in every MXNet worker these tests
#: start. Its default spins: with both cores busy (the other xdist worker), a real MXNet test's
#: 2-thread workers waited on each other's spins, test_convergence took 96 s beside one busy
#: process against 13 s with this (10 s alone). A recorded variable: the sessions of a test
#: record it and compare like with like.
OMP_WAIT = ("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(autouse=True, scope="session")
def _openmp_threads_sleep_when_they_wait():
    import os
    name, value = OMP_WAIT
    old = os.environ.get(name)
    os.environ[name] = value
    yield
    if old is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = old


@pytest.fixture
def pytester(pytester, monkeypatch):
    """pytester's sessions likewise: pytester clears PYTEST_ADDOPTS when it starts (so they
    would load hypothesis's plugin again), and this puts the flag back after it."""
    monkeypatch.setenv("PYTEST_ADDOPTS", INNER_SESSIONS_WITHOUT)
    return pytester


@pytest.fixture(autouse=True)
def _stand_in_sessions_build_nothing_from_an_index(request):
    """A session a test starts through pytester that would settle against a recorded setup
    not in its venv cache would build it from the package index: a real MXNet download under
    a stand-in test. Here pip finds no index, so such a setup is "unbuilt", said in one line;
    tests put the setup they mean in the cache (``stand_ins.recorded_setup_is``). The reference
    venvs a module builds on purpose (test_ab_real) are built by module fixtures, before this."""
    if "pytester" not in request.fixturenames:
        yield
        return
    mp = request.getfixturevalue("monkeypatch")
    mp.setenv("PIP_NO_INDEX", "1")
    mp.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens there
    yield


@pytest.fixture(autouse=True, scope="session")
def _pytest_process_never_imports_mxnet():
    yield
    assert "mxnet" not in sys.modules, "the pytest process imported mxnet; measurements belong in workers"


@pytest.fixture(autouse=True)
def _processes_before_the_test():
    """What ``stand_ins.new_children`` leaves out: the processes already running when the test
    began."""
    import psutil

    import stand_ins
    stand_ins.PROCESSES_BEFORE_THE_TEST = {p.pid for p in psutil.Process().children(recursive=True)}
    yield


#: the modules whose tests start real MXNet workers (each uses both cores), or other MXNet
#: installs: one work unit of xdist, so that with ``-n 2 --dist loadgroup`` (the README's test
#: command) no two of them run at once; every other module is a unit of its own, its
#: module-scoped fixtures built once (``pytest_xdist_make_scheduler``)
REAL_MXNET_MODULES = frozenset({
    "test_ab_real", "test_answers", "test_commbench", "test_convergence", "test_digits_precision_worker",
    "test_dist", "test_duet", "test_duet_gpu", "test_duet_latency", "test_gpu_float16", "test_installs",
    "test_memory_rule", "test_multicell", "test_multidevice", "test_peak", "test_pipeline", "test_plugin",
    "test_precision", "test_profiles", "test_runner", "test_serving_worker", "test_usermodel", "test_utilisation",
    "test_wheel",
    "test_zoo"})
#: the tests marked ``spins`` (module stem, function): in the real-MXNet unit too. xdist's
#: controller sees test ids, not marks: the workers check that the two agree
SPINNING_TESTS = frozenset({
    ("test_machine_state", "test_a_neighbour_spinning_on_every_cpu_turns_a_quiet_reading_into_slowed"),
    ("test_gate_e2e", "test_a_neighbour_slowed_machine_is_not_a_regression_and_does_not_pass")})
REAL_MXNET_UNIT = "real-mxnet"


def work_unit(nodeid: str) -> str:
    """The xdist work unit of the test ``nodeid``: the real-MXNet one, else its module."""
    nodeid = nodeid.rsplit("@", 1)[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid
    module, _, rest = nodeid.partition("::")
    stem = module.rsplit("/", 1)[-1][:-3] if module.endswith(".py") else module
    function = rest.split("::")[-1].split("[")[0]
    return REAL_MXNET_UNIT if stem in REAL_MXNET_MODULES or (stem, function) in SPINNING_TESTS else module


@pytest.hookimpl(optionalhook=True)  # without pytest-xdist the tests still run, one at a time
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` as this suite means it, by ``work_unit``. xdist's own reads a group
    from a suffix it adds to every test id, which pytest 9.2's test ids no longer take
    (pytest-xdist issue 1386: every test became a unit of its own, and real-MXNet tests ran
    beside each other)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)
    return ByWorkUnit(config, log)


def pytest_configure(config):
    config.addinivalue_line("markers", "spins: the test keeps the machine's CPUs busy on purpose (a "
                                       "neighbour): it runs in the real-MXNet unit, never beside a measurement "
                                       "(listed in tests/conftest.py SPINNING_TESTS)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        marked = item.get_closest_marker("spins") is not None
        listed = (item.path.stem, item.originalname) in SPINNING_TESTS
        if marked != listed:
            raise pytest.UsageError(f"{item.nodeid}: marked spins and listed in conftest.SPINNING_TESTS must agree")


@pytest.fixture
def make_stub_python(tmp_path):
    """make_stub_python(name, **config) -> path of an executable that acts as a Python with
    a stand-in MXNet (tests/stub_worker.py) configured by ``config``."""
    import stand_ins

    def make(name="stub", site=False, **config):
        return stand_ins.stub_python(tmp_path / f"python-{name}", site=site, **config)
    return make


@pytest.fixture
def gpu_box(pytester, monkeypatch):
    """gpu_box(spec): the sessions started from now on see ``spec`` (tests/fake_nvml.py) as
    their NVML."""
    import fake_nvml

    def use(spec):
        fake_nvml.use_in_subprocesses(monkeypatch, fake_nvml.write(spec, pytester.path / "nvml.json"))
    return use
