"""The worker protocol: what every child process of the suite shares.

A worker is started by the parent (``pytest_mxperf.measure.runner`` / ``pytest_mxperf.proc.spawn``)
as ``python -m pytest_mxperf.workers.<kind> SPEC.json RESULT.json``. It reads the spec,
applies the spec's memory cap *before* importing MXNet, runs, and writes one JSON object
with at least ``status`` ("ok", "error", "oom", "unavailable") and ``message``. Any
exception becomes a one-line ``error`` / ``oom`` result; the traceback goes to stderr,
whose tail the parent keeps.

Child side: the standard library, numpy and MXNet APIs that exist across the 1.x
releases, so that a worker runs under another MXNet install. It never imports pytest.

``python -m pytest_mxperf.workers.protocol --probe RESULT.json`` reports what MXNet is
installed (version, build features, GPUs, thread pools).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
import warnings
from typing import Optional

from pytest_mxperf.model.jsonio import write_json

# Variables that change how MXNet (or its OpenMP / BLAS runtimes) behaves. They are
# passed to the worker when the user set them, recorded beside every result, and
# diffed against the baseline.
RECORDED_ENV_PREFIXES = ("OMP_", "KMP_", "MXNET_", "OPENBLAS_", "MKL_", "MKLDNN_", "DNNL_", "GOMP_",
                         "CUDA_", "NCCL_", "DMLC_", "NVIDIA_TF32_OVERRIDE")  # the last: TF32 off (tensor_math.py)


def recorded_env(env):
    """The recorded variables of ``env``, sorted by name."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(RECORDED_ENV_PREFIXES)}


#: the recorded variables as this process got them, before it set any itself: an interpreter
#: that is a wrapper setting its own (``MXNET_SUBGRAPH_BACKEND=NONE exec python``) shows here,
#: not in what the parent passed
STARTED_ENV = recorded_env(os.environ)

OOM_MARKERS = ("out of memory", "std::bad_alloc", "memoryerror", "cannot allocate memory",
               "failed to allocate", "cudamalloc", "cuda_error_out_of_memory", "resource exhausted")


def looks_like_oom(text: str) -> bool:
    low = text.lower()
    return any(m in low for m in OOM_MARKERS)


def error_line(text: str, fallback: str) -> str:
    """The one line of an exception text that names the problem.

    MXNet errors carry a C++ stack between "MXNetError: Traceback ..." and the real
    message: prefer an out-of-memory line, then the last "...Error: ..." line that is
    not a traceback header.
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if looks_like_oom(ln):
            return ln[:500]
    named = [ln for ln in lines if "Error" in ln.split(":")[0] and "Traceback" not in ln]
    return (named[-1] if named else lines[-1] if lines else fallback)[:500]


def set_memory_cap(limit):
    if limit:
        limit = int(limit)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def resident_bytes():
    """This process's resident set now (VmRSS, from /proc/self/statm), or None where there is
    no /proc. The worker records it before and after ``import mxnet``: what the interpreter
    started with, and what MXNet's import loaded (itself, numpy, and scipy when installed:
    MXNet 1.9.1 imports it in contrib/quantization.py and ndarray/sparse.py)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def file_backed_bytes():
    """The part of this process's resident set that maps files now (RssFile + RssShmem of
    /proc/self/status: shared libraries' code and data, files it mapped), or None where it
    cannot be read. How much of a library is resident depends on the page cache (a library
    other processes have just used is mapped in larger pieces), not on what the process
    allocated: the memory figure leaves it out."""
    got = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                name, _, rest = line.partition(":")
                if name in ("RssFile", "RssShmem"):
                    got[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return sum(got.values()) if "RssFile" in got else None


#: packages besides MXNet whose presence changes a worker's memory (installs.WORKER_COMPANIONS
#: by their import names): the worker imports numpy and threadpoolctl, MXNet imports scipy and
#: cv2 when installed
COMPANION_MODULES = ("numpy", "threadpoolctl", "scipy", "cv2")


def loaded_companions():
    """{import name: version} of the ``COMPANION_MODULES`` this process has loaded."""
    out = {}
    for name in COMPANION_MODULES:
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = str(getattr(mod, "__version__", "unknown"))
    return out


def import_mxnet(keep_compiled: bool = False, facts: Optional[dict] = None):
    """``import mxnet``, its operator wrappers from this install's cache (``op_cache``);
    ``keep_compiled``: write what had to be compiled to the cache (the probe, not a worker
    that measures). ``facts``, when given, gets ``import_cpu_s``: the CPU seconds the import
    took (``time.process_time``, from before ``op_cache`` is imported, as a worker's is clocked),
    less what it spent compiling wrappers the cache did not hold: what a worker's import from
    the cache costs on this CPU (None when MXNet was imported already; docs/how-it-measures.md,
    "What a run does", *MXNet's import*); and ``compiled``, how many it compiled."""
    t0 = time.process_time()
    from pytest_mxperf.workers.op_cache import import_mxnet as cached_import
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import-time DeprecationWarnings are MXNet's, not ours
        mx, counts = cached_import(write=keep_compiled)
    if facts is not None:
        done = counts.get("imported_cpu")
        facts["import_cpu_s"] = None if done is None else max(0.0, done - t0 - counts.get("compile_cpu_s", 0.0))
        facts["compiled"] = counts.get("compiled", 0)
    # Scoring declares the label without binding it, exactly as benchmark_score.py does.
    warnings.filterwarnings("ignore", message="Data provided by label_shapes")
    return mx


def thread_pools():
    """The thread pools that are loaded in this process, as threadpoolctl reports them."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {"openmp": None, "pools": [], "source": "threadpoolctl not installed"}
    pools = threadpool_info()
    omp = [p["num_threads"] for p in pools if p.get("user_api") == "openmp"]
    slim = [{k: p.get(k) for k in ("user_api", "internal_api", "num_threads", "prefix", "version")}
            for p in pools]
    return {"openmp": max(omp) if omp else None, "pools": slim, "source": "threadpoolctl"}


def runtime_info(mx):
    info = {"mxnet_version": getattr(mx, "__version__", "unknown"), "python": sys.version.split()[0],
            "worker_env": dict(STARTED_ENV)}
    try:
        feats = mx.runtime.Features()
        info["features"] = sorted(name for name, f in feats.items() if f.enabled)
    except Exception:  # older 1.x without mx.runtime
        info["features"] = None
    try:
        info["num_gpus"] = mx.context.num_gpus()
    except Exception:
        info["num_gpus"] = 0
    # No per-GPU query here: gpu_memory_info would create a CUDA context on every GPU. The
    # parent reads the GPUs' facts from NVML; the worker adds what only it can see.
    if info["num_gpus"]:
        info.update(cuda_library_versions())
    try:
        import numpy
        info["numpy_version"] = numpy.__version__
    except ImportError:  # pragma: no cover
        pass
    return info


def mx_contexts(mx, names):
    """MXNet contexts of names like "cpu:0" / "gpu:1" (as the parent's Workload spells them)."""
    out = []
    for name in names:
        kind, _, idx = str(name).partition(":")
        out.append(mx.gpu(int(idx)) if kind == "gpu" else mx.cpu(int(idx)))
    return out


def missing_gpus(names, num_gpus):
    """The one-line reason a worker cannot run ``names`` here ("needs gpu:1 but this machine
    has 1 GPU(s)"), or None. ``num_gpus`` is called only when ``names`` has GPU contexts."""
    gpus = [n for n in names if str(n).startswith("gpu")]
    if not gpus:
        return None
    have = num_gpus() or 0
    if max(int(n.split(":")[1]) for n in gpus) >= have:
        return f"needs {','.join(gpus)} but this machine has {have} GPU(s)"
    return None


def unavailable_kvstore(names, kvstore, num_gpus):
    """The one-line reason a kvstore worker cannot run ``names`` with ``kvstore`` here (GPUs
    this machine lacks, or the nccl kvstore without GPU contexts), or None."""
    missing = missing_gpus(names, num_gpus)
    if missing:
        return missing
    if kvstore == "nccl" and not any(str(n).startswith("gpu") for n in names):
        return "the nccl kvstore needs GPU contexts"
    return None


class TimedSteps:
    """A measuring cell: ``step()`` is one batch (set by the subclass, with ``self.mx``);
    ``timed(n)`` runs n steps between two full synchronisations (MXNet is asynchronous:
    outputs, gradients, optimizer updates and copies all finish inside the round)."""

    def timed(self, n):
        """n steps between two ``mx.nd.waitall()``; returns seconds."""
        self.mx.nd.waitall()
        t0 = time.perf_counter()
        for _ in range(n):
            self.step()
        self.mx.nd.waitall()
        return time.perf_counter() - t0

    def timed_each(self, n):
        """n steps, each one between two ``mx.nd.waitall()`` (as ``timed(1)`` n times, with no
        gap between them): (the n steps' seconds, each step's seconds). A latency cell's duet
        round: each step is one synchronised batch, the latency a batch-1 request sees."""
        self.mx.nd.waitall()
        t0 = t_prev = time.perf_counter()
        each = []
        for _ in range(n):
            self.step()
            self.mx.nd.waitall()
            t = time.perf_counter()
            each.append(t - t_prev)
            t_prev = t
        return t_prev - t0, each


def warm_up(cell, minimum: int, seconds: float, maximum: int, clock=time.perf_counter) -> list:
    """A cell's untimed warm-up (``cell.timed(1)`` a batch): the batches' seconds, at least
    ``minimum`` of them, then until ``seconds`` have passed since it began or ``maximum``
    batches have run. Each worker kind sets its own bounds."""
    warm: list = []
    start = clock()
    while len(warm) < minimum or (clock() - start < seconds and len(warm) < maximum):
        warm.append(cell.timed(1))
    return warm


class ModuleSteps(TimedSteps):
    """A bound ``mx.mod.Module`` (``self.mod``) stepped on one batch (``self.batch``):
    forward, and for training backward and update."""

    def step(self):
        self.mod.forward(self.batch, is_train=self.train)
        if self.train:
            self.mod.backward()
            self.mod.update()


class DuetRounds:
    """What a resident worker's side of a duet measured (``serve_duet``): its timed rounds
    only, never the settling and sizing rounds nor its partner's turns.

    ``seconds``: each timed round's seconds, in the order they ran; ``batches``: batches
    (units) per timed round, the same for all; ``batch_seconds``: with ``each_batch``, every
    timed batch's own seconds (each between two ``mx.nd.waitall()``), else []; ``wall_seconds``
    and ``cpu_seconds``: this process's wall and CPU time inside its timed rounds (their
    ratio is the CPUs the cell used, as over a process's rounds); ``windows``: each timed
    round's [start, end] in ``time.monotonic()`` seconds (``timed_window``)."""

    def __init__(self):
        self.seconds, self.batches, self.batch_seconds = [], None, []
        self.wall_seconds = self.cpu_seconds = 0.0
        self.windows = []


def timed_window(start):
    """[start, now] in ``time.monotonic()`` seconds: a timed window the worker reports (its
    result's ``timed_windows``) so that the parent's utilisation samplers keep only what they
    read inside the timed rounds (``machine/utilisation.py``). ``time.monotonic()`` is
    CLOCK_MONOTONIC on Linux (``time.get_clock_info("monotonic")``), one clock for every
    process of the machine, so the parent's sample times and the worker's windows compare
    directly (checked: a child's reading lies between two of its parent's)."""
    return [start, time.monotonic()]


def _process_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


#: the control pipes' file objects, opened once a process: a worker of several cells serves
#: each cell's rounds on the same pipes (a second wrapper would lose what the first read ahead)
_CHANNELS = {}


def _channel(control):
    key = (int(control[0]), int(control[1]))
    if key not in _CHANNELS:
        _CHANNELS[key] = (os.fdopen(key[0], "r", buffering=1), os.fdopen(key[1], "w", buffering=1))
    return _CHANNELS[key]


def say_over(control, status, message):
    """A cell of a duet of several cells ended before its rounds (unsupported, unavailable):
    ``{"op": "over"}`` with its status, where the parent waits for its "ready"; the worker
    goes on to its next cell."""
    wr = _channel(control)[1]
    wr.write(json.dumps({"op": "over", "status": status, "message": message}) + "\n")
    wr.flush()


def serve_duet(cell, control, ready, *, each_batch=False):
    """A resident worker's side of a duet (the parent: ``pytest_mxperf.measure.duet``).

    ``control`` is [read_fd, write_fd] of two pipes to the parent, which speaks JSON lines:
    the worker says ``{"op": "ready", **ready}`` once warmed up, then answers each
    ``{"op": "round", "batches": k, "timed": bool}`` with ``{"op": "done", "seconds": t}``
    after running ``cell.timed(k)`` (k steps between two ``mx.nd.waitall()``), until
    ``{"op": "finish"}``. With ``each_batch`` (a latency cell) a round is
    ``cell.timed_each(k)`` instead: k steps each between two ``mx.nd.waitall()``, the
    round's seconds their sum, and each timed step's seconds are kept. Between rounds it
    blocks on the pipe and computes nothing, so its partner runs alone. A cell with a
    ``finished`` attribute (a training run to a target) says in each reply whether it is
    over (``"finished"``), which is when the parent stops sending it rounds. Returns a
    ``DuetRounds`` of the timed rounds; every timed round has the same number of batches."""
    rd, wr = _channel(control)

    def send(obj):
        wr.write(json.dumps(obj) + "\n")
        wr.flush()

    send(dict(ready, op="ready"))
    out = DuetRounds()
    for line in rd:
        cmd = json.loads(line)
        if cmd.get("op") == "finish":
            out.batches = out.batches or 1
            return out
        if cmd.get("op") != "round":
            raise ValueError(f"unknown duet command {cmd!r}")
        k = int(cmd["batches"])
        timed = cmd.get("timed", True)
        if timed and out.batches not in (None, k):
            raise ValueError(f"timed rounds of {out.batches} and of {k} batches in one duet")
        cpu0, wall0, mono0 = _process_cpu_seconds(), time.perf_counter(), time.monotonic()
        if each_batch:
            t, each = cell.timed_each(k)
        else:
            t, each = cell.timed(k), None
        if timed:
            out.windows.append(timed_window(mono0))
            out.wall_seconds += time.perf_counter() - wall0
            out.cpu_seconds += _process_cpu_seconds() - cpu0
            out.batches = k
            out.seconds.append(t)
            if each is not None:
                out.batch_seconds.extend(each)
        reply = {"op": "done", "seconds": t}
        if hasattr(cell, "finished"):  # a run to an end of its own (time to accuracy): whether it is over
            reply["finished"] = bool(cell.finished)
        send(reply)
    raise RuntimeError("the duet's parent closed the control channel")


def await_warmup_turn(spec):
    """A duet side's turn to warm up alone (``spec["solo_warmup"]``, set by the parent for GPU
    duets): block on the control pipe until the parent says ``{"op": "warmup"}``, which it
    does only once the other side has warmed up and said "ready" (or before it starts). Call
    it after ``import mxnet`` and before anything touches the device (bind, first batches,
    cuDNN autotune). Returns ``warmup_window`` to fill: {"alone", "started", "ended"} in
    ``time.monotonic()`` seconds (CLOCK_MONOTONIC: one clock for every process of the
    machine, so the parent can check the two windows are disjoint)."""
    alone = bool(spec.get("control") and spec.get("solo_warmup"))
    if alone:
        fd, line = int(spec["control"][0]), b""
        while not line.endswith(b"\n"):  # byte by byte: serve_duet reads the rest of the pipe
            ch = os.read(fd, 1)
            if not ch:
                raise RuntimeError("the duet's parent closed the control channel before the warm-up")
            line += ch
        cmd = json.loads(line.decode())
        if cmd.get("op") != "warmup":
            raise ValueError(f"expected the warm-up turn, got {cmd!r}")
    return {"alone": alone, "started": time.monotonic(), "ended": None}


#: MXNet 1.x's values of MXNET_CUDNN_AUTOTUNE_DEFAULT (src/operator/nn/cudnn/cudnn_convolution-inl.h:
#: ``dmlc::GetEnv("MXNET_CUDNN_AUTOTUNE_DEFAULT", 1)``; 0: cudnnGet*_v7 heuristics, nothing timed;
#: otherwise cudnnFind*, which times each algorithm on the device)
AUTOTUNE_MEANINGS = {"0": "off: cuDNN's heuristics (cudnnGet*), nothing timed",
                     "1": "limited workspace: cudnnFind* times each algorithm, the fastest within the workspace",
                     "2": "fastest: cudnnFind* times each algorithm, the fastest whatever its workspace"}


def cudnn_choice(meta, warmup_window, environ=None):
    """What this worker can say of its convolution algorithms: the autotune setting in effect
    (``MXNET_CUDNN_AUTOTUNE_DEFAULT``, MXNet's default 1 when unset; a Convolution's own
    ``cudnn_tune`` attribute overrides it, and the zoo's networks set none), the cuDNN version
    MXNet loaded (``meta["cudnn"]`` from ``runtime_info``) and whether its warm-up, where
    autotune times the algorithms, ran alone on the device. The algorithms chosen per layer
    are not readable: MXNet 1.x keeps them in its process-wide ``CuDNNConvAlgoReg`` and
    neither exposes nor logs them."""
    env = os.environ if environ is None else environ
    raw = env.get("MXNET_CUDNN_AUTOTUNE_DEFAULT")
    value = (raw or "1").strip()
    return {"autotune": value, "autotune_set_by": "MXNET_CUDNN_AUTOTUNE_DEFAULT" if raw else "MXNet's default",
            "meaning": AUTOTUNE_MEANINGS.get(value, "unknown value (MXNet reads it as an integer)"),
            "cudnn_version": meta.get("cudnn"), "warmed_up_alone": bool(warmup_window.get("alone")),
            "algorithms": None,
            "algorithms_note": "per-layer algorithms are kept inside MXNet (CuDNNConvAlgoReg), not exposed"}


def serve_rounds(cell, control, ready):
    """``serve_duet`` (each round ``cell.timed(k)``) as (the timed rounds' seconds, their
    batches per round): what the kvstore and input-pipeline workers take."""
    served = serve_duet(cell, control, ready)
    return served.seconds, served.batches


def _loaded_library(fragment: str):
    """The path of a shared library this process has mapped whose name contains ``fragment``."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if fragment in os.path.basename(path):
                    return path
    except OSError:
        pass
    return None


def cuda_library_versions() -> dict:
    """CUDA runtime and cuDNN versions of the libraries MXNet loaded (cudaRuntimeGetVersion,
    cudnnGetVersion), e.g. {"cuda_runtime": "11.7", "cudnn": "8.5.0"}; empty when unknown."""
    import ctypes
    out = {}
    cudart = _loaded_library("libcudart")
    if cudart:
        try:
            v = ctypes.c_int()
            if ctypes.CDLL(cudart).cudaRuntimeGetVersion(ctypes.byref(v)) == 0:
                out["cuda_runtime"] = f"{v.value // 1000}.{(v.value % 1000) // 10}"
        except (OSError, AttributeError):
            pass
    cudnn = _loaded_library("libcudnn")
    if cudnn:
        try:
            fn = ctypes.CDLL(cudnn).cudnnGetVersion
            fn.restype = ctypes.c_size_t
            v = int(fn())
            major, minor, patch = (v // 1000, (v % 1000) // 100, v % 100) if v < 90000 else (v // 10000, (v % 10000) // 100, v % 100)
            out["cudnn"] = f"{major}.{minor}.{patch}"
        except (OSError, AttributeError):
            pass
    return out


#: the MXNet probe's speed figure (``mxnet_speed``): a 3x3 convolution of 64 to 64 channels on
#: 32 images of 28x28 in float32 on cpu(0), the kind of kernel the zoo's CPU cells spend their
#: time in; about SPEED_SECONDS of timed rounds after untimed calls
SPEED_SHAPE = (32, 64, 28, 28)
SPEED_SECONDS = 0.4


def mxnet_speed(mx, seconds: float = SPEED_SECONDS) -> dict:
    """How fast this MXNet computes here, for the session's duration estimate only
    (``measure/planning.speed_from``): {"conv_gflops", "rounds", "seconds"} (the probe adds
    its import's figure: ``import_mxnet``'s ``facts``). Never used to
    judge or correct a figure. Untimed calls for a tenth of ``seconds`` (at least two: oneDNN
    makes its primitive at the first), then rounds of 2 calls, each ending in
    ``mx.nd.waitall()``, for ``seconds``; the figure is the fastest round's (a neighbour or a
    slow spell only ever slows a round)."""
    call = speed_kernel(mx)
    t0, warm = time.perf_counter(), 0
    while warm < 2 or time.perf_counter() - t0 < seconds / 10:
        call()
        mx.nd.waitall()
        warm += 1
    rounds, t0 = [], time.perf_counter()
    while not rounds or time.perf_counter() - t0 < seconds:
        r0 = time.perf_counter()
        call()
        call()
        mx.nd.waitall()
        rounds.append(time.perf_counter() - r0)
    n, c, h, w = SPEED_SHAPE
    flops = 2.0 * n * c * c * 9 * h * w * 2
    return {"conv_gflops": flops / min(rounds) / 1e9, "rounds": len(rounds), "seconds": time.perf_counter() - t0}


def speed_kernel(mx):
    """The speed figure's kernel (``SPEED_SHAPE``) as a call of no arguments, its arrays made
    once; a call queues one convolution and returns its output (the caller waits for it)."""
    n, c, h, w = SPEED_SHAPE
    ctx = mx.cpu(0)
    x = mx.nd.ones((n, c, h, w), ctx=ctx) * 0.5
    k = mx.nd.ones((c, c, 3, 3), ctx=ctx) * 0.01

    def call():
        return mx.nd.Convolution(x, k, no_bias=True, kernel=(3, 3), pad=(1, 1), num_filter=c)
    return call


def probe(result_path: str) -> int:
    imported: dict = {}
    mx = import_mxnet(keep_compiled=True, facts=imported)
    out = runtime_info(mx)
    out["threads"] = thread_pools()
    try:
        out["mxnet_speed"] = {**mxnet_speed(mx), **imported}
    except Exception as exc:  # noqa: BLE001 - a build without the kernel: no figure, the probe stands
        out["mxnet_speed"] = {"error": error_line(str(exc), type(exc).__name__)}
    out["status"] = "ok"
    write_json(result_path, out)
    return 0


def serve(run, argv=None, prog: str = "pytest_mxperf.workers", *, exit_on_success: bool = True,
          error_exit_code: int = 0) -> int:
    """The worker protocol shared by every worker module: ``SPEC.json RESULT.json``.

    Applies the spec's memory cap, runs ``run(spec) -> dict``, and writes its result, or
    on any exception a one-line ``error`` / ``oom`` result (the traceback goes to stderr,
    whose tail the runner keeps). Exits with ``os._exit`` so that MXNet's engine shutdown,
    which can hang after an error, is skipped; a worker whose clean shutdown matters (a
    ps-lite worker finalises its cluster on exit) passes ``exit_on_success=False``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2:
        print(f"usage: python -m {prog} SPEC.json RESULT.json", file=sys.stderr)
        return 2
    spec_path, result_path = argv
    with open(spec_path) as fh:
        spec = json.load(fh)
    set_memory_cap(spec.get("memory_limit"))
    try:
        result = run(spec)
    except BaseException as exc:  # report, never hang: the runner classifies the rest
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        status = "oom" if isinstance(exc, MemoryError) or looks_like_oom(text) else "error"
        traceback.print_exc()
        write_json(result_path, {"status": status, "message": error_line(text, type(exc).__name__), "meta": {}})
        sys.stdout.flush()
        sys.stderr.flush()
        # Exit here, while the traceback still holds the failed run's objects: leaving the
        # except block would free them, and a KVStore's destructor then waits in ps-lite's
        # finalize barrier for peers that will never come.
        os._exit(error_exit_code)
    write_json(result_path, result)
    sys.stdout.flush()
    sys.stderr.flush()
    if exit_on_success:
        os._exit(0)
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "--probe":
        return probe(argv[1])
    print("usage: python -m pytest_mxperf.workers.protocol --probe RESULT.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
