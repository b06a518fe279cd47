"""MXNet's operator wrappers compiled once per install, not in every worker.

``import mxnet`` writes one Python function per operator as source text and compiles it with
``exec`` (``mxnet/ndarray/register.py``, ``mxnet/symbol/register.py``, the numpy front ends):
2,831 sources in MXNet 1.9.1, in every worker process a session starts. From the cache the
import costs a worker most of a CPU-second less (docs/how-it-measures.md, "What is measured,
and how each figure is judged", the operator wrappers' cache). The sources differ between
processes only by the operator's handle, an address that ``_imperative_invoke(...)`` and
``_symbol_creator(...)`` receive as a literal.

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

**The sources too.** Before it compiles a wrapper, MXNet writes its source and documentation
from the operator's registry entry (``_generate_ndarray_function_code``,
``_generate_symbol_function_code``: a ctypes call and string work per operator, about a fifth of
the import's CPU time). The same file keeps each one, by the generator, operator and function
name, with the handle's literal as the placeholder; a worker's import reads it back with its own
handle put in and hands MXNet what its generator would have written, which the wrapper cache
then answers. The probe writes these entries and never reads them: its import does all the work
an import did before (``protocol.import_mxnet``'s ``import_cpu_s``, the figure the estimate
holds against the reference machine's, stays the same work).
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
from typing import Dict, Optional, Tuple

from pytest_mxperf.workers import deferred_imports

#: the calls through which a generated wrapper names its operator's handle (MXNet 1.x:
#: ndarray and symbol, their numpy front ends), each followed by the handle and a comma
_CALLS = ("_imperative_invoke(", "_symbol_creator(")
_DIGITS = re.compile(r"\d+,")
#: the placeholder compiled in the handle's place (no operator's address: those are even)
_PLACEHOLDER = 0x5EEDC0DE5EEDC0DF
_PLACEHOLDER_TEXT = str(_PLACEHOLDER)
#: MXNet's functions that write a wrapper's (source, documentation) from its operator's
#: registry entry: (handle, op_name, func_name, signature_only=False); looked up by MXNet's
#: make-function in its module's namespace at every call
_GENERATORS = ("_generate_ndarray_function_code", "_generate_symbol_function_code")
#: the table's keys of generated sources begin with this (a wrapper's key is a bare SHA-1)
_SOURCE_KEY = b"source:"
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


def _generalized(source: str) -> Optional[Tuple[str, str]]:
    """(a generated wrapper's source with its one handle literal replaced by the placeholder,
    that literal), else None (no handle literal, or more than one)."""
    found = _handle_span(source)
    if found is None:
        return None
    start, end = found
    return source[:start] + _PLACEHOLDER_TEXT + source[end:], source[start:end]


class _Exec:
    """``exec`` for the duration of the import: operator wrappers from the table (or
    compiled and added to ``new``), everything else as the builtin does it. ``sources``:
    also answer MXNet's source generators from the table (a worker); ``record``: add what
    was compiled, and the sources generated, to ``new`` (the probe)."""

    def __init__(self, table: Optional["_Table"], record: bool, sources: bool = False):
        # None: opened at the first wrapper, when the MXNet being imported is known
        self.table, self.record, self.sources = table, record, sources
        self.path: Optional[str] = None
        self.new: Dict[bytes, bytes] = {}
        self.hits = self.compiled = 0
        self.sources_read = 0  # wrapper sources answered from the table, not generated
        self.compile_cpu_s = 0.0  # CPU seconds spent compiling what the cache did not hold
        self.builtin = builtins.exec
        #: (namespace, name, MXNet's generator) for each generator answered for: put back after
        self.replaced: list = []

    def __call__(self, source, globals=None, locals=None, *args, **kwargs):
        if globals is None:  # the builtin's defaults are its caller's namespaces: ours is not
            frame = sys._getframe(1)
            globals = frame.f_globals
            if locals is None:
                locals = frame.f_locals
        code = self._wrapper(source) if isinstance(source, str) else None
        if code is not None and (self.sources or self.record):
            # the caller is MXNet's make-function: its module's generator writes the next ones
            self._take_generators(globals)
        return self.builtin(source if code is None else code, globals, locals, *args, **kwargs)

    def _open(self) -> "_Table":
        if self.table is None:
            self.path = cache_path()
            self.table = _Table(self.path)
        return self.table

    def _take_generators(self, namespace) -> None:
        for name in _GENERATORS:
            generator = namespace.get(name)
            if callable(generator) and not getattr(generator, "_mxperf_source_cache", False):
                namespace[name] = self._generator(name, generator)
                self.replaced.append((namespace, name, generator))

    def put_back(self) -> None:
        """MXNet's own generators in their modules again (the import is over)."""
        for namespace, name, generator in reversed(self.replaced):
            namespace[name] = generator
        self.replaced = []

    def _generator(self, name: str, generate):
        """``generate`` (MXNet's) answered from the table where it holds the source; what it
        writes kept in ``new`` (recording) when it does not."""
        placeholder = _PLACEHOLDER_TEXT

        def generated(*args, **kwargs):
            # called as MXNet calls its own: (handle, op_name, func_name[, signature_only]),
            # and passed on as it was called (a release whose generator takes other
            # arguments gets them unchanged, and nothing from the cache)
            if len(args) < 3 or set(kwargs) - {"signature_only"}:
                return generate(*args, **kwargs)
            handle, op_name, func_name = args[:3]
            signature_only = args[3] if len(args) > 3 else kwargs.get("signature_only", False)
            key = _SOURCE_KEY + hashlib.sha1(
                f"{name}\0{op_name}\0{func_name}\0{bool(signature_only)}".encode()).digest()
            table = self._open()
            value = getattr(handle, "value", handle)
            if self.sources and type(value) is int:
                blob = table.get(key)
                try:
                    kept = marshal.loads(blob) if blob is not None else None
                except (EOFError, ValueError, TypeError):
                    kept = None
                if (type(kept) is tuple and len(kept) == 2 and type(kept[0]) is str and type(kept[1]) is str
                        and kept[0].count(placeholder) == 1):
                    self.sources_read += 1
                    return kept[0].replace(placeholder, str(value)), kept[1]
            source, doc = generate(*args, **kwargs)
            if self.record and key not in table.index and type(value) is int:
                found = (_generalized(source) if type(source) is str and type(doc) is str
                         and placeholder not in source else None)
                if found is not None and found[1] == str(value):
                    self.new[key] = marshal.dumps((found[0], doc))
            return source, doc

        generated._mxperf_source_cache = True
        return generated

    def _wrapper(self, source: str) -> Optional[types.CodeType]:
        found = _generalized(source)
        if found is None:
            return None
        general, literal = found
        handle = int(literal)
        key = hashlib.sha1(general.encode()).digest()
        self._open()
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
    "imported_cpu", "compile_cpu_s", "sources_read"}``: the process's CPU clock
    (``time.process_time``) when the import had ended (before a cache file is written), the CPU
    seconds of it spent compiling what the cache did not hold (what an import from the cache
    would not spend) and how many wrapper sources were read from the cache, not generated
    (none with ``write``: the probe generates them all, and keeps those the file lacks)."""
    if "mxnet" in sys.modules:
        return sys.modules["mxnet"], {"hits": 0, "compiled": 0, "deferred": [], "imported_cpu": None,
                                      "compile_cpu_s": 0.0, "sources_read": 0}
    # the probe (write) generates every source, as an import did before this cache kept them
    hook = _Exec(None, record=write, sources=not write)
    builtins.exec = hook
    lazily = deferred_imports.deferred() if defer else deferred_imports.deferred((), stdlib_distutils=False)
    imported_cpu = None
    try:
        with lazily as finder:
            import mxnet
        imported_cpu = time.process_time()
    finally:
        builtins.exec = hook.builtin
        hook.put_back()
        if hook.table is not None:
            if hook.new and hook.path:
                _write(hook.path, {**hook.table.blobs(), **hook.new})
            hook.table.close()
    return mxnet, {"hits": hook.hits, "compiled": hook.compiled, "deferred": list(finder.given),
                   "imported_cpu": imported_cpu, "compile_cpu_s": hook.compile_cpu_s,
                   "sources_read": hook.sources_read}


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
