"""The float16 networks (zoo.build_symbol(..., dtype="float16")) are MXNet's float16 form:
float32 input cast to float16, float16 weights, BatchNorm float32, float32 output before
the softmax. Checked by type inference in one subprocess (the pytest process never
imports mxnet); no GPU is involved: this checks the graphs, not float16 speed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_mxperf import zoo

REPO = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, sys
import numpy as np
from pytest_mxperf import zoo
out = {}
for m in zoo.FLOAT16_MODELS:
    s16, s32 = zoo.build_symbol(m, dtype="float16"), zoo.build_symbol(m)
    args, outs, aux = s16.infer_type(data=np.float32)
    t = dict(zip(s16.list_arguments(), args))
    out[m] = {"same_arguments": s16.list_arguments() == s32.list_arguments(),
              "data": np.dtype(t["data"]).name,
              "weights": sorted({np.dtype(t[n]).name for n in t if n.endswith("weight")}),
              "bn": sorted({np.dtype(t[n]).name for n in t if n.endswith(("gamma", "beta"))}
                           | {np.dtype(x).name for x in aux}),
              "output": [np.dtype(x).name for x in outs]}
try:
    zoo.build_symbol("alexnet", dtype="float16")
    out["alexnet"] = "built"
except ValueError as exc:
    out["alexnet"] = str(exc)
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def inferred():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("model", zoo.FLOAT16_MODELS)
def test_float16_graph_is_mxnets_float16_form(inferred, model):
    r = inferred[model]
    assert r["same_arguments"]  # same parameters as the float32 cell
    assert r["data"] == "float32" and r["output"] == ["float32"]
    assert r["weights"] == ["float16"]
    assert r["bn"] in ([], ["float32"])  # VGG-11 has no BatchNorm


def test_networks_without_a_float16_definition_are_refused(inferred):
    assert set(zoo.FLOAT16_MODELS) == {"vgg11", "inception-v3", "resnet50_v2", "resnet152_v2"}
    assert inferred["alexnet"].startswith("alexnet has no float16 definition")
