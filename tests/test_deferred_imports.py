"""The modules ``import mxnet`` loads but a worker does not use, loaded on first use
(workers/deferred_imports.py): code that uses one gets the real module, just later."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pytest_mxperf.proc import spawn
from pytest_mxperf.workers import deferred_imports


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """Two packages of this test alone: ``heavy_pkg.heavy`` counts its loads in
    ``heavy_pkg.LOADS``; ``heavy_pkg.tree`` is a package with a submodule."""
    root = tmp_path / "heavy_pkg"
    (root / "tree").mkdir(parents=True)
    (root / "__init__.py").write_text("LOADS = []\n")
    (root / "heavy.py").write_text("from heavy_pkg import LOADS\nLOADS.append('heavy')\nVALUE = 42\n"
                                   "def twice(x):\n    return 2 * x\n")
    (root / "tree" / "__init__.py").write_text("from heavy_pkg import LOADS\nLOADS.append('tree')\n")
    (root / "tree" / "leaf.py").write_text("LEAF = 'leaf'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in [n for n in sys.modules if n == "heavy_pkg" or n.startswith("heavy_pkg.")]:
        del sys.modules[name]


def test_a_deferred_module_loads_at_its_first_use_and_is_the_real_one_after(packages):
    import heavy_pkg
    with deferred_imports.deferred(["heavy_pkg.heavy"]) as finder:
        from heavy_pkg import heavy
        import heavy_pkg.heavy as again       # a second import neither loads it
    assert heavy_pkg.LOADS == [] and finder.given == ["heavy_pkg.heavy"]
    assert again is heavy and deferred_imports.is_deferred(heavy)
    assert heavy.twice(heavy.VALUE) == 84    # the first use loads it, once
    assert heavy_pkg.LOADS == ["heavy"]
    real = sys.modules["heavy_pkg.heavy"]
    assert not deferred_imports.is_deferred(real) and heavy_pkg.heavy is real and real.VALUE == 42
    assert "twice" in dir(heavy) and heavy.VALUE == 42 and heavy_pkg.LOADS == ["heavy"]


def test_a_module_that_is_not_there_fails_to_import_as_it_would(packages):
    import heavy_pkg  # noqa: F401
    with deferred_imports.deferred(["heavy_pkg.absent", "no_such_top_level_module"]) as finder:
        with pytest.raises(ImportError):
            import heavy_pkg.absent  # noqa: F401
        with pytest.raises(ImportError):
            import no_such_top_level_module  # noqa: F401
    assert finder.given == []


def test_a_submodule_of_a_deferred_package_is_imported_through_the_real_package(packages):
    import heavy_pkg
    with deferred_imports.deferred(["heavy_pkg.tree"]):
        import heavy_pkg.tree
    assert heavy_pkg.LOADS == []
    from heavy_pkg.tree import leaf          # needs the package's __path__: the package loads
    assert leaf.LEAF == "leaf" and heavy_pkg.LOADS == ["tree"]


def test_only_modules_not_imported_yet_are_deferred_and_the_finder_leaves(packages):
    import heavy_pkg.heavy
    before = list(sys.meta_path)
    with deferred_imports.deferred(["heavy_pkg.heavy", "heavy_pkg.tree"]) as finder:
        assert sys.meta_path[0] is finder and len(sys.meta_path) <= len(before) + 1
    assert finder.given == [] and sys.meta_path == before
    assert not deferred_imports.is_deferred(sys.modules["heavy_pkg.heavy"])


_MXNET = textwrap.dedent('''
    import json, sys
    from pytest_mxperf.workers import op_cache
    mx, counts = op_cache.import_mxnet(defer=sys.argv[1] == "defer")
    loaded = {n: n in sys.modules and type(sys.modules[n]).__name__ != "_Deferred"
              for n in ("scipy.stats", "requests", "pkg_resources", "setuptools")}
    distutils_from = sys.modules["distutils"].__file__
    # what uses them still works: quantization's calibration entropy, a sparse array, LooseVersion
    from mxnet.contrib import quantization
    entropy = float(quantization.stats.entropy([0.5, 0.5]))
    import scipy.sparse
    dense = mx.nd.array(scipy.sparse.csr_matrix([[0.0, 2.0]])).asnumpy().tolist()
    relu = mx.nd.Activation(mx.nd.array([[-1.0, 2.0]]), act_type="relu").asnumpy().tolist()
    print(json.dumps({"loaded": loaded, "distutils": distutils_from, "entropy": entropy, "dense": dense,
                      "relu": relu, "deferred": counts["deferred"],
                      "stats_after": type(sys.modules["scipy.stats"]).__name__}))
''')


def _child(script, arg, tmp_path):
    """What ``script`` (run with ``arg`` in a fresh process, as a worker is) printed last, as JSON."""
    env = spawn.with_package_path({**os.environ, "MXPERF_CACHE_DIR": str(tmp_path)})
    proc = subprocess.run([sys.executable, "-c", script, arg], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_real_mxnet_imports_without_the_modules_it_does_not_use_and_they_work_when_used(tmp_path):
    lazy, eager = _child(_MXNET, "defer", tmp_path), _child(_MXNET, "eager", tmp_path)
    assert eager["loaded"]["scipy.stats"] and eager["loaded"]["requests"]   # MXNet's own import loads them
    assert lazy["deferred"] == ["scipy.stats", "requests"] and eager["deferred"] == []
    assert lazy["loaded"] == {"scipy.stats": False, "requests": False, "pkg_resources": False, "setuptools": False}
    assert "setuptools" not in lazy["distutils"]       # the standard library's, LooseVersion and all
    for got in (lazy, eager):
        assert abs(got["entropy"] - 0.6931471805599453) < 1e-12
        assert got["dense"] == [[0.0, 2.0]] and got["relu"] == [[0.0, 2.0]]
        assert got["stats_after"] == "module"   # the real scipy.stats once used


_MEASURE = textwrap.dedent('''
    import json, sys
    from pytest_mxperf.workers import op_cache
    op_cache.import_mxnet()
    from pytest_mxperf.measure import runner
    from pytest_mxperf.model.workload import Workload
    from pytest_mxperf.workers import throughput
    w = Workload(model="lenet", mode=sys.argv[1], batch_size=2, contexts=("cpu:0",))
    spec = json.loads(json.dumps(runner.make_spec(w, time_budget=0.2, smoke=False, memory_limit=None, seed=0)))
    result = throughput.measure(spec)
    print(json.dumps({"status": result.get("status"),
                      "still_deferred": [n for n in ("scipy.stats", "requests")
                                         if type(sys.modules.get(n)).__name__ == "_Deferred"]}))
''')


@pytest.mark.parametrize("mode", ["score", "train"])
def test_a_measurement_loads_no_deferred_module_so_none_loads_in_a_timed_round(tmp_path, mode):
    got = _child(_MEASURE, mode, tmp_path)
    assert got == {"status": "ok", "still_deferred": ["scipy.stats", "requests"]}
