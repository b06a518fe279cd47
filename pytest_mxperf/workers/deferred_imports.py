"""Modules ``import mxnet`` loads but a measuring worker does not use, loaded on first use.

MXNet 1.x imports, at import time, modules it only calls in a few functions: ``scipy.stats``
(``mxnet.contrib.quantization``'s entropy calibration, ``mxnet.test_utils``) and ``requests``
(``mxnet.test_utils``'s and ``gluon.utils``' downloads); and ``mxnet.numpy_dispatch_protocol``
imports ``distutils.version``, which setuptools' ``distutils`` shim answers by importing
setuptools and ``pkg_resources``. Together about a third of the import's CPU time in every
worker process (docs/how-it-measures.md, "What is measured, and how each figure is judged":
what a worker's import costs).

``deferred()`` is the import with those modules deferred: while it is open, importing one of
``DEFERRED`` gives a stand-in module whose first attribute read (anything but what the import
system itself sets) imports the real module, puts it in ``sys.modules`` and on its parent
package, and answers from it: code that uses the module gets the real one, just later. And
``distutils`` is the standard library's where it has one (Python up to 3.11, as MXNet 1.x
needs) instead of setuptools' copy: ``LooseVersion``, all MXNet asks of it, is the same.
Nothing here is timed: it runs before a worker's first round, and a module first used in a
round would be imported by the warm-up before it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import sys
import types
from typing import Iterable, Iterator

#: imported by ``import mxnet``, used only by functions a measuring worker rarely calls
DEFERRED = ("scipy.stats", "requests")


class _Deferred(types.ModuleType):
    """A module imported on first use: reading any attribute the import system did not set
    on it loads the real module (``_load``) and answers from it."""

    def __getattr__(self, name: str):
        if not self.__dict__.get("_deferred_ready"):  # the import system is still setting it up
            raise AttributeError(name)
        return getattr(_load(self), name)

    def __dir__(self):
        return dir(_load(self))


def _load(stub: _Deferred) -> types.ModuleType:
    """The real module for ``stub``, imported now: it replaces the stand-in in ``sys.modules``
    and on the parent package, so that later imports and attribute reads find it directly."""
    name = stub.__dict__["__name__"]
    if sys.modules.get(name) is stub:
        del sys.modules[name]
    real = importlib.import_module(name)
    parent, _, child = name.rpartition(".")
    if parent and getattr(sys.modules.get(parent), child, None) is stub:
        setattr(sys.modules[parent], child, real)
    return real


class _Finder:
    """Hands out a stand-in for each of ``names`` (first on ``sys.meta_path`` while open)."""

    def __init__(self, names: Iterable[str]):
        self.names = frozenset(names)
        self.given = []

    def find_spec(self, fullname, path=None, target=None):
        # only a module that is there: an import that fails (``try: import x except
        # ImportError``) fails as it would
        if fullname in self.names and importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        return _Deferred(spec.name)

    def exec_module(self, module):
        module.__dict__["_deferred_ready"] = True
        self.given.append(module.__name__)


def _stdlib_distutils() -> bool:
    """Whether ``import distutils`` finds a module without setuptools' shim (the standard
    library's: Python 3.11 and older)."""
    try:
        return importlib.machinery.PathFinder.find_spec("distutils") is not None
    except (ImportError, ValueError):
        return False


def _is_setuptools_shim(finder) -> bool:
    return type(finder).__name__ == "DistutilsMetaFinder" and type(finder).__module__ == "_distutils_hack"


@contextlib.contextmanager
def deferred(names: Iterable[str] = DEFERRED, stdlib_distutils: bool = True) -> Iterator[_Finder]:
    """While open, ``names`` are imported on first use and (``stdlib_distutils``)
    ``distutils`` is the standard library's when not imported yet and the interpreter has
    one. Yields the finder, whose ``given`` lists the stand-ins handed out."""
    finder = _Finder(n for n in names if n not in sys.modules)
    shims = []  # (where it was, the finder): put back there
    if stdlib_distutils and "distutils" not in sys.modules and _stdlib_distutils():
        shims = [(i, f) for i, f in enumerate(sys.meta_path) if _is_setuptools_shim(f)]
    for _, f in shims:
        sys.meta_path.remove(f)
    sys.meta_path.insert(0, finder)
    try:
        yield finder
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
        for i, f in shims:
            sys.meta_path.insert(i, f)


def is_deferred(module) -> bool:
    """Whether ``module`` is a stand-in not loaded yet."""
    return isinstance(module, _Deferred)
