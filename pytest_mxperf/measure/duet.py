"""Duet A/B: one pair of resident workers, one per MXNet install, taking turns.

Shared cloud VMs switch between speed regimes within seconds; two processes measured one
after the other can land in different regimes. A duet (Bulej et al., "Duet Benchmarking:
Improving Measurement Accuracy in the Cloud", ICPE 2020) cancels that: both workers import
MXNet, bind and warm up once, then the parent alternates short timed rounds between them,
A,B,B,A,A,B,B,A,..., exactly one of them running at any moment while the other blocks on
its control pipe (``workers/protocol.serve_duet``). A slow spell longer than a round
slows both sides of the round pair alike, so the ratio of their times cancels it.

``run_pair`` runs one such pair and returns a RunResult per side: each carries the timed
rounds in the order they ran (round j of one side ran right next to round j of the
other) and ``meta["duet"]``: which side ran first, the round size, and how much CPU the
waiting side used while its partner ran (evidence that it really waited).

Worker kinds that can be resident (``RESIDENT_MODULES``: each builds its cell once, warms
up untimed and serves rounds through ``protocol.serve_duet`` when its spec has
``control``) run as duets in A/B mode: the throughput worker (score, train, latency, your
own network; a latency cell's round synchronises each of its batches, so that its p50 / p99
are single batches' latencies, as in a process, not round totals), ``commbench`` (kvstore:
a unit of a round is one synchronised push+pull of every key), ``pipeline`` (io: a unit
is one epoch of the loader alone, or one fed training step) and ``convergence`` (time to
accuracy: both sides train one seed to the target, a round a quarter epoch, the parent
alternating them until each has reached it; nothing untimed, no sizing: ``TO_THE_END``.
Run one after the other, two such runs of 2.5-3.5 s land in different spells of a shared
VM: docs/how-it-measures.md, "What is measured, and how each figure is judged", the
time-to-accuracy figure)
and the ps-lite cluster launcher (``measure/cluster.py``: a distributed cell; the "worker" of
a side is the launcher, which relays each round to every worker of its cluster and answers
with the slowest one's seconds, so a side's whole cluster is started once a pair).
A kind that cannot be resident (a worker module the suite does not declare here) keeps
fresh process pairs.

**One pair, several cells.** ``run_cells_pair`` starts one such pair for a grid's CPU cells of
the throughput worker (``shares_a_pair``): both workers import MXNet once, then bind, warm up and
time each cell in turn, "finish" moving both to the next (``throughput.measure_cells`` with
``control``); a cell one side cannot run says "over" instead of "ready". The caller (the
scheduler) varies the cells' order from pair to pair, as it does for a process of several cells.

The process pair is the unit of replication: the gate turns each pair into one estimate
(``stats.duet_pair_log_ratio``) and judges the pairs (``verdict_duet``).

**A GPU duet warms up one side at a time.** cuDNN autotune (MXNet's default,
``MXNET_CUDNN_AUTOTUNE_DEFAULT=1``) times each convolution algorithm on the device during a
worker's first batches and keeps the fastest for the life of the process: timed while the
partner ran too, a choice would carry that contention into every timed round, a bias that
alternating rounds cannot cancel. So the side that runs first is told to warm up
(``{"op": "warmup"}``, ``protocol.await_warmup_turn``: bind, first batches, autotune) while the
other waits on its pipe, and the second only once the first has said "ready". Each side's
``meta["cudnn_choice"]`` records the autotune setting, the cuDNN version and that it warmed up
alone (MXNet 1.x does not expose the algorithms it chose). A CPU duet's sides warm up
together, as before: MXNet's CPU kernels (oneDNN) are chosen by shape and instruction set, not
by timing them, so nothing a contended warm-up decides lasts into the rounds, and warming up
one after the other would add a whole warm-up (at least a second) to every pair.

**Memory on one GPU.** Both pools sit on one device. The judged ``gpu_memory_mib`` of each
side is its own process's, read here from NVML (``nvml.NVML.process_memory``: the worker's
PID, its CUDA context and MXNet's pool) after its warm-up and after the timed rounds; the
device-wide figure the worker reads (``mx.context.gpu_memory_info``: total minus free, the
partner included) is shown as ``gpu_device_memory_used_mib``, never judged. A pair that cannot
hold two pools is not run as a duet (``NoRoomForTwo``; the session runs the cell's A/B pairs
as process pairs and says so in one line): when what is known of the cell's need (an earlier
per-process figure) says two do not fit the GPU's memory, before anything starts; when the
first side's own use after its warm-up, with ``POOL_MARGIN`` and ``POOL_RESERVE_MIB``, is more
than the device has free; and when the second side's warm-up runs out of GPU memory beside it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.machine import cuda_devices, nvml
from pytest_mxperf.measure import runner
from pytest_mxperf.model import kinds
from pytest_mxperf.model.measurement import RunResult
from pytest_mxperf.model.options import TIME_BUDGET_S
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.proc import spawn, worker

#: target length of one timed round (both sides run the same number of batches per round)
ROUND_SECONDS = 0.15
#: timed rounds per side: 2 x the time budget in rounds (20 at the default 1.5 s), within these;
#: a cell whose one batch outlasts a round gets fewer, longer rounds (ResNet-50 v2 b8 here:
#: 0.42 s a batch, 7 rounds a side, one pair 19 s instead of 23 s with 10)
MIN_ROUNDS, MAX_ROUNDS = 6, 40
#: untimed rounds of one batch each, alternated, after both sides warmed up
SETTLE_ROUNDS = 3
#: untimed rounds that grow the round size to about ROUND_SECONDS, at most
SIZING_TRIES = 4
#: bound on a worker's exit after "finish" (it writes its result and exits; a worker with
#: parts measured after the rounds measures them first, alone: its partner waits or has exited)
FINISH_TIMEOUT = 60.0

#: the worker modules that serve duet rounds (``workers/protocol.serve_duet``) when their
#: spec has ``control``: those of the kinds ``model/kinds.py`` declares ``resident`` (a live
#: view). Declared there, not read from the module: the parent never imports a worker kind it
#: is given (a user's worker module may import MXNet at its top).
RESIDENT_MODULES = kinds.RESIDENT_MODULES
#: the resident kinds whose rounds are the measured work itself, not repetitions of it: a
#: training run to a target accuracy, whose seconds to accuracy are the sum of its rounds; a
#: serving peak search, a round one whole LoadGen run at the side's next rate.
#: No untimed round (it would train untimed) and no sizing (the worker cuts its epochs into
#: rounds, ``convergence.DUET_EPOCH_ROUNDS``): rounds of one unit alternate, A,B,B,A,..., until
#: each side says it is finished; a side that finishes first waits, its partner runs on alone
TO_THE_END = kinds.TO_THE_END
#: the resident kinds whose round is one whole run that cannot be cut shorter (a serving
#: cell's LoadGen run at its target rate): kind -> timed rounds a side, A,B,B,A; no untimed
#: round, no sizing (a whole run is seconds to minutes: warm-up happens before "ready")
WHOLE_RUNS = kinds.WHOLE_RUNS
#: bound on the rounds of a run to the end (the worker stops at its own max_epochs first)
MAX_TO_THE_END_ROUNDS = 10_000


#: a second pool is started beside the first only if the device's free memory after the
#: first side's warm-up is at least the first side's own use times (1 + POOL_MARGIN) plus
#: POOL_RESERVE_MIB: the other install may need somewhat more than this one (another cuDNN
#: workspace, another pool rounding), and cudnnFind allocates its trial workspaces outside
#: MXNet's pool while it autotunes
POOL_MARGIN = 0.15
POOL_RESERVE_MIB = 512.0


class NoRoomForTwo(Exception):
    """Two pools of this cell do not fit on its GPU: run its A/B pairs as process pairs.
    ``str()`` is the reason in one line."""


def resident(module: str) -> bool:
    """Whether ``module``'s worker serves duet rounds (A/B pairs run as duets), or runs one
    measurement per process (A/B pairs are fresh processes back to back)."""
    return module in RESIDENT_MODULES


class DuetError(Exception):
    """One side of the pair failed; ``side`` names it ("candidate" or "reference")."""

    def __init__(self, side: str, stopped: Optional[str], message: str):
        super().__init__(message)
        self.side, self.stopped = side, stopped


@dataclasses.dataclass
class _Side:
    name: str                       # "candidate" | "reference"
    python: Optional[str]
    env: Dict[str, str]
    defaults: Dict[str, str]
    rss_limit: Optional[int]
    workdir: Path
    proc: object = None
    to_child: object = None         # file: parent -> worker commands
    from_child: object = None       # raw file: worker -> parent replies (read unbuffered: see receive)
    unread: bytes = b""             # what was read from the worker past its last whole line
    sampler: object = None
    started: float = 0.0
    waiting_cpu: float = 0.0        # CPU seconds this side used while its partner ran
    partner_seconds: float = 0.0    # seconds its partner's rounds took
    ready: Optional[Dict] = None    # the worker's "ready" message (its warm-up window)
    warmup_turn: Optional[int] = None   # 1 / 2: warmed up alone, first / second; None: together
    gpu_mib: Dict[str, Optional[float]] = dataclasses.field(default_factory=dict)  # NVML, own PID

    @property
    def result_path(self) -> Path:
        return self.workdir / "result.json"

    def cpu_seconds(self) -> float:
        import psutil
        try:
            t = psutil.Process(self.proc.pid).cpu_times()
            return t.user + t.system
        except psutil.Error:
            return 0.0

    def send(self, **cmd) -> None:
        try:
            self.to_child.write(json.dumps(cmd) + "\n")
            self.to_child.flush()
        except (BrokenPipeError, ValueError):
            raise DuetError(self.name, None, f"the {self.name} worker is gone") from None

    def receive(self, timeout: float, stopped: str = "timeout") -> Dict:
        """The worker's next reply; DuetError when it exits or stays silent past ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DuetError(self.name, stopped, f"no answer from the {self.name} worker in {timeout:g} s")
            if b"\n" in self.unread:  # a worker of several cells may say two things at once ("over", "ready")
                line, _, self.unread = self.unread.partition(b"\n")
                return json.loads(line)
            ready, _, _ = select.select([self.from_child], [], [], min(left, worker.WATCHDOG_POLL_S))
            if ready:
                data = self.from_child.read(65536)
                if not data:
                    raise DuetError(self.name, None, f"the {self.name} worker exited")
                self.unread += data
                continue
            if self.rss_limit and worker.tree_rss(self.proc.pid) > self.rss_limit:
                raise DuetError(self.name, "rss", "over the host memory cap")


class _GpuView:
    """The cell's GPUs as NVML sees them from here (no CUDA): their memory, and what each
    worker process holds on them."""

    def __init__(self, workload: Workload, env: Mapping[str, str]):
        self.facade = nvml.load(env=env)
        visible = {g["mxnet_ctx"]: g for g in cuda_devices.visible_gpus(self.facade, env)} \
            if self.facade.available else {}
        facts = {g["index"]: g for g in self.facade.static_facts()} if self.facade.available else {}
        self.indices = [visible[c]["nvml_index"] for c in workload.contexts
                        if c in visible and visible[c].get("nvml_index") is not None]
        self.names = ", ".join(f"{c} ({facts.get(visible[c]['nvml_index'], {}).get('name') or 'GPU'})"
                               for c in workload.contexts if c in visible)
        totals = [facts.get(i, {}).get("memory_total_bytes") for i in self.indices]
        self.total_mib = min(t for t in totals) / 2 ** 20 if totals and None not in totals else None

    def own_mib(self, pid: int) -> Optional[float]:
        """What process ``pid`` and its descendants hold on the cell's GPUs (MiB); None when
        NVML cannot say or does not list them (see ``nvml.NVML.process_memory``)."""
        if not self.indices:
            return None
        _, own = self.facade.own_memory(pid, self.indices)
        return own / 2 ** 20 if own is not None else None

    def free_mib(self) -> Optional[float]:
        """The least free memory among the cell's GPUs (device-wide: for deciding, never a figure)."""
        free = [g.get("memory_free_bytes") for g in self.facade.volatile_facts(self.indices)]
        if not free or None in free:
            return None
        return min(free) / 2 ** 20


def pools_fit_before(total_mib: Optional[float], need_mib: Optional[float], where: str) -> Optional[str]:
    """Why two pools of a cell that needs ``need_mib`` a process cannot share a GPU of
    ``total_mib``, or None (they may, or nothing is known)."""
    if not total_mib or not need_mib:
        return None
    wanted = 2 * need_mib * (1 + POOL_MARGIN) + POOL_RESERVE_MIB
    if wanted <= total_mib:
        return None
    return (f"two pools do not fit on {where}: {total_mib:.0f} MiB, and one process of this cell "
            f"held {need_mib:.0f} MiB")


def pools_fit_after(first: str, own_mib: Optional[float], free_mib: Optional[float], where: str) -> Optional[str]:
    """Why the second side must not start beside the first, whose warm-up left it holding
    ``own_mib`` with ``free_mib`` free on the device, or None."""
    if own_mib is None or free_mib is None:
        return None
    wanted = own_mib * (1 + POOL_MARGIN) + POOL_RESERVE_MIB
    if free_mib >= wanted:
        return None
    return (f"two pools do not fit on {where}: the {first}'s warm-up holds {own_mib:.0f} MiB and "
            f"{free_mib:.0f} MiB are free, {wanted:.0f} MiB wanted for the other side")


def rounds_for(time_budget: float, round_seconds: float = ROUND_SECONDS) -> int:
    """Timed rounds per side for a time budget (seconds per worker in process mode): about
    2 x the budget of timed work a side, in rounds of ``round_seconds`` (longer than
    ROUND_SECONDS when one batch of the slower side already takes longer: seen with MXNet
    1.6.0's ResNet-50 v2 b8 at 1.6 s a batch, whose 20 rounds made one pair last 52 s),
    within [MIN_ROUNDS, MAX_ROUNDS]."""
    per_round = max(ROUND_SECONDS, round_seconds)
    return max(MIN_ROUNDS, min(MAX_ROUNDS, int(round(2 * time_budget / per_round))))


def _start(side: _Side, workload: Workload, spec: Dict, module: str = runner.WORKER_MODULE) -> None:
    c_read, p_write = os.pipe()   # parent -> child
    p_read, c_write = os.pipe()   # child -> parent
    spec = dict(spec, control=[c_read, c_write], phase_path=str(side.workdir / "measuring"))
    spec_path = side.workdir / "spec.json"
    spec_path.write_text(json.dumps(spec, sort_keys=True))
    side.started = time.perf_counter()
    try:
        side.proc = spawn.start(spawn.python_command(side.python, module) + [str(spec_path), str(side.result_path)],
                                env=side.env, log_path=side.workdir / "worker.log", pass_fds=(c_read, c_write))
    finally:
        os.close(c_read)
        os.close(c_write)
    side.to_child = os.fdopen(p_write, "w", buffering=1)
    # unbuffered: select() sees only the pipe, not lines a buffered reader already took from it
    side.from_child = os.fdopen(p_read, "rb", buffering=0)
    # no utilisation sampler: each side waits half of the time by design, and its CPU use
    # while waiting is measured round by round instead (waiting_cpu_share)


def _timed_round(runs: Sequence[_Side], k: int, timeout: float, finished: Optional[Dict[str, bool]] = None) -> None:
    """One round pair: each side in ``runs`` order runs k units while the other waits. With
    ``finished`` (a run to the end: side name -> whether it said it is finished, updated from
    each reply) a finished side sits out and its partner runs alone, nobody waiting on it."""
    for i, side in enumerate(runs):
        if finished is not None and finished[side.name]:
            continue
        other = runs[1 - i]
        waits = finished is None or not finished[other.name]
        cpu0 = other.cpu_seconds() if waits else 0.0
        t0 = time.perf_counter()
        side.send(op="round", batches=k, timed=True)
        reply = side.receive(timeout)
        if waits:
            other.partner_seconds += time.perf_counter() - t0
            other.waiting_cpu += max(0.0, other.cpu_seconds() - cpu0)
        if finished is not None:
            finished[side.name] = bool(reply.get("finished"))


def run_to_the_end(order: Sequence[_Side], timeout: float, max_rounds: Optional[int] = None) -> int:
    """Rounds of one unit in turn, A,B,B,A,..., each side's until it says it is finished
    (``TO_THE_END``); returns the rounds the longer side ran. A side still running after
    ``max_rounds`` (default ``MAX_TO_THE_END_ROUNDS``) fails the pair."""
    max_rounds = MAX_TO_THE_END_ROUNDS if max_rounds is None else max_rounds
    finished = {side.name: False for side in order}
    j = 0
    while not all(finished.values()):
        if j >= max_rounds:
            late = next(side for side in order if not finished[side.name])
            raise DuetError(late.name, "rounds", f"the {late.name} worker did not finish in {max_rounds} rounds")
        _timed_round(order if j % 2 == 0 else order[::-1], 1, timeout, finished)
        j += 1
    return j


def _untimed_round(order: Sequence[_Side], k: int, timeout: float) -> Dict[str, float]:
    """Each side runs k batches, untimed, in turn; returns each side's seconds."""
    took = {}
    for side in order:
        side.send(op="round", batches=k, timed=False)
        took[side.name] = float(side.receive(timeout)["seconds"])
    return took


def _round_size(order: Sequence[_Side], timeout: float) -> Tuple[int, float]:
    """Batches per timed round, the same for both sides: SETTLE_ROUNDS untimed single-batch
    rounds in turn give each side's fastest batch, the slower side's sets k to fill
    ROUND_SECONDS; then k grows while an untimed round of k is still under half of that.
    The fastest batch, because a neighbour's burst only ever lengthens one (seen while other
    work ran here: single batches of LeNet b4 between 1.7 and 100 ms; a round sized from one
    slow batch came out 2 ms long, where a waiting side's OpenMP spin is no longer
    negligible)."""
    fastest: Dict[str, float] = {}
    for j in range(SETTLE_ROUNDS):
        for name, t in _untimed_round(order if j % 2 == 0 else order[::-1], 1, timeout).items():
            fastest[name] = min(t, fastest.get(name, t))
        if j >= 1 and min(fastest.values()) >= ROUND_SECONDS:
            break  # one batch a side already outlasts a round: two settling rounds do
    k = max(1, int(round(ROUND_SECONDS / max(max(fastest.values()), 1e-6))))
    if k == 1 and min(fastest.values()) >= ROUND_SECONDS / 2:
        return 1, max(fastest.values())  # one batch already fills a round: nothing to size
    for _ in range(SIZING_TRIES):
        sides = _untimed_round(order, k, timeout)
        took = min(sides.values())
        if took >= ROUND_SECONDS / 2:
            break
        k = max(k + 1, int(round(k * ROUND_SECONDS / max(took, 1e-6))))
    return k, max(sides.values())


def _close(side: _Side, timeout: float, failed: bool) -> Tuple[Optional[str], Optional[Dict], Optional[Dict]]:
    """Ask the worker to finish (unless it is the one that failed), reap it (killing its
    whole group) and read its result."""
    stopped = None
    if side.proc is None:
        return "start", None, None
    try:
        if side.proc.poll() is None and not failed:
            side.send(op="finish")
            spawn.wait(side.proc, timeout)
    except DuetError:
        pass
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: it did not exit; kill it below
        stopped = "timeout"
    finally:
        usage = side.sampler.stop() if side.sampler is not None else None
        spawn.kill_process_tree(side.proc.pid, side.proc.pid)
        side.proc.wait()
        for f in (side.to_child, side.from_child):
            try:
                f.close()
            except Exception:  # noqa: BLE001 - a broken pipe on close
                pass
    return stopped, worker.read_result(side.result_path), usage


def warms_up_alone(workload: Workload) -> bool:
    """Whether a duet pair of ``workload`` warms its sides up one at a time (``run_pair``'s
    ``solo_warmup`` by default): a GPU cell, whose warm-up (cuDNN's autotune) would time the
    other side's."""
    return workload.device == "gpu"


def _sides(tmp, workloads: Sequence[Workload], candidate: Optional[str], reference: Optional[str],
           env: Optional[Mapping[str, str]], reference_env: Optional[Mapping[str, str]],
           extra_env: Optional[Mapping[str, str]], rss_cap: Optional[int]) -> List[_Side]:
    """The pair's two sides, candidate then reference, each with its own interpreter, the
    environment its ``workloads`` run in (built from ``env``, or ``reference_env`` for the
    reference, with ``extra_env`` over it) and a work folder under ``tmp``. ValueError when the
    cells do not all run in one environment (they cannot share the pair)."""
    sides = []
    for name, python, base in (("candidate", candidate, env),
                               ("reference", reference, env if reference_env is None else reference_env)):
        full_env, defaults = runner.build_env(workloads[0], base, extra_env)
        for w in workloads[1:]:
            if runner.build_env(w, base, extra_env)[0] != full_env:
                raise ValueError(f"{w.key()} needs another environment than {workloads[0].key()}: not one pair")
        (tmp / name).mkdir()
        sides.append(_Side(name, python, full_env, defaults, rss_cap, tmp / name))
    return sides


def _duet_fact(side: _Side, seed: int, candidate_first: bool, k: int, rounds: int, slower: float,
               warmup_window: Optional[Dict], **more: Any) -> Dict[str, Any]:
    """The parent's facts of one side's rounds of a cell in a pair (``RunResult`` fact "duet")."""
    return {
        "pair": seed, "side": side.name, "ran_first": (side.name == "candidate") == candidate_first,
        "batches_per_round": k, "rounds": rounds,
        "sizing_round_seconds": slower,  # the slower side's untimed round of k: rounds_for's round
        "waiting_cpu_share": (side.waiting_cpu / side.partner_seconds) if side.partner_seconds else None,
        # warmed up alone, 1st or 2nd (the other blocked on its pipe), or together (None)
        "warmup_turn": side.warmup_turn,
        "warmup_window": warmup_window,
        **more,
    }


def run_pair(workload: Workload, *, candidate: Optional[str], reference: Optional[str], seed: int = 0,
             candidate_first: bool = True, time_budget: float = TIME_BUDGET_S, smoke: bool = False,
             timeout: float = runner.DEFAULT_TIMEOUT, warmup_timeout: Optional[float] = None,
             memory_limit: Optional[int] = -1, env: Optional[Mapping[str, str]] = None,
             reference_env: Optional[Mapping[str, str]] = None,
             extra_env: Optional[Mapping[str, str]] = None, module: str = runner.WORKER_MODULE,
             spec: Optional[Dict] = None, figures: Optional[Callable[[Dict], Dict[str, float]]] = None,
             solo_warmup: Optional[bool] = None, known_need_mib: Optional[float] = None,
             **options) -> Tuple[RunResult, RunResult]:
    """One duet pair of a resident worker kind: (candidate RunResult, reference RunResult).

    ``module``: the worker (``RESIDENT_MODULES``), by default the throughput worker, whose
    spec is built here from ``workload`` and ``options``; for another kind the caller gives
    its ``spec`` (``seed`` and the memory cap are filled in when absent) and ``figures``
    (its result as figures, as ``Measurer.measure_module`` takes them). ``env`` is the
    candidate's base environment (default os.environ), ``reference_env`` the reference's
    (default the same): a baseline's recorded setup runs with its recorded variables.

    Both workers start together (importing MXNet side by side). With ``solo_warmup`` (by
    default: a GPU cell) the side that runs first warms up alone (bind, first batches, cuDNN
    autotune; untimed, bounded by ``warmup_timeout``) while the other waits on its pipe, then
    the other alone; without it both warm up together. Then SETTLE_ROUNDS untimed single-unit
    rounds in turn; the round size k is the units (batches, push+pull rounds, epochs, steps)
    the slower side runs in ROUND_SECONDS; then ``rounds_for(time_budget)`` timed rounds a
    side, A,B,B,A,... (A = the candidate when ``candidate_first``), each reply awaited at most
    ``timeout``. A side that fails ends the pair: its RunResult says how, the other side's is
    an error naming its partner. Raises ``NoRoomForTwo`` (after every process is reaped) when
    two pools of a GPU cell do not fit its GPU (see the module doc; ``known_need_mib``: what
    one process of the cell held before, if known)."""
    as_cap, rss_cap = runner.memory_caps(workload, runner.resolve_memory_limit(memory_limit))
    if spec is None:
        spec = runner.make_spec(workload, time_budget=time_budget, smoke=smoke, memory_limit=as_cap, seed=seed,
                                **options)
    else:
        spec = dict(spec)
        spec.setdefault("seed", seed)
        spec.setdefault("memory_limit", as_cap)
    if solo_warmup is None:
        solo_warmup = warms_up_alone(workload)
    if solo_warmup:
        spec["solo_warmup"] = True
    rounds = 1 if smoke else rounds_for(time_budget)
    with spawn.WorkDir() as tmp:
        sides = _sides(tmp, [workload], candidate, reference, env, reference_env, extra_env, rss_cap)
        gpu = _GpuView(workload, sides[0].env) if workload.device == "gpu" else None
        no_room = pools_fit_before(gpu.total_mib, known_need_mib, gpu.names) if gpu else None
        if no_room:
            raise NoRoomForTwo(no_room)
        order = sides if candidate_first else sides[::-1]
        failure: Optional[DuetError] = None
        second_warming = False
        k, slower = 1, 0.0
        try:
            for side in sides:
                _start(side, workload, spec, module)
            if solo_warmup:
                for turn, side in enumerate(order, 1):
                    if turn == 2 and gpu is not None:
                        no_room = pools_fit_after(order[0].name, order[0].gpu_mib.get("after_warmup"),
                                                  gpu.free_mib(), gpu.names)
                        if no_room:
                            break
                    second_warming = turn == 2
                    side.warmup_turn = turn
                    side.send(op="warmup")
                    side.ready = side.receive(warmup_timeout or timeout, "warmup-timeout")
                    second_warming = False
                    if gpu is not None:
                        side.gpu_mib["after_warmup"] = gpu.own_mib(side.proc.pid)
            else:
                for side in sides:
                    side.ready = side.receive(warmup_timeout or timeout, "warmup-timeout")
            if not no_room:
                if workload.mode in TO_THE_END:
                    rounds = run_to_the_end(order, timeout)
                else:
                    if workload.mode in WHOLE_RUNS:  # rounds of one whole run: none untimed, no sizing
                        rounds = 1 if smoke else WHOLE_RUNS[workload.mode]
                    elif not smoke:
                        k, slower = _round_size(order, timeout)
                        rounds = rounds_for(time_budget, slower)
                    for j in range(rounds):
                        _timed_round(order if j % 2 == 0 else order[::-1], k, timeout)
                if gpu is not None:
                    for side in sides:
                        side.gpu_mib["after_rounds"] = gpu.own_mib(side.proc.pid)
        except DuetError as exc:
            failure = exc
        if no_room:  # nothing measured: no result to read, every process reaped
            for side in sides:
                _close(side, FINISH_TIMEOUT, True)
            raise NoRoomForTwo(no_room)
        # the side whose round ran first finishes first: what a worker measures alone after the
        # rounds (an input pipeline's parts) runs in the order that alternates from pair to pair
        closed = {s.name: _close(s, FINISH_TIMEOUT, failure is not None and failure.side == s.name) for s in order}
        if (second_warming and failure is not None and failure.side == order[1].name
                and (closed[order[1].name][1] or {}).get("status") == "oom"):
            # the second pool did not fit beside the first: not the cell's failure
            held = order[0].gpu_mib.get("after_warmup")
            raise NoRoomForTwo(
                f"two pools do not fit on {gpu.names if gpu else workload.device}: the {order[1].name}'s warm-up "
                f"ran out of GPU memory beside the {order[0].name}'s pool"
                + (f" ({held:.0f} MiB)" if held is not None else "")
                + f": {closed[order[1].name][1].get('message', '')}")
        results = []
        for side in sides:
            stopped, payload, usage = closed[side.name]
            mine = failure is not None and failure.side == side.name
            if failure is not None and not mine:
                payload = {"status": "error", "meta": (payload or {}).get("meta", {}),
                           "message": f"its duet partner (the {failure.side}) failed: {failure}"}
            wall = time.perf_counter() - side.started
            how = failure.stopped if mine else stopped
            # a side the parent stopped for its rounds ("rounds") was killed by the parent: its
            # failure is that, not the signal
            out = worker.classify(None if how == "rounds" else how, payload,
                                  spawn.tail(side.workdir / "worker.log"), side.proc.returncode if side.proc else None,
                                  wall, usage, timeout=timeout, warmup_timeout=warmup_timeout, rss_limit=rss_cap)
            if mine and ((how is None and out.status == "ok") or how == "rounds"):
                out = dataclasses.replace(out, status="error", message=str(failure))
            own = [v for v in side.gpu_mib.values() if v is not None] if gpu is not None else []
            r = runner.run_result(out, workload, side.env, side.defaults, figures or runner.worker_figures,
                                  python=side.python,
                                  # the pool keeps what it allocated: its peak is judged
                                  gpu_memory_mib=max(own) if own and module == runner.WORKER_MODULE else None)
            duet_fact = _duet_fact(side, seed, candidate_first, k, len(r.round_seconds), slower,
                                   (side.ready or {}).get("warmup_window"))
            if gpu is not None:
                duet_fact["gpu_memory"] = dict(side.gpu_mib, source=nvml.OWN_MEMORY_SOURCE, gpus=gpu.names)
            r = r.with_facts(duet=duet_fact)  # the parent's facts of the pair: a new value
            results.append(r)
    return results[0], results[1]


def shares_a_pair(workload: Workload) -> bool:
    """Whether ``workload`` may be one of several cells that one duet pair serves
    (``run_cells_pair``): a CPU cell of the throughput worker (score, train, latency) from the
    zoo. A GPU cell keeps a pair of its own (MXNet's pool and cuDNN's choices would carry over),
    and so does your own network (its worker loads it its own way)."""
    return workload.device == "cpu" and kinds.kind(workload.mode).shares_process and not workload.source


def run_cells_pair(workloads: Sequence[Workload], *, candidate: Optional[str], reference: Optional[str],
                   seed: int = 0, candidate_first: bool = True, time_budget: float = TIME_BUDGET_S,
                   smoke: bool = False, timeout: float = runner.DEFAULT_TIMEOUT,
                   warmup_timeout: Optional[float] = None, memory_limit: Optional[int] = -1,
                   env: Optional[Mapping[str, str]] = None, reference_env: Optional[Mapping[str, str]] = None,
                   extra_env: Optional[Mapping[str, str]] = None
                   ) -> List[Optional[Tuple[RunResult, RunResult]]]:
    """One duet pair that serves several CPU cells (``shares_a_pair``) in turn: both workers
    import MXNet once; then for each cell, in the order given, both bind and warm it up, the
    round size is set and the timed rounds alternate as in ``run_pair``; "finish" ends that
    cell's rounds and each worker goes on to the next (``throughput.measure_cells`` with
    ``control``). Each side's cells are the cells of one process (``meta["process_cells"]``),
    so what a cell inherits from the cells before it, both sides inherit alike, in the same
    order; the caller varies the order from pair to pair.

    Returns one entry per workload, in their order: (candidate RunResult, reference
    RunResult), or None for a cell the pair did not reach (a cell before it failed: a side
    that fails ends the pair, its partner is stopped; the caller measures the rest in a fresh
    pair). A cell that one side cannot measure (unsupported, unavailable: it says "over"
    before its rounds) has no rounds on either side: the other side's result names it."""
    if not workloads:
        return []
    limit = runner.resolve_memory_limit(memory_limit)
    as_cap, rss_cap = runner.memory_caps(workloads[0], limit)
    for w in workloads:
        if not shares_a_pair(w):
            raise ValueError(f"{w.key()} cannot share a duet pair with other cells")
        if runner.memory_caps(w, limit) != (as_cap, rss_cap):
            raise ValueError(f"{w.key()} needs another memory cap than {workloads[0].key()}: not one pair")
    rounds_asked = 1 if smoke else rounds_for(time_budget)
    with spawn.WorkDir() as tmp:
        sides = _sides(tmp, workloads, candidate, reference, env, reference_env, extra_env, rss_cap)
        order = sides if candidate_first else sides[::-1]
        spec = {"cells": [runner.make_spec(w, time_budget=time_budget, smoke=smoke, memory_limit=as_cap, seed=seed)
                          for w in workloads], "memory_limit": as_cap}
        facts: Dict[int, Dict[str, Dict]] = {}   # cell -> side -> its duet facts
        over: Dict[int, Dict[str, str]] = {}     # cell -> side -> why it ended before its rounds
        failure: Optional[DuetError] = None
        try:
            for side in sides:
                _start(side, workloads[0], dict(spec, progress_path=str(side.workdir / "progress.jsonl")))
            for c in range(len(workloads)):
                said = {}
                for side in sides:
                    side.waiting_cpu = side.partner_seconds = 0.0
                    said[side.name] = side.receive(warmup_timeout or timeout,
                                                   "warmup-timeout" if warmup_timeout else "timeout")
                over_now = {n: f"{m.get('status')}: {m.get('message', '')}" for n, m in said.items()
                            if m.get("op") == "over"}
                if over_now:
                    over[c] = over_now
                    for side in sides:
                        if side.name not in over_now:
                            side.send(op="finish")  # its cell ends with no rounds: its partner cannot run it
                    continue
                k, slower, rounds = 1, 0.0, rounds_asked
                if not smoke:
                    k, slower = _round_size(order, timeout)
                    rounds = rounds_for(time_budget, slower)
                for j in range(rounds):
                    _timed_round(order if j % 2 == 0 else order[::-1], k, timeout)
                facts[c] = {side.name: _duet_fact(side, seed, candidate_first, k, rounds, slower,
                                                  said[side.name].get("warmup_window"),
                                                  cells_in_pair={"index": c, "of": len(workloads)})
                            for side in sides}
                for side in order:
                    side.send(op="finish")
        except DuetError as exc:
            failure = exc
        # after a failure the healthy side is stopped too (its finished cells are on its progress lines)
        closed = {s.name: _close(s, FINISH_TIMEOUT, failure is not None) for s in order}
        per_side = {}
        for side in sides:
            stopped, payload, usage = closed[side.name]
            mine = failure is not None and failure.side == side.name
            wall = time.perf_counter() - side.started
            out = worker.classify(failure.stopped if mine else stopped, payload,
                                  spawn.tail(side.workdir / "worker.log"), side.proc.returncode if side.proc else None,
                                  wall, usage, timeout=timeout, warmup_timeout=warmup_timeout, rss_limit=rss_cap)
            if mine and out.status == "ok":
                out = dataclasses.replace(out, status="error", message=str(failure))
            out.progress = worker.progress_lines(side.workdir / "progress.jsonl")
            if failure is not None and not mine:  # its cell in progress failed with its partner
                out = dataclasses.replace(out, status="error",
                                          message=f"its duet partner (the {failure.side}) failed: {failure}")
            per_side[side.name] = runner.cells_of(out, workloads, side.env, side.defaults, side.python)
    results: List[Optional[Tuple[RunResult, RunResult]]] = []
    for c, w in enumerate(workloads):
        pair = []
        for side in sides:
            r = per_side[side.name][c]
            if r is None:
                break
            if c in over and side.name not in over[c]:
                other = next(iter(over[c]))
                r = dataclasses.replace(r, status="error", round_seconds=[], figures={},
                                        message=f"its duet partner (the {other}) could not measure it: {over[c][other]}")
            if c in facts:
                r = r.with_facts(duet=facts[c][side.name])
            pair.append(r)
        results.append(tuple(pair) if len(pair) == 2 else None)
    return results
