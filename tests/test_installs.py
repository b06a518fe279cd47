"""installs.py: which MXNet is installed where, refusing two side by side, cached
reference venvs (built by an injected installer: no test downloads anything), and the
MKLDNN build variants of the releases."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pytest_mxperf.proc import installs
from pytest_mxperf.proc import wheel_variants
from pytest_mxperf.proc import distributions
from pytest_mxperf.proc.distributions import InstallError

# the MXNet of this interpreter: 1.9.1 (the cpu extra) unless a tox mxNNN env says otherwise
EXPECTED_MXNET = os.environ.get("MXPERF_TEST_MXNET", "1.9.1")


def _one_line(exc_info):
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    return msg


# ---------------------------------------------------------------------------------------
# Which distributions install mxnet/, and refusing two of them


@pytest.mark.parametrize("name", ["mxnet", "MXNet", "mxnet-mkl", "mxnet_mkl", "mxnet-native", "mxnet-cu117",
                                  "mxnet-cu102mkl", "mxnet_cu92mkl", "mxnet.cu110"])
def test_mxnet_distributions_are_recognised(name):
    assert distributions.is_mxnet_distribution(name)


@pytest.mark.parametrize("name", ["numpy", "mxnet-model-server", "mxnet-cu", "gluoncv", "mxnet-tensorrt",
                                  "keras-mxnet", "mxnetx"])
def test_other_distributions_are_not(name):
    assert not distributions.is_mxnet_distribution(name)


def test_two_distributions_side_by_side_are_refused_in_one_line():
    with pytest.raises(InstallError) as exc:
        distributions.check_single_mxnet([("mxnet", "1.9.1"), ("mxnet-cu117", "1.9.1")], "/path/python")
    assert _one_line(exc) == (
        "two MXNet distributions share the mxnet/ package in /path/python: mxnet 1.9.1, mxnet-cu117 1.9.1; "
        "uninstall both (pip uninstall -y mxnet mxnet-cu117) and reinstall one (pip install -e '.[cu117]')")
    assert isinstance(exc.value, ValueError)


def test_cpu_only_conflicts_reinstall_the_cpu_extra_and_three_are_counted():
    with pytest.raises(InstallError) as exc:
        distributions.check_single_mxnet([("mxnet", "1.9.1"), ("mxnet-mkl", "1.6.0")], "/p/python")
    assert "pip uninstall -y mxnet mxnet-mkl" in _one_line(exc)
    assert "pip install -e '.[cpu]'" in str(exc.value)
    with pytest.raises(InstallError) as exc:
        distributions.check_single_mxnet([("mxnet", "1.9.1"), ("mxnet-cu102", "1.9.1"), ("mxnet-native", "1.8.0.post0")])
    msg = _one_line(exc)
    assert msg.startswith(f"three MXNet distributions share the mxnet/ package in {sys.executable}: ")
    assert "uninstall all (pip uninstall -y mxnet mxnet-cu102 mxnet-native)" in msg
    assert "pip install -e '.[cu102]'" in msg


def test_no_mxnet_is_refused_in_one_line():
    with pytest.raises(InstallError) as exc:
        distributions.check_single_mxnet([], "/opt/py/bin/python")
    assert _one_line(exc) == "no MXNet in /opt/py/bin/python: install an extra, e.g. pip install -e '.[cpu]'"


def test_one_distribution_passes():
    assert distributions.check_single_mxnet([("mxnet", "1.9.1")]) is None


def test_this_interpreter_has_its_one_mxnet():
    found = distributions.installed_mxnet_distributions()
    assert found == [("mxnet", EXPECTED_MXNET)]
    distributions.check_single_mxnet(found)
    # the metadata agrees with what a fresh process imports (never this one)
    proc = subprocess.run([sys.executable, "-c", "import mxnet; print(mxnet.__version__)"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=300)
    assert proc.returncode == 0
    assert EXPECTED_MXNET.startswith(proc.stdout.strip())  # 1.8.0.post0 says 1.8.0


def test_another_interpreter_is_asked_in_a_subprocess():
    assert distributions.installed_mxnet_distributions(sys.executable) == distributions.installed_mxnet_distributions()


def test_another_venvs_mxnet_is_read_without_importing_it(tmp_path, monkeypatch):
    """A venv of its own (built here, no pip, nothing downloaded) whose site-packages hold
    MXNet 1.6.0's metadata beside an ``mxnet`` package that refuses to be imported: its
    interpreter lists the release from the metadata alone."""
    venv = tmp_path / "mx160"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True,
                   timeout=300)
    py = installs.venv_python(venv)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True, timeout=60).stdout.strip())
    assert str(site).startswith(str(venv) + os.sep), site
    _fake_dist(site, "mxnet", "1.6.0")
    (site / "mxnet").mkdir()
    (site / "mxnet" / "__init__.py").write_text("raise ImportError('mxnet was imported')\n")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    imported = subprocess.run([str(py), "-c", "import mxnet"], capture_output=True, text=True, timeout=60)
    assert imported.returncode != 0 and "mxnet was imported" in imported.stderr  # an import would have failed
    assert distributions.installed_mxnet_distributions(str(py)) == [("mxnet", "1.6.0")]


def _fake_dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_a_second_distribution_in_another_interpreter_is_found(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _fake_dist(site, "mxnet-cu117", "1.9.1")
    _fake_dist(site, "numpy-stub", "1.0")
    monkeypatch.setenv("PYTHONPATH", str(site))
    found = distributions.installed_mxnet_distributions(sys.executable)
    assert found == [("mxnet", EXPECTED_MXNET), ("mxnet-cu117", "1.9.1")]
    with pytest.raises(InstallError, match=r"^two MXNet distributions share the mxnet/ package in "):
        distributions.check_single_mxnet(found, sys.executable)


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_an_interpreter_that_fails_is_one_line(tmp_path):
    bad = _script(tmp_path / "python", 'echo "Traceback (most recent call last):" >&2\n'
                                       'echo "ImportError: broken site" >&2\nexit 1')
    with pytest.raises(InstallError) as exc:
        distributions.installed_mxnet_distributions(bad)
    assert _one_line(exc) == f"{bad} could not list its distributions (exit code 1): ImportError: broken site"
    with pytest.raises(InstallError, match="cannot run"):
        distributions.installed_mxnet_distributions(str(tmp_path / "missing"))


# ---------------------------------------------------------------------------------------
# reference_python: an interpreter path


def test_reference_python_returns_a_working_interpreter_path_as_given():
    assert installs.reference_python(sys.executable) == sys.executable


def test_reference_python_refuses_a_missing_or_broken_interpreter(tmp_path):
    with pytest.raises(InstallError) as exc:
        installs.reference_python(str(tmp_path / "nope" / "python"))
    assert _one_line(exc) == f"{tmp_path / 'nope' / 'python'}: no such interpreter"
    broken = _script(tmp_path / "python3", 'echo "cannot execute" >&2\nexit 3')
    with pytest.raises(InstallError) as exc:
        installs.reference_python(broken)
    assert _one_line(exc) == f"{broken} is not a working Python 3 interpreter (exit code 3): cannot execute"


@pytest.mark.parametrize("spec, says", [
    ("mxnet", "pin one release"),
    ("mxnet>=1.8", "pin one release"),
    ("numpy==1.23.5", "numpy is not an MXNet distribution"),
    ("mxnet==", "neither an interpreter path nor a requirement"),
])
def test_reference_requirements_must_pin_one_mxnet(spec, says, tmp_path, monkeypatch):
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path))
    with pytest.raises(InstallError) as exc:
        installs.reference_python(spec, installer=_never)
    assert says in _one_line(exc)


def _never(venv_dir, requirements):
    raise AssertionError("nothing must be built")


# ---------------------------------------------------------------------------------------
# reference_python: a requirement, built once into a cached venv


class FakeInstaller:
    """Makes a 'venv' with an executable bin/python; counts its builds."""

    def __init__(self, fail=None):
        self.calls = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, venv_dir: Path, requirements):
        with self.lock:
            self.calls.append((venv_dir, list(requirements)))
        (venv_dir / "bin").mkdir(parents=True)
        _script(venv_dir / "bin" / "python", "exit 0")
        if self.fail:
            raise self.fail


def _quiet(msg):
    pass


def test_a_requirement_is_built_once_and_then_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path))
    inst = FakeInstaller()
    py = installs.reference_python("mxnet==1.8.0.post0", installer=inst, log=_quiet)
    assert Path(py).is_file() and str(py).startswith(str(tmp_path / "venvs") + os.sep)
    assert len(inst.calls) == 1
    venv_dir, reqs = inst.calls[0]
    assert reqs == ["mxnet==1.8.0.post0"] + distributions.companion_requirements()  # the candidate's numpy, ...
    assert any(r.startswith("numpy") for r in reqs)
    assert Path(py) == installs.venv_python(venv_dir)
    assert json.loads((venv_dir.parent / installs.COMPLETE_MARKER).read_text())["spec"] == "mxnet==1.8.0.post0"
    assert installs.reference_python("mxnet==1.8.0.post0", installer=_never, log=_quiet) == py
    # another release is another venv
    py16 = installs.reference_python("mxnet-mkl==1.6.0", installer=inst, log=_quiet)
    assert py16 != py and len(inst.calls) == 2
    assert "mxnet-mkl-1.6.0" in py16


def test_an_interrupted_build_is_never_taken_as_complete(tmp_path, monkeypatch):
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path))
    broken = FakeInstaller(fail=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        installs.reference_python("mxnet==1.7.0.post2", installer=broken, log=_quiet)
    venv_dir = broken.calls[0][0]
    assert not (venv_dir.parent / installs.COMPLETE_MARKER).exists()
    good = FakeInstaller()
    py = installs.reference_python("mxnet==1.7.0.post2", installer=good, log=_quiet)
    assert len(good.calls) == 1 and Path(py).is_file()


def test_a_killed_build_left_on_disk_is_rebuilt(tmp_path, monkeypatch):
    """kill -9 during pip: the venv directory is there, its marker is not."""
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path))
    first = FakeInstaller()
    py = installs.reference_python("mxnet==1.5.1", installer=first, log=_quiet)
    root = Path(py).parent.parent.parent
    (root / installs.COMPLETE_MARKER).unlink()
    (root / "venv" / "half-installed").write_text("")
    again = FakeInstaller()
    assert installs.reference_python("mxnet==1.5.1", installer=again, log=_quiet) == py
    assert len(again.calls) == 1
    assert not (root / "venv" / "half-installed").exists()


def test_a_venv_whose_python_is_gone_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path))
    py = installs.reference_python("mxnet==1.5.1", installer=FakeInstaller(), log=_quiet)
    os.unlink(py)  # e.g. its base interpreter was upgraded away
    again = FakeInstaller()
    assert installs.reference_python("mxnet==1.5.1", installer=again, log=_quiet) == py
    assert len(again.calls) == 1


def test_concurrent_threads_build_once(tmp_path, monkeypatch):
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path))
    inst = FakeInstaller()
    barrier = threading.Barrier(2)
    results, errors = [], []

    def call():
        barrier.wait()
        try:
            results.append(installs.reference_python("mxnet==1.9.1", installer=inst, log=_quiet))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(inst.calls) == 1
    assert len(results) == 2 and results[0] == results[1]


_PROCESS_BUILDER = r"""
import sys, time
from pathlib import Path
from pytest_mxperf.proc import installs

log, mine, other = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])

def installer(venv_dir, requirements):
    with open(log, "a") as fh:
        fh.write("built\n")
    (venv_dir / "bin").mkdir(parents=True)
    (venv_dir / "bin" / "python").write_text("#!/bin/sh\n")
    (venv_dir / "bin" / "python").chmod(0o755)
    # keep the lock until the other session is seen waiting for it
    for _ in range(24000):
        if other.exists():
            return
        time.sleep(0.005)
    raise SystemExit("the other session never waited for the lock")

def waiting(msg):
    if msg.startswith("waiting for another session"):
        mine.touch()

print(installs.reference_python("mxnet==1.6.0", installer=installer, log=waiting))
"""


def test_concurrent_sessions_build_once(tmp_path):
    """Two processes (the file lock, not the thread lock, keeps them apart): whichever
    builds holds the lock until the other says it is waiting for it; one build."""
    env = dict(os.environ, MXPERF_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(installs.__file__).parents[2]),
                                                    env.get("PYTHONPATH")) if p)
    log = tmp_path / "builds.log"
    script = tmp_path / "builder.py"
    script.write_text(_PROCESS_BUILDER)
    a, b = tmp_path / "a-waited", tmp_path / "b-waited"
    procs = [subprocess.Popen([sys.executable, str(script), str(log), str(mine), str(other)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for mine, other in ((a, b), (b, a))]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    assert log.read_text() == "built\n"
    assert a.exists() != b.exists()  # exactly one of them waited
    assert outs[0][0] == outs[1][0] and outs[0][0].strip().endswith("/venv/bin/python")


def test_pip_failure_is_one_line_with_pips_last_error(tmp_path, monkeypatch):
    """The real installer (python -m venv + pip) with pip kept off every index."""
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    (tmp_path / "no-wheels").mkdir()
    with pytest.raises(InstallError) as exc:
        installs.reference_python("mxnet==0.0.0.dev0", log=_quiet)
    msg = _one_line(exc)
    assert msg.startswith("pip install " + " ".join(installs.requirements_for(
        "mxnet==0.0.0.dev0", distributions.companion_requirements())))
    assert "failed: ERROR: " in msg and "mxnet==0.0.0.dev0" in msg.split("failed: ", 1)[1]
    roots = list((tmp_path / "venvs").iterdir())
    assert len(roots) == 1
    assert not (roots[0] / installs.COMPLETE_MARKER).exists() and not (roots[0] / "venv").exists()
    assert (roots[0] / "build.log").exists()


def test_slugs_are_readable_and_distinct():
    a = installs.venv_slug("mxnet==1.8.0.post0", installs.requirements_for("mxnet==1.8.0.post0"))
    b = installs.venv_slug("mxnet-mkl==1.6.0", installs.requirements_for("mxnet-mkl==1.6.0"))
    c = installs.venv_slug("mxnet==1.8.0.post0", ["mxnet==1.8.0.post0", "numpy<1.23"])
    assert a.startswith("mxnet-1.8.0.post0-py3") and b.startswith("mxnet-mkl-1.6.0-py3")
    assert len({a, b, c}) == 3
    assert all(ch.isalnum() or ch in "-.+" for ch in a + b + c)


# ---------------------------------------------------------------------------------------
# Build variants


@pytest.mark.parametrize("dist, version, variant", [
    ("mxnet", "1.5.1", "no-mkldnn"),
    ("mxnet", "1.6.0", "no-mkldnn"),
    ("mxnet-mkl", "1.6.0", "mkldnn"),
    ("mxnet", "1.7.0.post2", "mkldnn"),
    ("mxnet", "1.9.1", "mkldnn"),
    ("mxnet-native", "1.8.0.post0", "no-mkldnn"),
    ("mxnet-cu102", "1.6.0.post0", "no-mkldnn"),
    ("mxnet-cu102mkl", "1.6.0.post0", "mkldnn"),
    ("mxnet-cu117", "1.9.1", "mkldnn"),
])
def test_build_variant(dist, version, variant):
    assert wheel_variants.build_variant(dist, version) == variant


def test_an_old_release_against_191_takes_the_mkl_wheel():
    m = wheel_variants.match_variant("1.6.0", ("mxnet", "1.9.1"))
    assert m == ("mxnet-mkl==1.6.0", "mxnet==1.6.0", True)
    assert wheel_variants.match_variant("1.5.1", ("mxnet", "1.9.1")).requirement == "mxnet-mkl==1.5.1"


@pytest.mark.parametrize("version, like, expected", [
    ("1.7.0.post2", ("mxnet", "1.9.1"), ("mxnet==1.7.0.post2", None, True)),
    ("1.6.0", ("mxnet", "1.6.0"), ("mxnet==1.6.0", None, True)),
    ("1.8.0.post0", ("mxnet", "1.6.0"), ("mxnet-native==1.8.0.post0", "mxnet==1.8.0.post0", True)),
    ("1.9.1", ("mxnet", "1.6.0"), ("mxnet==1.9.1", None, False)),  # no mxnet-native 1.9.1
    ("1.6.0", ("mxnet-cu102", "1.9.1"), ("mxnet-cu102mkl==1.6.0", "mxnet-cu102==1.6.0", True)),
    ("1.8.0.post0", ("mxnet-cu102", "1.6.0.post0"), ("mxnet-cu102==1.8.0.post0", None, False)),
])
def test_match_variant(version, like, expected):
    assert wheel_variants.match_variant(version, like) == expected


def test_known_releases_are_ordered_oldest_first():
    from packaging.version import Version
    versions = [Version(v) for v in installs.KNOWN_RELEASES]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert installs.KNOWN_RELEASES[-1] == "1.9.1"


def test_the_extras_of_pyproject_match_the_cuda_wheels_and_pin_numpy():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    doc = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    project = doc["project"]
    extras = project["optional-dependencies"]
    assert not any(distributions.is_mxnet_distribution(r.split("=")[0].split("<")[0].split(">")[0].strip())
                   for r in project["dependencies"]), "MXNet must be an extra, not a dependency"
    assert "numpy<1.24" in project["dependencies"]
    # MLPerf's LoadGen beside MXNet: the serving cells (workers/serving.py)
    assert extras["cpu"] == ["mxnet==1.9.1", "numpy<1.24", "mlcommons-loadgen>=6.0"]
    for cu in distributions.CUDA_EXTRAS_191:
        assert extras[cu] == [f"mxnet-{cu}==1.9.1", "numpy<1.24", "nvidia-ml-py>=11", "mlcommons-loadgen>=6.0"]
        assert distributions.extra_for(f"mxnet-{cu}") == cu
    # the history store on PostgreSQL (--perf-store postgresql://...) needs its driver, and the
    # tests start a real server, so both extras carry it; no MXNet in either
    assert extras["fleet"] == ["psycopg[binary]>=3.1"]
    assert "psycopg[binary]>=3.1" in extras["test"]
    assert {"test", "cpu", "fleet", *distributions.CUDA_EXTRAS_191} == set(extras)


# ---------------------------------------------------------------------------------------
# Like with like: a reference venv loads the packages the candidate's workers load


def _fake_python(tmp_path, name, dists):
    """An 'interpreter' whose distribution listing (distributions._LIST_SCRIPT) is ``dists``."""
    listing = json.dumps({"python": name, "distributions": [list(d) for d in dists]})
    path = tmp_path / name / "bin" / "python"
    path.parent.mkdir(parents=True)
    _script(path, f"cat <<'EOF'\n{listing}\nEOF")
    return str(path)


def test_companions_are_the_candidates_versions_of_what_a_worker_loads(tmp_path):
    """Seen: an A/A session (MXNet 1.9.1 on both sides) failed on peak memory, 385 vs 322 MiB
    for Inception-BN b2, because the candidate's venv had scipy, which ``import mxnet`` loads
    when installed, and the reference venv had not."""
    cand = _fake_python(tmp_path, "cand", [("mxnet", "1.9.1"), ("numpy", "1.23.5"), ("scipy", "1.15.3+local"),
                                           ("threadpoolctl", "3.8.0"), ("pytest", "8.3.0"), ("matplotlib", "3.9")])
    assert distributions.companion_requirements(cand) == ["numpy==1.23.5", "threadpoolctl==3.8.0", "scipy==1.15.3"]
    # what the candidate lacks, the reference does not get; a numpy MXNet 1.x cannot run with is not copied
    bare = _fake_python(tmp_path, "bare", [("mxnet", "1.9.1"), ("numpy", "1.26.4"), ("opencv-python", "4.8.0.76")])
    assert distributions.companion_requirements(bare) == ["numpy<1.24", "opencv-python==4.8.0.76"]
    # the serving worker's LoadGen: both installs serve under the same one
    served = _fake_python(tmp_path, "served", [("mxnet", "1.9.1"), ("numpy", "1.23.5"),
                                               ("mlcommons_loadgen", "6.0.17")])
    assert distributions.companion_requirements(served) == ["numpy==1.23.5", "mlcommons-loadgen==6.0.17"]
    # this interpreter (the default candidate) reads its own metadata
    from importlib.metadata import version
    assert f"numpy=={version('numpy')}" in distributions.companion_requirements()


def test_a_reference_venv_follows_the_candidates_packages(tmp_path, monkeypatch):
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path / "cache"))
    with_scipy = _fake_python(tmp_path, "a", [("numpy", "1.23.5"), ("scipy", "1.15.3"), ("threadpoolctl", "3.8.0")])
    without = _fake_python(tmp_path, "b", [("numpy", "1.23.5"), ("threadpoolctl", "3.8.0")])
    inst = FakeInstaller()
    py_a = installs.reference_python("mxnet==1.9.1", installer=inst, log=_quiet, like=with_scipy)
    assert inst.calls[-1][1] == ["mxnet==1.9.1", "numpy==1.23.5", "threadpoolctl==3.8.0", "scipy==1.15.3"]
    py_b = installs.reference_python("mxnet==1.9.1", installer=inst, log=_quiet, like=without)
    assert inst.calls[-1][1] == ["mxnet==1.9.1", "numpy==1.23.5", "threadpoolctl==3.8.0"]
    assert py_a != py_b and len(inst.calls) == 2  # another candidate's packages: another venv
    assert installs.reference_python("mxnet==1.9.1", installer=_never, log=_quiet, like=with_scipy) == py_a
    with pytest.raises(InstallError, match="not an MXNet distribution"):
        installs.reference_python("numpy==1.23.5", installer=_never, log=_quiet, like=with_scipy)


@pytest.mark.parametrize("spec, pinned", [
    ("mxnet==1.9.1", ("mxnet", "1.9.1")), ("mxnet-mkl==1.6.0", ("mxnet-mkl", "1.6.0")),
    ("mxnet==1.8.0.post0", ("mxnet", "1.8.0.post0")), ("mxnet-cu117==1.9.1", ("mxnet-cu117", "1.9.1"))])
def test_a_baseline_may_name_a_pinned_release_of_an_mxnet_distribution(spec, pinned):
    assert installs.parse_pinned(spec) == pinned


@pytest.mark.parametrize("spec", ["mxnet @ https://host/x.whl", "mxnet @ file:///tmp/mxnet.whl", "/tmp/x.whl",
                                  "mxnet>=1.8", "mxnet==1.9.*", "mxnet===1.9.1", "mxnet==1.9.1,!=1.9.2",
                                  "mxnet[extra]==1.9.1", 'mxnet==1.9.1; python_version > "3"', "numpy==1.23.5",
                                  "mxnet==1.9.1+mine", "mxnet", "", "mxnet==1.9.1 --index-url http://x"])
def test_a_baseline_naming_anything_else_is_refused_in_one_line(spec):
    with pytest.raises(InstallError) as e:
        installs.parse_pinned(spec)
    assert repr(spec) in _one_line(e)


def test_the_reference_venv_takes_mxnet_from_a_wheel_only(tmp_path, monkeypatch):
    """pip is told to take the MXNet distribution from a binary wheel (never to build it)."""
    seen = []

    def run(command, **kwargs):
        seen.append(list(command))
        return subprocess.CompletedProcess(command, 0, b"", b"")
    monkeypatch.setattr(installs.subprocess, "run", run)
    monkeypatch.setattr(installs, "installed_mxnet_distributions", lambda python: [("mxnet-mkl", "1.6.0")])
    installs.pip_installer(tmp_path / "venv", ["mxnet-mkl==1.6.0", "numpy==1.23.5"])
    pip = next(c for c in seen if "pip" in c)
    assert "--only-binary=mxnet-mkl" in pip and pip[-2:] == ["mxnet-mkl==1.6.0", "numpy==1.23.5"]


@pytest.mark.parametrize("own_pip", [True, False])
def test_the_reference_venv_is_made_without_pip_when_this_interpreters_pip_can_install_into_it(
        tmp_path, monkeypatch, own_pip):
    """With this interpreter's pip (22.3 or later: ``--python``) the venv gets no pip of its own
    (ensurepip costs seconds a build) and that pip installs into it; without one, the venv's."""
    seen = []

    def run(command, **kwargs):
        seen.append(list(command))
        return subprocess.CompletedProcess(command, 0, b"", b"")
    monkeypatch.setattr(installs.subprocess, "run", run)
    monkeypatch.setattr(installs, "_own_pip", lambda: own_pip)
    monkeypatch.setattr(installs, "installed_mxnet_distributions", lambda python: [("mxnet", "1.9.1")])
    installs.pip_installer(tmp_path / "venv", ["mxnet==1.9.1"])
    venv, pip = seen
    python = str(installs.venv_python(tmp_path / "venv"))
    assert venv[:3] == [sys.executable, "-m", "venv"] and ("--without-pip" in venv) == own_pip
    assert pip[:5] == ([sys.executable, "-m", "pip", "--python", python] if own_pip
                       else [python, "-m", "pip", "install", "--disable-pip-version-check"])


def test_this_interpreters_pip_is_used_only_from_the_version_that_has_its_python_option(monkeypatch):
    import pip
    for version, usable in [("22.2.2", False), ("22.3", True), ("23.2.1", True), ("24.0", True), ("dev", False)]:
        monkeypatch.setattr(pip, "__version__", version)
        assert installs._own_pip() == usable, version
