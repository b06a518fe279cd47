"""MXNet's operator wrappers compiled once per install, not in every worker.

``import mxnet`` writes one Python function per operator as source text and compiles it with
``exec`` (``mxnet/ndarray/register.py``, ``mxnet/symbol/register.py``, the numpy front ends):
2,831 sources in MXNet 1.9.1, in every worker process a session starts. From the cache the
import took 2.02 CPU-s instead of 2.84 (medians of ten processes each, 2-vCPU Zen 3,
``benchmarks/results/worker-start-zen3-2026-11-27.txt``; resident memory +0.6 MiB). The
sources differ between processes only by the operator's handle, an address that
``_imperative_invoke(...)`` and ``_symbol_creator(...)`` receive as a literal.

``import_mxnet`` imports MXNet with ``exec`` answering those sources from a cache: each source
with its handle replaced by a placeholder is compiled once, kept as marshalled bytecode in a
file per MXNet install (``mxnet-ops`` in ``cache_root()``; keyed by the interpreter's bytecode
tag and optimisation level, the install's directory and ``libmxnet.so``'s size and time), and
put back with the process's own handle in place of the placeholder: the functions MXNet gets
are the ones its own ``exec`` would have made. Any other ``exec`` during the import runs as it
would. Only a process started to ask what MXNet is (``worker.probe``, once per interpreter and
session) writes the file, so a measuring worker never holds what a write needs; a missing,
stale or unreadable file only means MXNet compiles its sources itself. Nothing here is timed:
the import precedes every measured round.
"""

from __future__ import annotations

import builtins
import hashlib
import marshal
import os
import re
import sys
import time
import types
from typing import Dict, Optional

from pytest_mxperf.workers import deferred_imports

#: the calls through which a generated wrapper names its operator's handle (MXNet 1.x:
#: ndarray and symbol, their numpy front ends), each followed by the handle and a comma
_CALLS = ("_imperative_invoke(", "_symbol_creator(")
_DIGITS = re.compile(r"\d+,")
#: the placeholder compiled in the handle's place (no operator's address: those are even)
_PLACEHOLDER = 0x5EEDC0DE5EEDC0DF
_FORMAT = 1
_MAGIC = b"mxperf-mxnet-ops-1\n"


def _install_key(mx_dir: str) -> Optional[str]:
    lib = os.path.join(mx_dir, "libmxnet.so")
    try:
        st = os.stat(lib)
    except OSError:
        return None
    # the bytecode's interpreter and optimisation level (-O drops asserts), and the install
    text = "|".join((str(_FORMAT), sys.implementation.cache_tag or "", str(sys.flags.optimize),
                     os.path.realpath(mx_dir), str(st.st_size), str(st.st_mtime_ns)))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _mxnet_dir() -> Optional[str]:
    """The directory of the MXNet being imported, from its module (in ``sys.modules`` while
    its ``__init__`` runs). Not ``importlib.util.find_spec``: that would consult the import
    finders a user's ``sitecustomize`` put in place ahead of the import itself."""
    module = sys.modules.get("mxnet")
    where = getattr(module, "__file__", None)
    return os.path.dirname(where) if where else None


def cache_root() -> str:
    """The suite's persistent cache directory, for the parent (``spawn.cache_dir``) and its
    children alike: ``$MXPERF_CACHE_DIR``, else ``pytest-mxperf`` in ``$XDG_CACHE_HOME``
    (default ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("MXPERF_CACHE_DIR") or os.path.join(base, "pytest-mxperf")


def cache_path() -> Optional[str]:
    """The cache file of the MXNet being (or already) imported (None: no MXNet module, or
    no cache directory can be made)."""
    mx_dir = _mxnet_dir()
    key = _install_key(mx_dir) if mx_dir else None
    if key is None:
        return None
    folder = os.path.join(cache_root(), "mxnet-ops")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return os.path.join(folder, f"{key}.marshal")


class _Table:
    """A cache file, read an entry at a time (``os.pread``) rather than all at once: a
    measuring worker's memory during and after the import is what MXNet's own import takes.
    Layout: ``_MAGIC``, the index's length (8 bytes, little-endian), the index (marshalled
    ``{key: (offset, length)}``), then each wrapper's marshalled bytecode."""

    def __init__(self, path: Optional[str]):
        self.index: Dict[bytes, tuple] = {}
        self._fd: Optional[int] = None
        if not path:
            return
        try:
            self._fd = os.open(path, os.O_RDONLY)
            head = len(_MAGIC) + 8
            first = os.pread(self._fd, head, 0)
            if len(first) != head or first[:len(_MAGIC)] != _MAGIC:
                raise ValueError("not a cache file")
            size = int.from_bytes(first[len(_MAGIC):], "little")
            index = marshal.loads(os.pread(self._fd, size, head))
            if not isinstance(index, dict):
                raise ValueError("no index")
            self.index, self._base = index, head + size
        except (OSError, TypeError, ValueError, EOFError):
            self.close()

    def get(self, key: bytes) -> Optional[bytes]:
        where = self.index.get(key)
        if where is None or self._fd is None:
            return None
        offset, length = where
        try:
            blob = os.pread(self._fd, length, self._base + offset)
        except OSError:
            return None
        return blob if len(blob) == length else None

    def blobs(self) -> Dict[bytes, bytes]:
        out = {}
        for key in self.index:
            blob = self.get(key)
            if blob is not None:
                out[key] = blob
        return out

    def close(self) -> None:
        self.index = {}
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _with_handle(code: types.CodeType, handle: int) -> types.CodeType:
    consts = tuple(handle if type(c) is int and c == _PLACEHOLDER
                   else _with_handle(c, handle) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    return code.replace(co_consts=consts)


def _handle_span(source: str):
    """(start, end) of the one handle literal in a generated wrapper, else None."""
    spans = []
    for call in _CALLS:
        at = source.find(call)
        while at >= 0:
            digits = _DIGITS.match(source, at + len(call))
            if digits is None:
                return None
            spans.append((digits.start(), digits.end() - 1))
            at = source.find(call, digits.end())
    return spans[0] if len(spans) == 1 else None


class _Exec:
    """``exec`` for the duration of the import: operator wrappers from the table (or
    compiled and added to ``new``), everything else as the builtin does it."""

    def __init__(self, table: Optional["_Table"], record: bool):
        # None: opened at the first wrapper, when the MXNet being imported is known
        self.table, self.record = table, record
        self.path: Optional[str] = None
        self.new: Dict[bytes, bytes] = {}
        self.hits = self.compiled = 0
        self.compile_cpu_s = 0.0  # CPU seconds spent compiling what the cache did not hold
        self.builtin = builtins.exec

    def __call__(self, source, globals=None, locals=None, *args, **kwargs):
        if globals is None:  # the builtin's defaults are its caller's namespaces: ours is not
            frame = sys._getframe(1)
            globals = frame.f_globals
            if locals is None:
                locals = frame.f_locals
        code = self._wrapper(source) if isinstance(source, str) else None
        return self.builtin(source if code is None else code, globals, locals, *args, **kwargs)

    def _wrapper(self, source: str) -> Optional[types.CodeType]:
        found = _handle_span(source)
        if found is None:
            return None
        start, end = found
        handle = int(source[start:end])
        general = source[:start] + str(_PLACEHOLDER) + source[end:]
        key = hashlib.sha1(general.encode()).digest()
        if self.table is None:
            self.path = cache_path()
            self.table = _Table(self.path)
        blob = self.table.get(key)
        if blob is not None:
            try:
                code = marshal.loads(blob)
            except (EOFError, ValueError, TypeError):
                code = None
            if isinstance(code, types.CodeType):
                self.hits += 1
                return _with_handle(code, handle)
        t0 = time.process_time()
        code = compile(general, "<string>", "exec", dont_inherit=True)
        self.compiled += 1
        if self.record:
            self.new[key] = marshal.dumps(code)
        self.compile_cpu_s += time.process_time() - t0
        return _with_handle(code, handle)


def import_mxnet(write: bool = False, defer: bool = True):
    """``import mxnet`` with its operator wrappers from this install's cache; ``write``: keep
    what had to be compiled in the cache file (the probe process only); ``defer``: the
    modules MXNet imports but a worker does not use loaded on first use
    (``deferred_imports``). Returns the module and ``{"hits", "compiled", "deferred",
    "imported_cpu", "compile_cpu_s"}``: the process's CPU clock (``time.process_time``) when
    the import had ended (before a cache file is written) and the CPU seconds of it spent
    compiling what the cache did not hold (what an import from the cache would not spend)."""
    if "mxnet" in sys.modules:
        return sys.modules["mxnet"], {"hits": 0, "compiled": 0, "deferred": [], "imported_cpu": None,
                                      "compile_cpu_s": 0.0}
    hook = _Exec(None, record=write)
    builtins.exec = hook
    lazily = deferred_imports.deferred() if defer else deferred_imports.deferred((), stdlib_distutils=False)
    imported_cpu = None
    try:
        with lazily as finder:
            import mxnet
        imported_cpu = time.process_time()
    finally:
        builtins.exec = hook.builtin
        if hook.table is not None:
            if hook.new and hook.path:
                _write(hook.path, {**hook.table.blobs(), **hook.new})
            hook.table.close()
    return mxnet, {"hits": hook.hits, "compiled": hook.compiled, "deferred": list(finder.given),
                   "imported_cpu": imported_cpu, "compile_cpu_s": hook.compile_cpu_s}


def _write(path: str, blobs: Dict[bytes, bytes]) -> None:
    index, offset = {}, 0
    for key, blob in blobs.items():
        index[key] = (offset, len(blob))
        offset += len(blob)
    head = marshal.dumps(index)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(_MAGIC + len(head).to_bytes(8, "little") + head)
            for blob in blobs.values():
                fh.write(blob)
        os.replace(tmp, path)  # a reader sees the old file or the new one, never half of one
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
