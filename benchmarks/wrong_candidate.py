"""Candidates for the answers gate (#27), built from an interpreter that has MXNet:

* **wrong**: an interpreter whose ``sitecustomize.py`` makes every ReLU that MXNet's symbol
  API builds a leaky one (``LeakyReLU``, slope ``slope``): the same graph names, another
  computation, from the first ReLU on. No release does this; it is a stand-in for a kernel
  or a graph pass that computes something else.
* **kernels**: the same interpreter with ``MXNET_SUBGRAPH_BACKEND=NONE`` (oneDNN's fusion
  off): other kernels, the same computation.

Each is a small shell script that runs the given Python: ``--perf-python`` /
``--perf-reference`` take it like any interpreter. Used by ``tests/test_answers.py`` and
``benchmarks/answers_ab.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

SITECUSTOMIZE = """
import importlib.abc, importlib.util, sys

SLOPE = {slope!r}

def _patch(mx):
    plain = mx.sym.Activation
    def Activation(*args, **kw):
        if kw.get("act_type") == "relu":
            kw.pop("act_type")
            return mx.sym.LeakyReLU(*args, act_type="leaky", slope=SLOPE, **kw)
        return plain(*args, **kw)
    mx.sym.Activation = mx.symbol.Activation = Activation

class _AfterMXNet(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "mxnet":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            _patch(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _AfterMXNet())
"""


def _script(path: Path, lines: str, python: str) -> str:
    path.write_text(f"#!/bin/sh\n{lines}exec {python} \"$@\"\n")
    path.chmod(0o755)
    return str(path)


def wrong(directory, python: str, slope: float = 0.01) -> str:
    """The path of a candidate interpreter whose ReLUs are leaky (``slope``)."""
    directory = Path(directory)
    site = directory / "wrong-site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(slope=float(slope)))
    return _script(directory / "python-wrong", f'PYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" ', python)


def kernels(directory, python: str) -> str:
    """The path of a candidate interpreter with oneDNN's subgraph fusion off."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return _script(directory / "python-kernels", "MXNET_SUBGRAPH_BACKEND=NONE; export MXNET_SUBGRAPH_BACKEND\n",
                   os.fspath(python))
