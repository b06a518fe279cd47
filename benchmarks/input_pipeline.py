"""Input pipeline rates on this machine: loaders alone, and training fed by a loader.

Runs the pipeline worker (``python -m pytest_mxperf.workers.pipeline SPEC.json
RESULT.json``), one fresh process per row, and writes a text report:

* loaders alone (the trainer mocked: each batch read and discarded): ImageRecordIter
  decoding 256x256 JPEGs to 3x224x224 crops with 1 and 2 threads, with and without
  augmentation (random crop + mirror), NDArrayIter over the same images decoded in memory,
  and PrefetchingIter around each;
* training (ResNet-50 v2 batch 4, LeNet batch 64): the trainer on one cached batch (the
  loader mocked), then fed by the loader, with the per-batch split of load and compute;
  and, as a cross-check of the "synthetic" rate, the suite's throughput worker on the
  same training cell.

Each row also shows how many CPUs other processes kept busy while it ran (from
/proc/stat, ``machine_state.LoadMeter``): on a shared machine that is the noise.

Usage: python benchmarks/input_pipeline.py [--repeats 1] [--seconds 5] [--part all|loaders|training]
           [--out benchmarks/results/input-pipeline-<today>.txt] [--append]

(``--part`` with ``--append`` splits a run into two shorter commands writing one file.)
"""
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mxperf.proc import spawn
from pytest_mxperf.measure import runner
from pytest_mxperf.machine import topology  # noqa: E402
from pytest_mxperf.machine.state import LoadMeter  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402

WORKER = [sys.executable, "-m", "pytest_mxperf.workers.pipeline"]
IMAGE_224 = {"batch_size": 32, "data_shape": [3, 224, 224], "n_images": 256}


def loader_specs(seconds):
    specs = []
    for wrap in ("", "prefetch-"):
        for threads in (1, 2):
            for augment in (False, True):
                specs.append(dict(IMAGE_224, loader=wrap + "imagerecord", threads=threads, augment=augment,
                                  seconds=seconds))
        specs.append(dict(IMAGE_224, loader=wrap + "ndarray", threads=2, augment=False, seconds=seconds))
    return specs


def train_specs(seconds):
    resnet = {"train_model": "resnet50_v2", "batch_size": 4, "n_images": 256, "train_batches": 5,
              "warmup_batches": 1, "threads": 2, "seconds": seconds}
    lenet = {"train_model": "lenet", "batch_size": 64, "n_images": 512, "train_batches": 40,
             "threads": 1, "seconds": seconds}
    return [dict(resnet, loader="imagerecord", augment=True),
            dict(resnet, loader="prefetch-imagerecord", augment=True),
            dict(lenet, loader="imagerecord", augment=False),
            dict(lenet, loader="prefetch-ndarray", augment=False)]


def run(spec, env, data_dir):
    meter = LoadMeter()
    meter.start()
    out = runner.run_process(WORKER, dict(spec, data_dir=data_dir), timeout=900, env=env)
    load = meter.stop() or {}
    res = out.payload or {}
    if res.get("status") != "ok":
        raise SystemExit(f"worker failed on {json.dumps(spec)}: {out.status}: {out.message}")
    res["other_cpus"] = load.get("other_cpus")
    return res


def cross_check(spec, env, repeats, emit):
    """The suite's throughput worker on the same training cell: should match "synthetic"."""
    w = Workload(spec["train_model"], mode="train", batch_size=spec["batch_size"])
    for _ in range(repeats):
        meter = LoadMeter()
        meter.start()
        cell = runner.run_workload(w, time_budget=10.0, env=env, timeout=900)
        load = meter.stop() or {}
        if not cell.ok:
            raise SystemExit(f"throughput worker failed on {w.key()}: {cell.status}: {cell.message}")
        other = load.get("other_cpus")
        emit(f"   cross-check, the suite's throughput worker on {w.key()}: {cell.median:.2f} samples/s "
             f"(median time per batch), other CPUs {'?' if other is None else f'{other:.2f}'}")


def fmt_other(res):
    v = res.get("other_cpus")
    return "   ?" if v is None else f"{v:4.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=1, help="processes per row")
    ap.add_argument("--seconds", type=float, default=5.0, help="time budget of the loader-alone part")
    ap.add_argument("--data-dir", default=str(spawn.cache_dir("recordio")))
    ap.add_argument("--part", choices=("all", "loaders", "training"), default="all")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / f"input-pipeline-{datetime.date.today()}.txt"))
    ap.add_argument("--append", action="store_true", help="append to --out instead of replacing it")
    args = ap.parse_args()
    env, defaults = runner.build_env(Workload("resnet50_v2", mode="io"))
    python = os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable
    lines = [f"$ {shlex.join([python] + sys.argv)}",
             f"  ({datetime.date.today()}, {cpu_model()}, {os.cpu_count()} vCPUs "
             f"({topology.available_physical_cores()} physical cores), shared machine)",
             "  every row is one fresh process: python -m pytest_mxperf.workers.pipeline SPEC.json RESULT.json",
             f"  with SPEC = the row's settings + data_dir={args.data_dir}",
             f"  env: OMP_NUM_THREADS={env.get('OMP_NUM_THREADS')}"
             + (" (suite default)" if "OMP_NUM_THREADS" in defaults else " (set by the caller)"),
             "  'other CPUs' = CPUs kept busy by other processes while the row ran (/proc/stat)", ""]

    def emit(text=""):
        print(text, flush=True)
        lines.append(text)

    print("\n".join(lines), flush=True)
    first = None
    if args.part in ("all", "loaders"):
        first = loaders(args, env, emit)
    if args.part in ("all", "training"):
        first = training(args, env, emit) or first
    meta = (first or {}).get("meta", {})
    emit("")
    emit(f"mxnet {meta.get('mxnet_version')}, python {meta.get('python')}, numpy {meta.get('numpy_version')}, "
         f"features: {' '.join(meta.get('features') or [])}")
    emit("")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a" if args.append else "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"written: {args.out}")


def cpu_model():
    """lscpu's model name (e.g. AMD EPYC)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "CPU model unknown"
    names = [ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name:")]
    return f"lscpu model name: {names[0]}" if names else "CPU model unknown"


def loaders(args, env, emit):
    first = None
    emit("== loaders alone (mock trainer: read each batch, wait_to_read, discard)")
    emit("   256x256 synthetic JPEGs (quality 90) -> 3x224x224, batch 32, 256 images, "
         f"{args.seconds:g} s per process")
    emit(f"{'loader':<22}{'threads':>8}{'augment':>8}{'samples/s':>11}{'MB/s':>7}{'batches':>9}"
         f"{'median ms/batch':>17}{'other CPUs':>12}")
    for spec in loader_specs(args.seconds):
        for _ in range(args.repeats):
            res = run(spec, env, args.data_dir)
            first = first or res
            mb = f"{res['read_mb_per_s']:7.1f}" if "read_mb_per_s" in res else f"{'-':>7}"
            threads = spec["threads"] if "imagerecord" in spec["loader"] else "-"
            emit(f"{spec['loader']:<22}{threads!s:>8}{'yes' if spec['augment'] else 'no':>8}"
                 f"{res['samples_per_s']:11.1f}{mb}{res['batches']:9d}"
                 f"{1000 * statistics.median(res['per_batch_seconds']):17.3f}{fmt_other(res):>12}")
    emit("   (ndarray: the 256 images decoded once, untimed, into one array; NDArrayIter then slices it)")
    emit("")
    return first


def training(args, env, emit):
    first = None
    emit("== training fed by a loader vs on one cached batch (manual instrumentation per batch)")
    emit("   loader alone = samples/s of the loader with the trainer mocked; synthetic = the trainer with the")
    emit("   loader mocked; end to end = batch / (t_load + t_compute), t_load = next + wait_to_read,")
    emit("   t_compute = forward + backward + SGD update + waitall; loader-bound = loader alone < synthetic")
    emit(f"{'model':<12}{'batch':>6}{'loader':>22}{'aug':>5}{'loader alone':>14}{'synthetic':>11}"
         f"{'end to end':>12}{'load s/b':>10}{'compute s/b':>13}{'load %':>8}{'bound':>8}{'other CPUs':>12}")
    specs = train_specs(args.seconds)
    for i, spec in enumerate(specs):
        for _ in range(args.repeats):
            res = run(spec, env, args.data_dir)
            first = first or res
            emit(f"{spec['train_model']:<12}{spec['batch_size']:6d}{spec['loader']:>22}"
                 f"{'yes' if spec['augment'] else 'no':>5}{res['samples_per_s']:14.1f}"
                 f"{res['synthetic_samples_per_s']:11.2f}{res['end_to_end_samples_per_s']:12.2f}"
                 f"{res['load_seconds_per_batch']:10.4f}{res['compute_seconds_per_batch']:13.4f}"
                 f"{100 * res['load_share']:7.1f}%{'loader' if res['loader_bound'] else 'trainer':>8}"
                 f"{fmt_other(res):>12}")
        if i + 1 == len(specs) or specs[i + 1]["train_model"] != spec["train_model"]:
            cross_check(spec, env, args.repeats, emit)
    emit("   (rates in samples/s; ResNet-50: 3x224x224 crops of 256x256 JPEGs, 256 images, 5 batches each way,")
    emit("    2 decode threads; LeNet: 1x28x28 crops of 32x32 grey JPEGs, 512 images, 40 batches each way,")
    emit("    1 decode thread)")
    return first


if __name__ == "__main__":
    main()
