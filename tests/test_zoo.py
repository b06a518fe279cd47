"""Tests of the model zoo (pytest_mxperf.zoo).

The pytest process never imports mxnet: all counting and the forward passes run
in ONE subprocess per module (``python -m pytest_mxperf.zoo.count --json``) whose
JSON is shared by the tests through a module-scoped fixture.
"""

import json
import os
import subprocess
import sys

import pytest

import pytest_mxperf.zoo as zoo
from pytest_mxperf.zoo import MODELS, ModelSpec, UnknownModelError, get_model

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Figures of the published MXNet tables (commit 0a03417 networks):
# name -> (params in millions rounded to 0.01, GMACs rounded to 0.001)
TABLE = {
    "alexnet": (50.84, 1.010),
    "vgg11": (132.86, 7.609),
    "inception-bn": (11.30, 1.987),
    "inception-v3": (23.83, 5.713),
    "resnet50_v2": (25.55, 4.089),
    "resnet152_v2": (60.19, 11.514),
}

# Exact figures measured by walking the graphs (MXNet 1.9.1); lenet and mlp have
# no published column, so these are their only pin.
EXACT = {
    "alexnet": (50844008, 1009945728),
    "vgg11": (132863336, 7609090048),
    "inception-bn": (11295240, 1987204096),
    "inception-v3": (23834568, 5713216096),
    "resnet50_v2": (25549486, 4089184256),
    "resnet152_v2": (60185262, 11513626624),
    "lenet": (431080, 2293000),
    "mlp": (109386, 109184),
}

TABLE_COLUMNS = {
    "alexnet": "Alexnet",
    "vgg11": "VGG",
    "inception-bn": "Inception-BN",
    "inception-v3": "Inception-v3",
    "resnet50_v2": "Resnet 50",
    "resnet152_v2": "Resnet 152",
    "lenet": None,
    "mlp": None,
}


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "2")
    return env


def _run_count(*args, timeout=300):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_mxperf.zoo.count", "--json", *args],
        cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=timeout,
    )
    assert proc.returncode == 0, "count CLI failed:\n" + proc.stderr[-4000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def counted():
    """Params, MACs and batch-1 forward output shape of every zoo model."""
    return _run_count()


@pytest.fixture(scope="module")
def lookalikes():
    """Counts of Gluon look-alike networks that must NOT pass the pins."""
    return _run_count("--gluon", "alexnet,resnet50_v1,vgg16")


# ---------------------------------------------------------------- registry


def test_registry_names():
    assert list(MODELS) == list(EXACT)
    assert zoo.model_names() == list(EXACT)


@pytest.mark.parametrize("name", list(EXACT))
def test_spec_sanity(name):
    spec = get_model(name)
    assert isinstance(spec, ModelSpec)
    assert spec.name == name
    assert spec.table_column == TABLE_COLUMNS[name]
    if name in ("lenet", "mlp"):
        assert spec.input_shape == (1, 28, 28)
        assert spec.num_classes == 10
    elif name == "inception-v3":
        assert spec.input_shape == (3, 299, 299)
        assert spec.num_classes == 1000
    else:
        assert spec.input_shape == (3, 224, 224)
        assert spec.num_classes == 1000
    assert isinstance(spec.params, int) and spec.params > 0
    assert isinstance(spec.macs, int) and spec.macs > 0
    assert spec.gmacs == spec.macs / 1e9
    assert spec.flops_per_image == 2 * spec.gmacs * 1e9
    module, _, func = spec.builder.partition(":")
    assert module.startswith("pytest_mxperf.zoo.") and func
    assert spec.description and "\n" not in spec.description
    d = spec.to_dict()
    assert d["gmacs"] == spec.gmacs and d["input_shape"] == list(spec.input_shape)
    json.dumps(d)


def test_spec_is_frozen():
    spec = get_model("alexnet")
    with pytest.raises(Exception):
        spec.params = 1


@pytest.mark.parametrize("name", list(TABLE))
def test_declared_values_match_table(name):
    spec = get_model(name)
    mparams, gmacs = TABLE[name]
    assert round(spec.params / 1e6, 2) == pytest.approx(mparams, abs=1e-9)
    assert round(spec.gmacs, 3) == pytest.approx(gmacs, abs=1e-9)


@pytest.mark.parametrize("bad", ["nope", "AlexNet", "resnet50_v1", "", None])
def test_unknown_model(bad):
    with pytest.raises(UnknownModelError) as info:
        get_model(bad)
    assert isinstance(info.value, ValueError)
    msg = str(info.value)
    assert "\n" not in msg
    for name in EXACT:
        assert name in msg


def test_registry_does_not_import_mxnet():
    code = (
        "import sys\n"
        "import pytest_mxperf.zoo as z\n"
        "z.get_model('alexnet'); z.MODELS['vgg11'].flops_per_image\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('mxnet', 'pytest'))\n"
        "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_pytest_process_has_not_imported_mxnet():
    assert "mxnet" not in sys.modules


# ---------------------------------------------------------------- counted


def test_count_covers_all_models(counted):
    assert list(counted) == list(EXACT)


@pytest.mark.parametrize("name", list(EXACT))
def test_counted_equals_declared(counted, name):
    spec = get_model(name)
    rec = counted[name]
    assert rec["params"] == spec.params == EXACT[name][0]
    assert rec["macs"] == spec.macs == EXACT[name][1]
    assert tuple(rec["input_shape"]) == spec.input_shape
    assert rec["num_classes"] == spec.num_classes


@pytest.mark.parametrize("name", list(TABLE))
def test_counted_matches_published_table(counted, name):
    mparams, gmacs = TABLE[name]
    rec = counted[name]
    assert round(rec["params"] / 1e6, 2) == pytest.approx(mparams, abs=1e-9)
    assert round(rec["macs"] / 1e9, 3) == pytest.approx(gmacs, abs=1e-9)


@pytest.mark.parametrize("name", list(EXACT))
def test_forward_pass_output_shape(counted, name):
    assert counted[name]["output_shape"] == [1, get_model(name).num_classes]


def test_lookalikes_fail_the_pins(lookalikes):
    # Gluon's alexnet is the 61.1M "one weird trick" variant, not the table's.
    g_alex = lookalikes["gluon:alexnet"]
    assert round(g_alex["params"] / 1e6, 2) != TABLE["alexnet"][0]
    assert round(g_alex["macs"] / 1e9, 3) != TABLE["alexnet"][1]
    # ResNet-50 v1 (post-activation) differs from v2 in params and MACs.
    v1 = lookalikes["gluon:resnet50_v1"]
    assert round(v1["params"] / 1e6, 2) != TABLE["resnet50_v2"][0]
    assert round(v1["macs"] / 1e9, 3) != TABLE["resnet50_v2"][1]
    # VGG-16 is not the table's VGG (VGG-11).
    v16 = lookalikes["gluon:vgg16"]
    assert round(v16["params"] / 1e6, 2) != TABLE["vgg11"][0]
    assert round(v16["macs"] / 1e9, 3) != TABLE["vgg11"][1]


def test_count_cli_rejects_unknown_model():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_mxperf.zoo.count", "--json", "--models", "nope"],
        cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "nope" in proc.stderr and "alexnet" in proc.stderr
