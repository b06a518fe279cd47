"""Input pipeline rates: can the loader feed the trainer, and which of the two is the limit?

Run as ``python -m pytest_mxperf.workers.pipeline SPEC.json RESULT.json`` (through
``runner.run_process``), in a fresh process. The method is the one of "mock components"
and "manual instrumentation":

* **loader alone** (the trainer mocked): read batches and discard them
  (``batch.data[0].wait_to_read()``), for ``seconds``, starting a new epoch (``reset``)
  whenever one ends; ``samples_per_s`` = samples read / wall time (resets included);
* **trainer alone** (the loader mocked, with ``train_model``): the zoo model bound for
  training exactly as the throughput worker binds it (its ``_Cell``: Module, Xavier
  weights, SGD with momentum) stepping on one cached synthetic batch, each batch
  synchronised (``waitall``): ``synthetic_samples_per_s``;
* **end to end** (with ``train_model``): a fresh loader (its prefetch buffers empty) feeds
  the same trainer; per batch, ``t_load`` = ``next(iter)`` + ``wait_to_read`` and
  ``t_compute`` = forward, backward, update + ``waitall``: ``end_to_end_samples_per_s``,
  ``load_seconds_per_batch``, ``compute_seconds_per_batch``.

``loader_bound`` is the lecture's rule: the loader alone delivers fewer samples per
second than the trainer alone consumes. Warm-up (``warmup_batches`` of the loader and
of the trainer, and as many fed steps) is never timed. Rates are totals (samples /
seconds), so a batch that waited long counts in full; the per-batch lists are in the
result. The three parts run one after the other: on a shared machine a change of load
between them shows as a difference between ``synthetic`` and the compute part of
``end to end``.

Data: ``synthetic_images.make_recordio`` (synthetic JPEGs in an indexed RecordIO file, cached
in ``data_dir``), cut to ``data_shape`` by ImageRecordIter: centre crop, or with ``augment``
a random crop and a random mirror. Pixels are scaled to [0, 1].

Loaders (``loader``):

* ``imagerecord``: ``mx.io.ImageRecordIter`` (JPEG decode and augmentation in
  ``threads`` preprocessing threads, its own prefetch buffer of 4 batches);
* ``ndarray``: the whole set decoded once into memory (untimed), then
  ``mx.io.NDArrayIter`` - the "load your entire dataset into memory" case (no
  augmentation: ``augment`` must be false);
* ``prefetch-imagerecord`` / ``prefetch-ndarray``: the same inside
  ``mx.io.PrefetchingIter`` (a Python thread that reads the next batch ahead).

An ndarray loader's batch is a new output of ``slice_axis`` (3x224x224 b32: 19.3 MB, 4704
pages), freed when the batch is dropped. glibc gives such a block back to the kernel
(``mmap``'d, or trimmed off the heap's top) or keeps it, by the order of that process's frees,
so that one process of an A/A pair faulted its batches in again and the other did not, the whole
run through (docs/how-it-measures.md, "What is measured, and how each figure is judged", the
ndarray loaders' faults). The ndarray loaders' worker keeps freed memory in the heap
(``keep_heap``: ``mallopt``, glibc only; ``meta["heap_kept"]``): it measures the copy, not
the allocator's lottery. The freed buffers it keeps raise its peak memory (849 against 780
MiB), so its memory figure is read another way (``measurement.memory_method``).

Spec (defaults in brackets)::

    {"loader": "imagerecord", "batch_size": [32], "data_shape": [3, 224, 224] (the
     model's input shape with train_model), "image_size": [H, W], "threads": [CPUs in the
     affinity mask], "augment": [false], "n_images": [512], "data_dir": [cache dir],
     "seconds": [3.0], "warmup_batches": [2], "max_batches": [5000], "seed": [0] (weights,
     crops), "data_seed": [0] (the images: every process of a cell reads the same file),
     "train_model": [none] zoo name, "train_batches": [10]}

Result: ``{"status": "ok", "message": "", "samples_per_s", "batches", "seconds",
"per_batch_seconds", "epochs", "units", "meta", ...}`` and with ``train_model`` also
``end_to_end_samples_per_s``, ``synthetic_samples_per_s``, ``load_seconds_per_batch``,
``compute_seconds_per_batch``, ``load_share``, ``loader_bound`` and ``train`` (the
per-batch lists).

**Duet** (A/B mode, the spec has ``control``): the worker builds its cell once, warms it
up untimed and serves the parent's timed rounds (``protocol.serve_rounds``); the rounds
time the cell's judged figure, ``samples_per_s`` of the cell (``samples.PRIMARY["io"]``):

* a loader cell: a unit of a round is **one epoch** of the loader alone (``reset``, then
  every batch read until the epoch ends), not one batch: ImageRecordIter decodes a whole
  chunk of records at once (here the whole file: 256 JPEGs in one lump on the first read
  after ``reset``, the other batches then come from its buffer in microseconds), so single
  batches are no unit a round can be sized or compared by; an epoch is;
* a training cell: a unit is **one fed training step** (next batch, ``wait_to_read``,
  forward, backward, update, ``waitall``); the end-to-end rate and the load / compute split
  come from the timed rounds' steps.

Every round ends in ``waitall`` and then ``quiesce``: the loader's prefetch threads
(ImageRecordIter's decoder, PrefetchingIter's thread) go on working after the last batch
was taken, and would do so while the partner's round runs; the round ends when no thread
of the process computes any more, so that work is inside the round and the waiting side
is idle. ``round_seconds`` (``batches_per_round`` = units per round x batches per unit) and
the samples/s come from the timed rounds: ``samples / sum(round_seconds)``.

The parts of a training cell, the loader alone and the trainer alone (``samples_per_s``,
``synthetic_samples_per_s``, ``loader_bound``), are measured as in a process after the
parent's "finish", when this worker runs alone (its partner waits on its pipe or has exited;
the parent finishes first the side whose round ran first, so the two sides' parts run one
right after the other, in the order that alternates from pair to pair). They are not
round-paired: a slow spell of the machine falls on one side only, so a duet's parts are
judged as process pairs are (``outcome/ab_judging.AFTER_ROUNDS``: the fast-end rule). In an
A/A of LeNet b64 (2-vCPU Zen 4) the trainer alone read up to 28% apart on the two sides of a
pair (pair spread 8.6% over 40 pairs; 8.7% over 12 when timed for 1 s instead of 20 batches).
``per_batch_seconds`` is not in a duet's result (a loader cell's rounds are epochs).
"""

from __future__ import annotations

import os
import resource
import time

from pytest_mxperf.workers.protocol import (
    file_backed_bytes,
    import_mxnet,
    runtime_info,
    serve,
    serve_rounds,
    thread_pools,
)
from pytest_mxperf.workers.synthetic_images import default_data_dir, make_recordio

LOADERS = ("imagerecord", "ndarray", "prefetch-imagerecord", "prefetch-ndarray")
#: the loaders whose worker keeps freed memory in the heap (``keep_heap``)
HEAP_KEPT_LOADERS = ("ndarray", "prefetch-ndarray")
UNITS = {"samples_per_s": "samples/s", "seconds": "s", "per_batch_seconds": "s",
         "read_mb_per_s": "MB/s (JPEG bytes)", "end_to_end_samples_per_s": "samples/s",
         "synthetic_samples_per_s": "samples/s", "load_seconds_per_batch": "s",
         "compute_seconds_per_batch": "s", "load_share": "fraction"}
_KNOWN = {"loader", "batch_size", "data_shape", "image_size", "threads", "augment", "n_images",
          "data_dir", "seconds", "warmup_batches", "max_batches", "seed", "data_seed", "train_model",
          "train_batches", "memory_limit", "phase_path", "control"}


# -- spec -----------------------------------------------------------------------------------

def check_spec(spec: dict) -> dict:
    """The spec with its defaults filled in, or a ValueError with a one-line message."""
    from pytest_mxperf import zoo

    unknown = sorted(set(spec) - _KNOWN)
    if unknown:
        raise ValueError(f"unknown pipeline spec keys {unknown} (known: {', '.join(sorted(_KNOWN))})")
    s = dict(spec)
    if s.get("loader") not in LOADERS:
        raise ValueError(f"unknown loader {s.get('loader')!r} (known: {', '.join(LOADERS)})")
    model = s.get("train_model")
    if model is not None:
        default_shape = list(zoo.get_model(model).input_shape)  # UnknownModelError: one line
    else:
        default_shape = [3, 224, 224]
    s["data_shape"] = [int(v) for v in s.get("data_shape") or default_shape]
    if len(s["data_shape"]) != 3 or s["data_shape"][0] not in (1, 3) or min(s["data_shape"]) < 1:
        raise ValueError(f"data_shape must be [C, H, W] with C 1 or 3, got {spec.get('data_shape')!r}")
    if model is not None and s["data_shape"] != default_shape:
        raise ValueError(f"data_shape {s['data_shape']} is not {model}'s input shape {default_shape}")
    c, h, w = s["data_shape"]
    s["image_size"] = [int(v) for v in s.get("image_size") or [round(h * 8 / 7), round(w * 8 / 7)]]
    if len(s["image_size"]) != 2 or s["image_size"][0] < h or s["image_size"][1] < w:
        raise ValueError(f"image_size {s['image_size']} must be [H, W] at least the crop {h}x{w}")
    for key, default in (("batch_size", 32), ("n_images", 512), ("warmup_batches", 2),
                         ("max_batches", 5000), ("seed", 0), ("data_seed", 0), ("train_batches", 10),
                         ("threads", len(os.sched_getaffinity(0)))):
        s[key] = int(s.get(key, default))
    if s["batch_size"] < 1 or s["threads"] < 1 or s["train_batches"] < 1 or s["max_batches"] < 2:
        raise ValueError("batch_size, threads and train_batches must be >= 1 and max_batches >= 2")
    if s["n_images"] < s["batch_size"]:
        raise ValueError(f"n_images ({s['n_images']}) must be at least one batch ({s['batch_size']})")
    s["seconds"] = float(s.get("seconds", 3.0))
    s["augment"] = bool(s.get("augment", False))
    if s["augment"] and "ndarray" in s["loader"]:
        raise ValueError("augment applies to imagerecord loaders only (ndarray holds decoded, un-augmented data)")
    s["data_dir"] = str(s.get("data_dir") or default_data_dir())
    return s


# -- loaders ---------------------------------------------------------------------------------

#: glibc's mallopt parameters and the values ``keep_heap`` sets: blocks up to 32 MiB from the
#: heap (the most glibc allows), never trimmed, grown 32 MiB at a time (without a pad the
#: batches went on faulting: docs/how-it-measures.md, "What is measured, and how each figure
#: is judged", the ndarray loaders' faults)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
KEEP_HEAP = ((_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 2**31 - 1), (_M_TOP_PAD, 32 << 20))


def keep_heap() -> bool:
    """Make glibc keep freed memory in this process's heap (``KEEP_HEAP``), so that a batch's
    buffer is reused without faulting its pages in again. Whether it could (False off glibc)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in KEEP_HEAP)


def _image_record_iter(mx, s, rec, idx, augment):
    try:  # MXDataIter reads its first batch when it is made
        return mx.io.ImageRecordIter(
            path_imgrec=rec, path_imgidx=idx, data_shape=tuple(s["data_shape"]),
            batch_size=s["batch_size"], preprocess_threads=s["threads"], rand_crop=augment,
            rand_mirror=augment, scale=1.0 / 255, shuffle=False, seed=s["seed"], verbose=False)
    except StopIteration:
        raise RuntimeError(f"ImageRecordIter yielded no batch: {rec} is empty or unreadable") from None


def _decode_all(mx, s, rec, idx):
    """Every image decoded (centre crop) into one numpy array, with the labels."""
    import numpy as np

    data, labels = [], []
    for batch in _image_record_iter(mx, s, rec, idx, False):
        n = batch.data[0].shape[0] - batch.pad
        data.append(batch.data[0].asnumpy()[:n])
        labels.append(batch.label[0].asnumpy()[:n])
    return np.concatenate(data), np.concatenate(labels)


def make_loader(mx, s, rec, idx, decoded=None):
    """The DataIter that ``s["loader"]`` names (``decoded``: the ``_decode_all`` arrays, for
    the ndarray loaders; decoded here when not given)."""
    if s["loader"].endswith("imagerecord"):
        it = _image_record_iter(mx, s, rec, idx, s["augment"])
    else:
        data, label = decoded or _decode_all(mx, s, rec, idx)
        it = mx.io.NDArrayIter(data, label, batch_size=s["batch_size"], shuffle=False,
                               last_batch_handle="discard")
    return mx.io.PrefetchingIter(it) if s["loader"].startswith("prefetch-") else it


class Endless:
    """``next()`` over a DataIter that starts a new epoch (``reset``) when one ends."""

    def __init__(self, it):
        self.it = it
        self.epochs = 0

    def next(self):
        try:
            return self.it.next()
        except StopIteration:
            self.it.reset()
            self.epochs += 1
        try:
            return self.it.next()
        except StopIteration:  # a whole epoch without a batch: nothing readable in the data set
            raise RuntimeError(f"{type(self.it).__name__} yielded no batch: the data set is empty or unreadable") from None


# -- measurements ---------------------------------------------------------------------------

def read_rate(mx, source: Endless, s) -> dict:
    """The mock trainer: read each batch until it is in memory, discard it."""
    for _ in range(s["warmup_batches"]):
        source.next().data[0].wait_to_read()
    mx.nd.waitall()
    per_batch, samples = [], 0
    start = time.perf_counter()
    while len(per_batch) < s["max_batches"] and (len(per_batch) < 2 or time.perf_counter() - start < s["seconds"]):
        t0 = time.perf_counter()
        batch = source.next()
        batch.data[0].wait_to_read()
        per_batch.append(time.perf_counter() - t0)
        samples += batch.data[0].shape[0] - batch.pad
    mx.nd.waitall()
    seconds = time.perf_counter() - start
    return {"samples_per_s": samples / seconds, "batches": len(per_batch), "seconds": seconds,
            "per_batch_seconds": per_batch, "samples": samples}


def train_split(mx, new_source, s) -> dict:
    """The trainer on one cached batch (mock loader), then fed by the loader, timed apart.

    ``new_source()`` makes the loader for the fed part: a fresh one, made after the
    synthetic part, so that its prefetch buffers did not fill while the trainer ran on the
    cached batch; ``warmup_batches`` fed steps then run untimed.
    """
    from pytest_mxperf.workers.throughput import _Cell

    w = {"model": s["train_model"], "mode": "train", "batch_size": s["batch_size"],
         "contexts": ["cpu:0"], "dtype": "float32"}
    cell = _Cell(mx, w, s["seed"])
    for _ in range(max(1, s["warmup_batches"])):
        cell.timed(1)
    k = s["train_batches"]
    synthetic = [cell.timed(1) for _ in range(k)]
    load, compute, samples = [], [], 0
    mod = cell.mod
    source = new_source()
    mx.nd.waitall()
    for i in range(s["warmup_batches"] + k):
        t1 = time.perf_counter()
        batch = source.next()
        batch.data[0].wait_to_read()
        t2 = time.perf_counter()
        mod.forward(batch, is_train=True)
        mod.backward()
        mod.update()
        mx.nd.waitall()
        t3 = time.perf_counter()
        if i >= s["warmup_batches"]:
            load.append(t2 - t1)
            compute.append(t3 - t2)
            samples += batch.data[0].shape[0] - batch.pad
    n = s["batch_size"]
    return {"end_to_end_samples_per_s": samples / (sum(load) + sum(compute)),
            "synthetic_samples_per_s": n * k / sum(synthetic),
            "load_seconds_per_batch": sum(load) / k, "compute_seconds_per_batch": sum(compute) / k,
            "load_share": sum(load) / (sum(load) + sum(compute)),
            "train": {"model": s["train_model"], "batches": k, "bind_seconds": cell.bind_seconds,
                      "synthetic_seconds": synthetic, "load_seconds": load, "compute_seconds": compute}}


# -- duet (A/B): resident cells whose rounds the parent alternates with its partner's ----------

#: quiesce: a window of this many seconds, this many of them in a row under this share of
#: one core (the whole process), is "no thread computes"; give up after QUIET_LIMIT seconds
QUIET_WINDOW, QUIET_WINDOWS, QUIET_SHARE, QUIET_LIMIT = 0.002, 3, 0.1, 5.0


def quiesce():
    """Wait until no thread of this process computes (a loader's prefetch threads, OpenMP
    threads still spinning): QUIET_WINDOWS windows in a row in which the whole process used
    less than QUIET_SHARE of one core. Returns (perf_counter time at which the last busy
    window ended - the quiet windows that confirm it are not counted -, whether it gave up
    after QUIET_LIMIT seconds)."""
    t_prev, c_prev = time.perf_counter(), time.process_time()
    start = end = t_prev
    quiet = 0
    while quiet < QUIET_WINDOWS:
        time.sleep(QUIET_WINDOW)
        t, c = time.perf_counter(), time.process_time()
        if c - c_prev < QUIET_SHARE * (t - t_prev):
            quiet += 1
        else:
            quiet, end = 0, t
            if t - start > QUIET_LIMIT:
                return t, True
        t_prev, c_prev = t, c
    return end, False


class _Rounds:
    """What a duet cell shares: ``timed(k)`` runs k units between ``waitall`` and a quiet
    process, and logs (seconds, samples, batches, extra) of every call, untimed ones too."""

    def __init__(self, mx):
        self.mx = mx
        self.log = []
        self.gave_up = 0

    def timed(self, k):
        self.mx.nd.waitall()
        t0 = time.perf_counter()
        samples, batches, extra = self.units(k)
        self.mx.nd.waitall()
        t1 = time.perf_counter()
        end, gave_up = quiesce()
        self.gave_up += gave_up
        seconds = max(t1, end) - t0
        self.log.append((seconds, samples, batches, extra))
        return seconds

    def timed_rounds(self, seconds):
        """The log entries of the timed rounds ``serve_rounds`` returned (the last ones: the
        parent's untimed settle and sizing rounds come before them)."""
        mine = self.log[len(self.log) - len(seconds):] if seconds else []
        if [m[0] for m in mine] != list(seconds):
            raise RuntimeError("the duet's timed rounds are not the last rounds this worker ran")
        return mine


class LoaderEpochs(_Rounds):
    """The loader alone, a unit = one epoch: ``reset``, then every batch read
    (``wait_to_read``) and discarded until the epoch ends."""

    def __init__(self, mx, it):
        super().__init__(mx)
        self.it = it

    def units(self, k):
        samples = batches = 0
        for _ in range(k):
            self.it.reset()
            while True:
                try:
                    batch = self.it.next()
                except StopIteration:
                    break
                batch.data[0].wait_to_read()
                samples += batch.data[0].shape[0] - batch.pad
                batches += 1
        if k and not batches:
            raise RuntimeError(f"{type(self.it).__name__} yielded no batch: the data set is empty or unreadable")
        return samples, batches, None


class FedSteps(_Rounds):
    """The trainer fed by the loader, a unit = one step: next batch + ``wait_to_read``
    (load), forward, backward, update + ``waitall`` (compute)."""

    def __init__(self, mx, mod, source):
        super().__init__(mx)
        self.mod, self.source = mod, source

    def units(self, k):
        samples, load, compute = 0, [], []
        for _ in range(k):
            t1 = time.perf_counter()
            batch = self.source.next()
            batch.data[0].wait_to_read()
            t2 = time.perf_counter()
            self.mod.forward(batch, is_train=True)
            self.mod.backward()
            self.mod.update()
            self.mx.nd.waitall()
            load.append(t2 - t1)
            compute.append(time.perf_counter() - t2)
            samples += batch.data[0].shape[0] - batch.pad
        return samples, k, (load, compute)


def _serve_duet(mx, s, rec, idx, decoded, control) -> dict:
    """A duet's side (see the module doc): the cell built and warmed up once (untimed), the
    parent's rounds, then for a training cell its parts, this worker alone."""
    from pytest_mxperf.workers.throughput import _Cell

    warm = max(1, s["warmup_batches"])
    out = {}
    if s.get("train_model"):
        w = {"model": s["train_model"], "mode": "train", "batch_size": s["batch_size"],
             "contexts": ["cpu:0"], "dtype": "float32"}
        trainer = _Cell(mx, w, s["seed"])
        for _ in range(warm):
            trainer.timed(1)
        fed_source = Endless(make_loader(mx, s, rec, idx, decoded))
        cell = FedSteps(mx, trainer.mod, fed_source)
    else:
        fed_source = None
        cell = LoaderEpochs(mx, make_loader(mx, s, rec, idx, decoded))
    cell.timed(warm)  # untimed warm-up: the parent's rounds start after "ready"
    seconds, k = serve_rounds(cell, control, {"units": "fed steps" if fed_source else "epochs"})
    timed = cell.timed_rounds(seconds)
    total = sum(seconds) or float("nan")
    samples = sum(m[1] for m in timed)
    batches = sum(m[2] for m in timed)
    out.update(round_seconds=list(seconds), batches_per_round=(batches // len(timed)) if timed else k,
               duet={"units": "fed steps" if fed_source else "epochs", "units_per_round": k,
                     "quiesce_gave_up": cell.gave_up})
    if fed_source is None:
        out.update(samples_per_s=samples / total, batches=batches, seconds=total, samples=samples,
                   epochs=k * len(timed))
        return out
    load = [x for m in timed for x in m[3][0]]
    compute = [x for m in timed for x in m[3][1]]
    del cell, fed_source  # its prefetch threads must not compete with the parts that follow
    out.update(end_to_end_samples_per_s=samples / total,
               load_seconds_per_batch=sum(load) / len(load), compute_seconds_per_batch=sum(compute) / len(compute),
               load_share=sum(load) / (sum(load) + sum(compute)))
    # the parts, as a process measures them, now that this worker runs alone
    source = Endless(make_loader(mx, s, rec, idx, decoded))
    out.update(read_rate(mx, source, s))
    out["epochs"] = source.epochs
    del source
    n = s["train_batches"]
    synthetic = [trainer.timed(1) for _ in range(n)]
    out["synthetic_samples_per_s"] = s["batch_size"] * n / sum(synthetic)
    out["train"] = {"model": s["train_model"], "batches": len(load), "bind_seconds": trainer.bind_seconds,
                    "synthetic_seconds": synthetic, "load_seconds": load, "compute_seconds": compute}
    return out


def run(spec: dict) -> dict:
    s = check_spec(spec)
    heap_kept = keep_heap() if s["loader"] in HEAP_KEPT_LOADERS else None
    c, h, w = s["data_shape"]
    rec, idx = make_recordio(s["data_dir"], s["n_images"], s["image_size"], s["data_seed"], channels=c)
    mx = import_mxnet()
    meta = runtime_info(mx)
    meta["heap_kept"] = heap_kept
    decoded = None if s["loader"].endswith("imagerecord") else _decode_all(mx, s, rec, idx)
    out = {"status": "ok", "message": "", "loader": s["loader"], "batch_size": s["batch_size"],
           "data_shape": s["data_shape"], "image_size": s["image_size"], "threads": s["threads"],
           "augment": s["augment"], "n_images": s["n_images"]}
    if spec.get("control"):  # a duet (A/B): the parent decides the rounds
        out.update(_serve_duet(mx, s, rec, idx, decoded, spec["control"]))
    else:
        source = Endless(make_loader(mx, s, rec, idx, decoded))
        out.update(read_rate(mx, source, s))
        out["epochs"] = source.epochs  # of the loader-alone part
        del source  # its prefetch thread must not compete with the parts that follow
        if s.get("train_model"):
            out.update(train_split(mx, lambda: Endless(make_loader(mx, s, rec, idx, decoded)), s))
    if s["loader"].endswith("imagerecord"):
        record_bytes = os.path.getsize(rec) / s["n_images"]
        out["record_bytes_mean"] = record_bytes
        out["read_mb_per_s"] = out["samples_per_s"] * record_bytes / 1e6
    if s.get("train_model"):
        out["loader_bound"] = out["samples_per_s"] < out["synthetic_samples_per_s"]
    out["units"] = {k: v for k, v in UNITS.items() if k in out}
    meta["threads"] = thread_pools()
    meta["env"] = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS",
                                               "MXNET_SUBGRAPH_BACKEND") if k in os.environ}
    meta["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    meta["rss_file_bytes"] = file_backed_bytes()
    out["meta"] = meta
    return out


def main(argv=None) -> int:
    return serve(run, argv, "pytest_mxperf.workers.pipeline")


if __name__ == "__main__":
    main()
