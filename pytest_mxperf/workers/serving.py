"""A serving cell: MLPerf LoadGen's Server scenario (``mlperf_loadgen``) against a zoo model.

LoadGen sends single-sample queries at Poisson arrivals of ``target_qps`` from a seeded
schedule (``schedule_seed``: the same arrivals under every install), and times each from its
scheduled arrival to its completion. The system under test batches dynamically: a batch starts
with the first query waiting and takes the ones that arrive within ``batch_timeout_ms`` of it,
up to ``max_batch``; it runs on the smallest bound executor that holds it (sizes 1, 2, 4, ... up
to ``max_batch``, sharing one set of weights: a short batch pads to it), each batch ending in
``asnumpy()`` of its outputs after ``mx.nd.waitall()``. The queries' inputs come from a query
sample library of synthetic images (``answers.input_batch``, seeded).

The figures are read from LoadGen's own detail log (``mlperf_log_detail.txt``), written to
``log_dir`` (default: ``loadgen/`` beside the result file, this process's own folder; never
the working directory): p50, p90, p99 and the percentile the cell names
(``server_target_latency_percentile``, one of those LoadGen reports), the completed queries
per second, and early stopping's verdict. A run whose early stopping asks for more queries is
run once more with as many as it asked for; asked again, the process ends in a one-line error:
its tail is not established, so it is never passed.

``peak``: instead, the highest rate whose named percentile stays within ``latency_bound_ms``
with early stopping met, by bisection between a rate that held and one that did not, until
they are within ``peak_step`` of each other (a fraction: at most a third of the minimum
effect, the parent's to choose); each step a whole LoadGen run. Warm-up (bind, first batches)
is never timed: LoadGen starts after it.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time

from pytest_mxperf.workers import answers
from pytest_mxperf.workers.protocol import import_mxnet, mx_contexts, runtime_info, serve, serve_duet

#: the percentiles LoadGen's detail log reports (``result_<p>_percentile_latency_ns``)
PERCENTILES = {0.5: "50.00", 0.9: "90.00", 0.95: "95.00", 0.97: "97.00", 0.99: "99.00", 0.999: "99.90"}
#: the figures of a run, by the percentile whose latency each is
FIGURES = {0.5: "serving_p50_ms", 0.9: "serving_p90_ms", 0.99: "serving_p99_ms"}
#: samples in the query sample library (each query one of them, LoadGen's choice)
LIBRARY_SAMPLES = 64
#: the most queries a run is extended to when early stopping asks for more
MAX_QUERIES = 20000
#: a target-rate run that completed fewer queries a second than this share of those LoadGen
#: scheduled was not served: the queue grew through the run (its latencies are the queue's)
SERVED_SHARE = 0.9
#: single-sample batches timed for a probe's service rate (``service_rate``)
SERVICE_TRIES = 30


class ServingError(RuntimeError):
    """A serving run that cannot be measured or judged (one line)."""


def early_stopping_queries(percentile: float, confidence: float = 0.99) -> int:
    """The fewest queries a run needs for LoadGen's early stopping to establish ``percentile``
    within the bound when none is over it: n with ``percentile ** n <= 1 - confidence`` (its
    confidence 99%), and one more: 460 for p99, 45 for p90 (a p90 run of 40 queries was
    refused here, one of 50 met)."""
    import math
    return math.ceil(math.log(1.0 - confidence) / math.log(percentile)) + 1


def _check(spec: dict) -> dict:
    """The serving settings of ``spec``, checked before MXNet is imported: one-line errors."""
    s = dict(spec.get("serving") or {})
    pct = float(s.get("percentile", 0.99))
    if pct not in PERCENTILES:
        raise ServingError(f"percentile {pct:g}: LoadGen reports {', '.join(f'{p:g}' for p in PERCENTILES)}; "
                           "name one of them")
    bound = float(s.get("latency_bound_ms", 0))
    if bound <= 0:
        raise ServingError(f"latency_bound_ms must be positive, got {s.get('latency_bound_ms')!r}")
    if not (s.get("peak") or s.get("probe")) and float(s.get("target_qps", 0)) <= 0:
        raise ServingError(f"target_qps must be positive, got {s.get('target_qps')!r}")
    max_batch = int(s.get("max_batch", 1))
    if max_batch < 1:
        raise ServingError(f"max_batch must be at least 1, got {max_batch}")
    return dict(s, percentile=pct, latency_bound_ms=bound, max_batch=max_batch,
                batch_timeout_ms=float(s.get("batch_timeout_ms", 2.0)),
                min_queries=int(s.get("min_queries", early_stopping_queries(pct))), min_duration_ms=int(s.get("min_duration_ms", 2000)),
                schedule_seed=int(s.get("schedule_seed", 20261203)),
                peak_start=float(s.get("peak_start", 50.0)), peak_floor=float(s.get("peak_floor", 1.0)),
                peak_step=float(s.get("peak_step", 0.015)), peak_runs=int(s.get("peak_runs", 14)))


class _Model:
    """A zoo model bound for scoring at batch sizes 1, 2, 4, ... up to ``max_batch`` (one
    set of weights shared): ``run(inputs)`` scores up to ``max_batch`` samples, synchronised."""

    def __init__(self, mx, name: str, max_batch: int, contexts, seed: int):
        import numpy as np

        from pytest_mxperf import zoo
        spec = zoo.get_model(name)
        self.mx, self.np, self.shape = mx, np, tuple(spec.input_shape)
        ctx = mx_contexts(mx, contexts)[0]
        sym = zoo.build_symbol(name)
        sizes, n = [], 1
        while n < max_batch:
            sizes.append(n)
            n *= 2
        sizes.append(max_batch)
        self.mods = {}
        first = None
        for b in sorted(sizes, reverse=True):  # the largest first: the others share its memory
            mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=ctx)
            mod.bind(data_shapes=[mx.io.DataDesc("data", (b,) + self.shape, np.float32)], for_training=False,
                     shared_module=first)
            if first is None:
                mod.init_params(initializer=answers.initializer(mx, seed))
                first = mod
            self.mods[b] = mod
        self.sizes = sizes
        self.ctx = ctx

    def run(self, inputs) -> None:
        n = len(inputs)
        b = next(s for s in self.sizes if s >= n)
        batch = self.np.zeros((b,) + self.shape, dtype=self.np.float32)
        batch[:n] = inputs
        mod = self.mods[b]
        mod.forward(self.mx.io.DataBatch([self.mx.nd.array(batch, ctx=self.ctx)]), is_train=False)
        mod.get_outputs()[0].asnumpy()
        self.mx.nd.waitall()


class _Server:
    """The system under test: queries queue as LoadGen issues them; one thread batches them
    (the first waiting and those within the batching timeout, up to the bound) and completes
    each after its batch."""

    def __init__(self, lg, model: _Model, library, max_batch: int, timeout_s: float):
        self.lg, self.model, self.library = lg, model, library
        self.max_batch, self.timeout_s = max_batch, timeout_s
        self.q: "queue.Queue" = queue.Queue()
        self.batches = 0
        self.failure = None
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def issue(self, samples) -> None:
        for s in samples:
            self.q.put((s.id, s.index))

    def flush(self) -> None:
        pass

    def stop(self) -> None:
        self.q.put(None)
        self.thread.join()

    def _loop(self) -> None:
        while True:
            first = self.q.get()
            if first is None:
                return
            batch, ends = [first], time.monotonic() + self.timeout_s
            while len(batch) < self.max_batch:
                left = ends - time.monotonic()
                try:
                    item = self.q.get(timeout=left) if left > 0 else self.q.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self.q.put(None)
                    break
                batch.append(item)
            try:
                self.model.run(self.library[[i for _, i in batch]])
            except BaseException as exc:  # noqa: BLE001 - said by the run; its queries still completed
                self.failure = self.failure or f"{type(exc).__name__}: {exc}"
            self.batches += 1
            self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(qid, 0, 0) for qid, _ in batch])


def read_detail(path: str) -> dict:
    """LoadGen's detail log (``:::MLLOG {json}`` lines) as key -> value (the last of each)."""
    out = {}
    with open(path) as fh:
        for line in fh:
            if line.startswith(":::MLLOG "):
                try:
                    rec = json.loads(line[len(":::MLLOG "):])
                except ValueError:
                    continue
                out[rec.get("key")] = rec.get("value")
    return out


def run_figures(detail: dict, percentile: float) -> dict:
    """A run's figures from its detail log: p50/p90/p99 and the named percentile in ms, the
    completed queries per second, the query count and early stopping's verdict."""
    def ms(p):
        v = detail.get(f"result_{PERCENTILES[p]}_percentile_latency_ns")
        if v is None:
            raise ServingError(f"LoadGen's log holds no {PERCENTILES[p]} percentile latency")
        return float(v) / 1e6
    out = {name: ms(p) for p, name in FIGURES.items()}
    out["serving_latency_ms"] = ms(percentile)
    out["serving_qps"] = float(detail.get("result_completed_samples_per_sec") or 0.0)
    out["scheduled_qps"] = float(detail.get("result_scheduled_samples_per_sec") or 0.0)
    out["queries"] = int(detail.get("result_query_count") or 0)
    out["early_stopping_met"] = bool(detail.get("early_stopping_met"))
    out["early_stopping"] = " ".join(str(detail.get("early_stopping_result") or "").split())
    out["overlatency"] = int(detail.get("result_overlatency_query_count") or 0)
    return out


def _more_queries(text: str) -> int:
    """How many more queries early stopping asks for, from its result line (0: none said)."""
    import re
    m = re.search(r"at least (\d+) more queries", text)
    return int(m.group(1)) if m else 0


def one_run(lg, model: _Model, library, s: dict, qps: float, log_dir: str, min_queries: int) -> dict:
    """One whole LoadGen Server run at ``qps``: its figures (``run_figures``)."""
    os.makedirs(log_dir, exist_ok=True)
    server = _Server(lg, model, library, s["max_batch"], s["batch_timeout_ms"] / 1000.0)
    sut = lg.ConstructSUT(server.issue, server.flush)
    qsl = lg.ConstructQSL(len(library), len(library), lambda idx: None, lambda idx: None)
    try:
        ts = lg.TestSettings()
        ts.scenario = lg.TestScenario.Server
        ts.mode = lg.TestMode.PerformanceOnly
        ts.server_target_qps = float(qps)
        ts.server_target_latency_ns = int(s["latency_bound_ms"] * 1e6)
        ts.server_target_latency_percentile = s["percentile"]
        ts.min_query_count = int(min_queries)
        ts.min_duration_ms = int(s["min_duration_ms"])
        ts.schedule_rng_seed = s["schedule_seed"]
        out = lg.LogOutputSettings()
        out.outdir = log_dir
        out.copy_summary_to_stdout = False
        settings = lg.LogSettings()
        settings.log_output = out
        settings.enable_trace = False
        started = time.perf_counter()
        lg.StartTestWithLogSettings(sut, qsl, ts, settings)
        seconds = time.perf_counter() - started
    finally:
        server.stop()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    if server.failure:
        raise ServingError(f"the model failed while serving: {server.failure}")
    figures = run_figures(read_detail(os.path.join(log_dir, "mlperf_log_detail.txt")), s["percentile"])
    return dict(figures, target_qps=float(qps), seconds=seconds, batches=server.batches)


def settled_run(lg, model, library, s: dict, qps: float, log_dir: str) -> dict:
    """A run at ``qps`` whose early stopping is met: extended once to the queries it asked
    for; asked again (or beyond ``MAX_QUERIES``): ``ServingError``, never passed. A rate the
    machine does not serve (``SERVED_SHARE``): ``ServingError`` at once."""
    run = one_run(lg, model, library, s, qps, log_dir, s["min_queries"])
    if not served(run):
        raise ServingError(f"this machine cannot serve {qps:g} queries/s: it completed {run['serving_qps']:.4g} a "
                           f"second of the {run['scheduled_qps']:.4g} scheduled (the queue grew through the run; "
                           "a lower target rate, or the peak cell for the highest it serves)")
    if run["early_stopping_met"]:
        return run
    more = _more_queries(run["early_stopping"])
    wanted = run["queries"] + max(more, s["min_queries"])
    if wanted <= MAX_QUERIES:
        run = one_run(lg, model, library, s, qps, log_dir, wanted)
        if run["early_stopping_met"]:
            return dict(run, extended=True)
    raise ServingError(f"early stopping at {qps:g} queries/s is not met ({run['early_stopping']}): its "
                       f"{s['percentile']:g} percentile is not established, so the cell is not passed")


def served(run: dict) -> bool:
    """Whether a run's server kept up with its schedule: completed at least ``SERVED_SHARE`` of
    the queries a second LoadGen scheduled (a run too short for the queue to fill can keep its
    percentile within a bound at a rate its server cannot serve: ResNet-50 v2 on a 2-vCPU Zen 3
    held p90 within 2 s at 32 queries/s over 45 queries, completing 16.4 a second)."""
    return not run.get("scheduled_qps") or run["serving_qps"] >= SERVED_SHARE * run["scheduled_qps"]


def within_bound(run: dict, s: dict) -> bool:
    """A peak step holds: early stopping met, the named percentile within the bound, served."""
    return run["early_stopping_met"] and run["serving_latency_ms"] <= s["latency_bound_ms"] and served(run)


class PeakSearch:
    """The highest rate that holds (a whole run at it: its named percentile within the bound,
    early stopping met), one run at a time: from ``start`` doubling until a rate fails, or
    halving until one holds (not below ``floor``), then bisection (geometric) until the rate
    that held and the one that failed are within ``step`` (a fraction) of each other; at most
    ``limit`` runs. ``rate`` is the next rate to run (None once ``done``), ``record(ok)`` its
    answer; ``good``/``bad`` the highest rate that held and the lowest that failed so far,
    ``tried`` the rates with their answers. Pure: a process's search calls ``record`` after
    each run (``search_peak``), a duet side after each of its turns (``_PeakSteps``)."""

    def __init__(self, start: float, floor: float, step: float, limit: int):
        self.floor, self.step, self.limit = float(floor), float(step), int(limit)
        self.good = self.bad = None
        self.tried = []
        self.rate = float(start)

    @property
    def done(self) -> bool:
        return self.rate is None

    def record(self, ok: bool) -> None:
        rate = self.rate
        self.tried.append((rate, bool(ok)))
        if ok:
            self.good = rate
        else:
            self.bad = rate
        if len(self.tried) >= self.limit:
            nxt = None
        elif self.good is None:
            nxt = rate / 2.0 if rate / 2.0 >= self.floor else None
        elif self.bad is None:
            nxt = rate * 2.0
        elif self.bad / self.good - 1.0 <= self.step:
            nxt = None
        else:
            nxt = (self.good * self.bad) ** 0.5
        self.rate = nxt

    def run(self, holds) -> "PeakSearch":
        """This search to its end, ``holds(rate)`` answering each run; returns itself."""
        while not self.done:
            self.record(holds(self.rate))
        return self


def search_peak(holds, start: float, floor: float, step: float, limit: int):
    """``PeakSearch`` run to its end with ``holds(rate)`` answering each run. Returns (the
    highest rate that held or None, the lowest that failed or None, the rates tried with
    their answers). Pure but for ``holds``."""
    search = PeakSearch(start, floor, step, limit).run(holds)
    return search.good, search.bad, search.tried


def _peak_run(lg, model, library, s: dict, qps: float, log_dir: str, runs: list) -> bool:
    """One step of a peak search: a whole run at ``qps`` (its logs in ``peak-<n>``), kept in
    ``runs``; whether it held."""
    r = one_run(lg, model, library, s, qps, os.path.join(log_dir, f"peak-{len(runs)}"), s["min_queries"])
    held = within_bound(r, s)
    runs.append(dict({k: r[k] for k in ("target_qps", "serving_latency_ms", "serving_qps", "scheduled_qps",
                                        "early_stopping_met", "seconds")}, held=held))
    return held


def peak_found(search: PeakSearch, s: dict, runs: list, meta: dict) -> dict:
    """A closed search's result: its peak rate, and its runs in ``meta``; a bound no rate
    meets, or a search the runs could not close: ``ServingError`` (one line)."""
    good, bad, step = search.good, search.bad, s["peak_step"]
    if good is None:
        raise ServingError(f"no rate from {s['peak_start']:g} down to {s['peak_floor']:g} queries/s keeps the "
                           f"{s['percentile']:g} percentile within {s['latency_bound_ms']:g} ms")
    if bad is None or bad / good - 1.0 > step:
        raise ServingError(f"the peak search did not close within {s['peak_runs']} runs: {good:g} queries/s held"
                           + (f", {bad:g} did not" if bad is not None else ", nothing above it failed"))
    meta["peak_runs"] = runs
    return {"status": "ok", "message": "", "peak_qps": good, "meta": meta}


def _search(s: dict) -> PeakSearch:
    return PeakSearch(s["peak_start"], s["peak_floor"], s["peak_step"], s["peak_runs"])


def peak(lg, model, library, s: dict, log_dir: str, meta: dict) -> dict:
    """A peak search of whole LoadGen runs (``PeakSearch`` from ``peak_start``, not below
    ``peak_floor`` queries/s, to ``peak_step``, at most ``peak_runs`` runs): ``peak_found``."""
    runs = []
    search = _search(s).run(lambda qps: _peak_run(lg, model, library, s, qps, log_dir, runs))
    return peak_found(search, s, runs, meta)


class _TargetRuns:
    """A duet side of a target-rate cell: each round ``timed(k)`` is k whole settled runs at
    the target rate (``settled_run``; ``StartTest`` runs a whole scenario, so a round cannot
    be shorter), its seconds returned; ``runs`` keeps every run's figures in order."""

    def __init__(self, lg, model, library, s: dict, log_dir: str):
        self.args, self.s, self.log_dir = (lg, model, library), s, log_dir
        self.runs = []

    def timed(self, k: int) -> float:
        t0 = time.perf_counter()
        for _ in range(k):
            where = os.path.join(self.log_dir, f"run-{len(self.runs)}")
            self.runs.append(settled_run(*self.args, self.s, float(self.s["target_qps"]), where))
        return time.perf_counter() - t0


class _PeakSteps:
    """A duet side of a peak cell: each round one step of its own search (``PeakSearch``),
    the parent alternating the two sides' steps until each says it is ``finished``."""

    def __init__(self, lg, model, library, s: dict, log_dir: str):
        self.args, self.s, self.log_dir = (lg, model, library), s, log_dir
        self.search, self.runs = _search(s), []

    @property
    def finished(self) -> bool:
        return self.search.done

    def timed(self, k: int) -> float:
        t0 = time.perf_counter()
        for _ in range(k):
            if not self.search.done:
                self.search.record(_peak_run(*self.args, self.s, self.search.rate, self.log_dir, self.runs))
        return time.perf_counter() - t0


def service_rate(model, library, tries: int = SERVICE_TRIES) -> float:
    """The queries a second this process serves one at a time, nothing queued: 1 / the
    median of ``tries`` single-sample batches (each to ``asnumpy()`` after ``waitall()``),
    after the warm-up. A target rate set as a share of it is a share of this machine's own
    speed at this model (``probe``)."""
    import statistics
    took = []
    for i in range(tries):
        t0 = time.perf_counter()
        model.run(library[i % len(library):i % len(library) + 1])
        took.append(time.perf_counter() - t0)
    return 1.0 / statistics.median(took)


#: the figures of a target-rate cell, each side's the median over its runs
_RUN_FIGURES = ("serving_latency_ms", "serving_p50_ms", "serving_p90_ms", "serving_p99_ms", "serving_qps")
_RUN_FACTS = ("target_qps", "queries", "early_stopping", "overlatency", "seconds", "batches")


def _target_result(runs: list, meta: dict) -> dict:
    """A target-rate cell's result from its settled runs (one in a process; a duet side's
    every timed run): each figure the median over the runs, every run's facts in meta."""
    import statistics
    meta["serving_runs"] = [{k: r[k] for k in _RUN_FACTS + _RUN_FIGURES} for r in runs]
    meta["serving_run"] = {k: runs[-1][k] for k in _RUN_FACTS}
    out = {"status": "ok", "message": "", "meta": meta, "target_qps": float(runs[0]["target_qps"])}
    out.update({k: statistics.median(r[k] for r in runs) for k in _RUN_FIGURES})
    return out


def run(spec: dict) -> dict:
    s = _check(spec)
    try:
        import mlperf_loadgen as lg
    except ImportError:
        return {"status": "unavailable", "meta": {},
                "message": "mlperf_loadgen is not installed in this interpreter (pip install mlcommons-loadgen)"}
    w = spec["workload"]
    from pytest_mxperf import zoo
    zoo.get_model(w["model"])  # an unknown model fails before MXNet's import
    t0, started = time.perf_counter(), time.monotonic()
    mx = import_mxnet()
    meta = runtime_info(mx)
    meta["import_seconds"] = time.perf_counter() - t0
    seed = int(spec.get("seed", 0))
    model = _Model(mx, w["model"], s["max_batch"], w["contexts"], seed)
    library = answers.input_batch((LIBRARY_SAMPLES,) + model.shape, 1000 + seed)
    for _ in range(3):  # untimed: the first batches of every bound size (oneDNN makes its primitives)
        for b in model.sizes:
            model.run(library[:b])
    if s.get("probe"):
        return {"status": "ok", "message": "", "meta": meta, "service_qps": service_rate(model, library)}
    log_dir = spec["log_dir"]
    meta["loadgen_log_dir"] = log_dir
    meta["serving"] = {k: s[k] for k in ("percentile", "latency_bound_ms", "max_batch", "batch_timeout_ms",
                                         "schedule_seed")}
    if spec.get("control"):
        # a duet: the parent alternates whole runs (a target-rate cell: A,B,B,A) or search
        # steps (a peak cell, each side's own search, until both closed) with the partner's;
        # between its turns this side blocks on its pipe and serves nothing
        window = {"alone": False, "started": started, "ended": time.monotonic()}
        cell = (_PeakSteps if s.get("peak") else _TargetRuns)(lg, model, library, s, log_dir)
        served = serve_duet(cell, spec["control"], {"units": "peak search steps" if s.get("peak") else "LoadGen runs",
                                                    "warmup_window": window})
        extra = {"round_seconds": list(served.seconds), "batches_per_round": 1}
        if s.get("peak"):
            return dict(peak_found(cell.search, s, cell.runs, meta), **extra)
        if not cell.runs:
            raise ServingError("the duet ended before this side served a run")
        return dict(_target_result(cell.runs, meta), **extra)
    if s.get("peak"):
        return peak(lg, model, library, s, log_dir, meta)
    # one layout of the folder whatever the mode: a target run's logs in run-<n>, a peak step's in peak-<n>
    return _target_result([settled_run(lg, model, library, s, float(s["target_qps"]), os.path.join(log_dir, "run-0"))],
                          meta)


def main(argv=None) -> int:
    import sys
    argv = list(sys.argv[1:] if argv is None else argv)
    # the result file's folder is this process's own: LoadGen's logs go beside it unless the
    # spec names a folder (never the working directory)
    own = os.path.join(os.path.dirname(os.path.abspath(argv[-1])), "loadgen") if argv else "loadgen"
    return serve(lambda spec: run(dict(spec, log_dir=spec.get("log_dir") or own)), argv,
                 "pytest_mxperf.workers.serving")


if __name__ == "__main__":
    main()
