"""MXNet's operator wrappers from a cache (workers/op_cache.py): the functions a worker gets
are the ones MXNet's own ``exec`` makes, with this process's handles; a bad file compiles."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pytest_mxperf.proc import spawn
from pytest_mxperf.workers import op_cache

# the shape of a wrapper MXNet 1.x generates: the handle is a literal in one call
_SOURCE = textwrap.dedent('''
    def {name}(data=None, out=None, name=None, **kwargs):
        """An operator's documentation with 123456789012 and _imperative_invoke in it."""
        return _imperative_invoke({handle}, [data], ["k"], [name], out, False, False)
''')


def _run(hook, name, handle):
    """The wrapper ``hook`` makes for operator ``name`` at address ``handle``; calling it
    returns the handle it passes on."""
    namespace, local = {"_imperative_invoke": lambda handle, *rest: handle}, {}
    hook(_SOURCE.format(name=name, handle=handle), namespace, local)
    return local[name]


def test_a_wrapper_from_the_cache_calls_this_process_s_handle(tmp_path):
    path = str(tmp_path / "ops.marshal")
    first = op_cache._Exec(op_cache._Table(path), record=True)
    fn = _run(first, "Activation", 94738401906432)
    assert (first.compiled, first.hits) == (1, 0)
    assert fn(1) == 94738401906432
    op_cache._write(path, first.new)

    again = op_cache._Exec(op_cache._Table(path), record=False)
    fn2 = _run(again, "Activation", 94131200962304)   # another process: another address
    assert (again.compiled, again.hits) == (0, 1)
    assert first.compile_cpu_s > 0 and again.compile_cpu_s == 0.0  # only compiling is counted
    assert fn2(1) == 94131200962304
    assert fn2.__doc__ == fn.__doc__ and fn2.__code__.co_code == fn.__code__.co_code
    # another operator is not answered by Activation's entry
    other = _run(again, "FullyConnected", 94131200962304)
    assert again.compiled == 1 and other.__name__ == "FullyConnected"


_MODULE = textwrap.dedent('''
    def _generate_ndarray_function_code(handle, op_name, func_name, signature_only=False):
        calls.append(op_name)
        return SOURCE.format(name=func_name, handle=handle.value), op_name + "'s documentation"

    def make(handle, op_name, func_name):
        code, doc = _generate_ndarray_function_code(handle, op_name, func_name)
        local = {}
        exec(code, None, local)
        local[func_name].__doc__ = doc
        return local[func_name]
''')


def _generator_module(calls):
    """A namespace like MXNet's register modules: a generator writing a wrapper's (source,
    documentation) from its operator (counting its ``calls``), and the make-function that
    looks it up and execs what it wrote."""
    namespace = {"_imperative_invoke": lambda handle, *rest: handle, "calls": calls, "SOURCE": _SOURCE}
    exec(_MODULE, namespace)
    return namespace


def test_the_sources_are_kept_by_the_probe_and_read_back_with_this_process_s_handle(tmp_path, monkeypatch):
    import ctypes
    path = str(tmp_path / "ops.marshal")
    calls = []
    ns = _generator_module(calls)
    own = ns["_generate_ndarray_function_code"]

    def import_with(hook, handles):
        # MXNet's exec(code, None, local) reaches the hook as the builtin exec does
        monkeypatch.setitem(ns, "exec", hook)
        try:
            return [ns["make"](ctypes.c_void_p(h), op, op.lower()) for op, h in zip(("Relu", "Dense", "Conv"), handles)]
        finally:
            hook.put_back()

    probe = op_cache._Exec(op_cache._Table(path), record=True)   # the probe: generates all, keeps them
    made = import_with(probe, (94738401906432, 94738401906496, 94738401906560))
    assert calls == ["Relu", "Dense", "Conv"] and probe.sources_read == 0
    assert ns["_generate_ndarray_function_code"] is own           # MXNet's own generator put back
    assert [fn(1) for fn in made] == [94738401906432, 94738401906496, 94738401906560]
    op_cache._write(path, probe.new)

    calls.clear()
    worker = op_cache._Exec(op_cache._Table(path), record=False, sources=True)
    again = import_with(worker, (94131200962304, 94131200962368, 94131200962432))   # another process
    # the first source is generated (the cache takes the generator over at the first exec), the rest read
    assert calls == ["Relu"] and worker.sources_read == 2 and worker.compiled == 0
    assert [fn(1) for fn in again] == [94131200962304, 94131200962368, 94131200962432]
    assert [fn.__doc__ for fn in again] == [fn.__doc__ for fn in made] == [
        "Relu's documentation", "Dense's documentation", "Conv's documentation"]
    assert [fn.__code__.co_code for fn in again] == [fn.__code__.co_code for fn in made]
    assert ns["_generate_ndarray_function_code"] is own and not worker.new
    # a generator called otherwise than MXNet 1.x calls it gets its arguments unchanged, nothing from the cache
    odd = worker._generator("_generate_ndarray_function_code", lambda *a, **k: (a, k))
    assert odd("only", "two") == (("only", "two"), {}) and odd(1, 2, 3, other=4) == ((1, 2, 3), {"other": 4})
    assert worker.sources_read == 2


def test_exec_without_namespaces_uses_its_caller_s_as_the_builtin_does(tmp_path):
    hook = op_cache._Exec(op_cache._Table(None), record=False)
    local = {}

    def mxnet_like():  # as MXNet calls it: exec(code, None, local) from a function of its module
        hook("x = __name__", None, local)
        return local["x"]

    assert mxnet_like() == __name__
    assert hook("1 + 1", {"__builtins__": __builtins__}) is None   # not a wrapper: the builtin's
    assert hook.compiled == hook.hits == 0


@pytest.mark.parametrize("content", [b"", b"not a cache", op_cache._MAGIC + (10 ** 6).to_bytes(8, "little") + b"x",
                                     op_cache._MAGIC + (3).to_bytes(8, "little") + b"\x00\x01\x02"])
def test_a_bad_cache_file_means_the_source_is_compiled(tmp_path, content):
    path = tmp_path / "ops.marshal"
    path.write_bytes(content)
    hook = op_cache._Exec(op_cache._Table(str(path)), record=False)
    fn = _run(hook, "Activation", 94738401906432)
    assert fn(1) == 94738401906432 and hook.compiled == 1 and hook.hits == 0


def test_a_source_with_no_or_two_handles_is_left_to_the_builtin():
    assert op_cache._handle_span("return _imperative_invoke(x, 1)") is None
    two = "_imperative_invoke(1234567890, a)\n_symbol_creator(1234567891, b)"
    assert op_cache._handle_span(two) is None
    one = "  return _symbol_creator(98765432101234, None, x)"
    start, end = op_cache._handle_span(one)
    assert one[start:end] == "98765432101234"


_CHECK = textwrap.dedent('''
    import ctypes, hashlib, json, sys
    from pytest_mxperf.workers import op_cache
    mx, counts = op_cache.import_mxnet()
    from mxnet.base import _LIB, c_str
    wrong, checked, digest = [], 0, hashlib.sha256()
    for module in (mx.nd.op, mx.sym.op, mx.nd._internal, mx.sym._internal, mx.nd.numpy._op, mx.sym.numpy._op,
                   mx.nd.contrib, mx.sym.contrib, mx.numpy_extension):
        for name, fn in sorted(vars(module).items()):
            code = getattr(fn, "__code__", None)
            if code is None or not ({"_imperative_invoke", "_symbol_creator"} & set(code.co_names)):
                continue
            handles = [c for c in code.co_consts if type(c) is int and c > 2 ** 32]
            if module in (mx.nd.op, mx.sym.op, mx.nd._internal, mx.sym._internal):  # named as the operator
                hdl = ctypes.c_void_p()
                _LIB.NNGetOpHandle(c_str(fn.__name__), ctypes.byref(hdl))
                checked += 1
                if handles != [hdl.value]:
                    wrong.append(name)
            # the function as made, but for its handle: code, constants, names, documentation
            consts = [repr(c) for c in code.co_consts if not (type(c) is int and c > 2 ** 32)]
            digest.update(repr((module.__name__, name, fn.__module__, fn.__doc__, code.co_code, consts,
                                code.co_names, code.co_varnames, fn.__defaults__)).encode())
    counts["digest"] = digest.hexdigest()
    a = mx.nd.array([[-1.0, 2.0]])
    relu = mx.nd.Activation(a, act_type="relu").asnumpy().tolist()
    s = mx.sym.FullyConnected(mx.sym.Variable("x"), num_hidden=1, no_bias=True, name="fc")
    ex = s.bind(mx.cpu(), {"x": mx.nd.ones((1, 2)), "fc_weight": mx.nd.array([[2.0, 3.0]])})
    out = ex.forward()[0].asnumpy().tolist()
    print(json.dumps({"wrong": wrong, "checked": checked, "relu": relu, "fc": out, **counts}))
''')


def _python(args, cache):
    env = spawn.with_package_path({**os.environ, "MXPERF_CACHE_DIR": str(cache)})
    proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_real_mxnet_from_the_cache_has_every_operator_with_its_own_handle(tmp_path):
    before = json.loads(_python(["-c", _CHECK], tmp_path).strip().splitlines()[-1])
    assert before["hits"] == 0 and before["compiled"] > 1000          # no file yet: MXNet compiles
    assert not list((tmp_path / "mxnet-ops").glob("*.marshal"))        # and a worker writes nothing
    _python(["-m", "pytest_mxperf.workers.protocol", "--probe", str(tmp_path / "probe.json")], tmp_path)
    assert len(list((tmp_path / "mxnet-ops").glob("*.marshal"))) == 1  # the probe writes it
    after = json.loads(_python(["-c", _CHECK], tmp_path).strip().splitlines()[-1])
    assert after["compiled"] == 0 and after["hits"] == before["compiled"]
    # the sources too (the probe generates them all and keeps them; a worker reads them, but
    # for the first of each of MXNet's two generators, met before the cache takes it over)
    assert before["sources_read"] == 0 and after["sources_read"] >= before["compiled"] - 2
    assert after["digest"] == before["digest"]  # the functions MXNet's own import makes
    assert before["compile_cpu_s"] > 0 and after["compile_cpu_s"] == 0.0
    assert before["imported_cpu"] > before["compile_cpu_s"] and after["imported_cpu"] > 0
    # the probe's import figure (its arithmetic: test_the_probe_s_import_figure_leaves_compiling_out)
    probed = json.loads((tmp_path / "probe.json").read_text())["mxnet_speed"]
    assert probed["compiled"] == before["compiled"] and probed["import_cpu_s"] > 0
    for got in (before, after):
        assert got["wrong"] == [] and got["checked"] > 1000
        assert got["relu"] == [[0.0, 2.0]] and got["fc"] == [[5.0]]


def test_the_probe_s_import_figure_leaves_compiling_out(monkeypatch):
    """``protocol.import_mxnet``'s ``import_cpu_s``: the CPU seconds from before ``op_cache`` is
    imported to the import's end, less what compiling wrappers the cache did not hold took;
    None when MXNet was imported already. On a clock the test sets, not a real import (two
    processes' CPU seconds are no bound on a shared machine)."""
    from pytest_mxperf.workers import protocol
    monkeypatch.setattr(protocol.time, "process_time", lambda: 10.0)  # the clock before op_cache's import
    monkeypatch.setattr(op_cache, "import_mxnet", lambda write=False: (
        "mx", {"hits": 0, "compiled": 2556, "imported_cpu": 11.5, "compile_cpu_s": 0.4}))
    facts = {}
    assert protocol.import_mxnet(keep_compiled=True, facts=facts) == "mx"
    assert facts == {"import_cpu_s": pytest.approx(1.1), "compiled": 2556}
    monkeypatch.setattr(op_cache, "import_mxnet", lambda write=False: (
        "mx", {"hits": 0, "compiled": 0, "deferred": [], "imported_cpu": None, "compile_cpu_s": 0.0}))
    facts = {}
    protocol.import_mxnet(facts=facts)
    assert facts == {"import_cpu_s": None, "compiled": 0}
