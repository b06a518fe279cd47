"""Throughput plots for the report: images/s against batch size, one PNG per (model, mode).

Each plot shows this session's curve (median of per-process medians, error bars from the
between-process IQR), the machine's baseline curve (newest recording per cell, dashed), and
the documented MXNet curves (K80, M40, P100, C4.* tables via ``tables.documented_curves``)
as thin lines, on a log2 batch axis. Uses matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from pytest_mxperf.model import kinds
from pytest_mxperf.model.measurement import CellMeasurement
from pytest_mxperf.workers.serving import within_bound

if TYPE_CHECKING:
    from pytest_mxperf.store.baselines import Baseline

#: the kinds whose throughput is plotted against batch size: those the published tables hold
#: floors of (drawn beside them), as ``model/kinds.py`` declares
PLOTTED_MODES = kinds.FLOOR_MODES


def _as_record(r: Union[CellMeasurement, Mapping[str, Any]]) -> Dict[str, Any]:
    return r.to_dict() if isinstance(r, CellMeasurement) else dict(r)


def _variant(w: Mapping[str, Any]) -> str:
    ctx = ",".join(w.get("contexts") or ["cpu:0"])
    return f"{ctx} {w.get('dtype', 'float32')} threads={w.get('threads', 'auto')}"


def _series(items: Sequence[Tuple[Mapping[str, Any], Optional[float], Optional[Mapping[str, Any]]]]):
    """(workload, median, spread) -> {variant: sorted [(batch, median, lo_err, hi_err)]}."""
    out: Dict[str, List[Tuple[int, float, float, float]]] = defaultdict(list)
    for w, med, spread in items:
        if med is None:
            continue
        lo = hi = 0.0
        if spread and isinstance(spread.get("q1"), (int, float)) and isinstance(spread.get("q3"), (int, float)):
            lo, hi = max(0.0, med - spread["q1"]), max(0.0, spread["q3"] - med)
        out[_variant(w)].append((int(w["batch_size"]), float(med), lo, hi))
    return {k: sorted(v) for k, v in out.items()}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def plot_throughput(records: Sequence[Union[CellMeasurement, Mapping[str, Any]]],
                    baseline: Optional["Baseline"], out_dir: Union[str, Path],
                    tables=None) -> List[Path]:
    """Write ``<out_dir>/throughput-<model>-<mode>.png`` per (model, mode) measured; return the paths.

    Only score and train cells with a median are plotted (other modes measure other units).

    ``records``: results records (``CellMeasurement.to_dict()`` dicts) or CellMeasurements.
    ``baseline``: the machine's ``Baseline`` (may be None).
    """
    from pytest_mxperf.judge.floors import documented_curves

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    ours: Dict[Tuple[str, str], list] = defaultdict(list)
    for r in map(_as_record, records):
        w = r.get("workload") or {}
        # images/s against batch size only means something for score and train cells
        if "model" in w and "batch_size" in w and w.get("mode", "score") in PLOTTED_MODES \
                and isinstance(r.get("median"), (int, float)):
            ours[(w["model"], w.get("mode", "score"))].append((w, r.get("median"), r.get("spread")))
    base: Dict[Tuple[str, str], list] = defaultdict(list)
    for key in baseline.keys() if baseline is not None else ():
        w = baseline.workload(key)
        hist = [h for h in baseline.recordings(key) if h.get("median") is not None]
        if "model" in w and "batch_size" in w and hist:
            base[(w["model"], w.get("mode", "score"))].append((w, hist[-1]["median"], hist[-1].get("spread")))

    paths: List[Path] = []
    if not ours:  # nothing this session measured is plotted: matplotlib's import (about a CPU-second) spared
        return paths
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter

    for (model, mode), items in sorted(ours.items()):
        fig, ax = plt.subplots(figsize=(10, 5.5), dpi=100)
        batches = set()
        for variant, pts in _series(items).items():
            xs = [p[0] for p in pts]
            batches.update(xs)
            ax.errorbar(xs, [p[1] for p in pts], yerr=[[p[2] for p in pts], [p[3] for p in pts]], marker="o",
                        linewidth=2, capsize=4, label=f"this run ({variant})", zorder=5)
        for variant, pts in _series(base.get((model, mode), [])).items():
            xs = [p[0] for p in pts]
            batches.update(xs)
            ax.errorbar(xs, [p[1] for p in pts], yerr=[[p[2] for p in pts], [p[3] for p in pts]], marker="s",
                        linestyle="--", linewidth=1.5, capsize=3, alpha=0.8, label=f"baseline ({variant})", zorder=4)
        if mode in PLOTTED_MODES:
            try:
                curves = documented_curves(model, mode, tables) if tables is not None else documented_curves(model, mode)
            except Exception:  # a broken table file must not break the report
                curves = {}
            for table_id, curve in sorted(curves.items()):
                pts = sorted((b, v) for b, v in curve.items() if v is not None)
                if pts:
                    batches.update(b for b, _ in pts)
                    ax.plot([b for b, _ in pts], [v for _, v in pts], linewidth=0.8, alpha=0.7,
                            marker=".", markersize=3, label=f"documented {table_id.split('/', 1)[-1]}")
        ax.set_xscale("log", base=2)
        if batches:
            ticks = sorted(batches)
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xticklabels([str(t) for t in ticks])
        ax.set_yscale("log")
        paths.append(_saved(fig, ax, out_dir / f"throughput-{_safe(model)}-{_safe(mode)}.png",
                            "batch size (per device)", "images / s (higher is better)", f"{model} — {mode}",
                            loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0))
    return paths


def _saved(fig, ax, path: Path, xlabel: str, ylabel: str, title: str, **legend) -> Path:
    """``fig`` labelled, gridded, with its legend (``legend``: where), written to ``path`` and closed."""
    import matplotlib.pyplot as plt
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, **legend)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")  # a legend outside the axes, and a title wider than them, kept whole
    plt.close(fig)
    return path


def _serving_points(runs: Sequence[Mapping[str, Any]]):
    """One install's points of a serving record (its ``runs`` or ``reference_runs``): (the peak
    search's runs: (rate, latency, held as the worker judged it)), (the target-rate runs: (rate,
    p50, p90, p99)), its bound, the peak search's percentile (None without one) and MXNet
    version; from each process's meta (a duet side's every run)."""
    search, target, bound, pct, version = [], [], None, None, None
    for run in runs or []:
        meta = run.get("meta") or {}
        s = meta.get("serving") or {}
        bound, pct = s.get("latency_bound_ms", bound), s.get("percentile", pct)
        version = meta.get("mxnet_version") or version
        for p in meta.get("peak_runs") or []:
            # the worker's own answer, else (a result written before steps carried it) the same
            # rule on the step's figures (``serving.within_bound``: early stopping, bound, served)
            held = p["held"] if "held" in p else bound is not None and within_bound(p, {"latency_bound_ms": bound})
            search.append((float(p["target_qps"]), float(p["serving_latency_ms"]), bool(held)))
        for done in meta.get("serving_runs") or []:
            if done.get("target_qps") and all(isinstance(done.get(k), (int, float)) for k in _TARGET_FIGURES):
                target.append((float(done["target_qps"]),) + tuple(float(done[k]) for k in _TARGET_FIGURES))
    return search, target, bound, pct if search else None, version


#: a target-rate run's percentiles, as the plot shows them
_TARGET_FIGURES = ("serving_p50_ms", "serving_p90_ms", "serving_p99_ms")
#: each install's colour: the candidate (this session's), the reference (A/B mode)
_SIDE_COLOURS = {"candidate": ("tab:blue", "tab:cyan"), "reference": ("tab:orange", "tab:red")}


def plot_serving(records: Sequence[Union[CellMeasurement, Mapping[str, Any]]], out_dir: Union[str, Path]) -> List[Path]:
    """Write ``<out_dir>/serving-<model>.png`` per model a serving cell measured: latency against
    the offered rate for each install (A/B mode: the candidate and the reference), the peak
    search's runs (held: filled, over the bound or early stopping not met: open), every
    target-rate run's p50/p90/p99, and the bound; return the paths."""
    by_model: Dict[str, Dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in map(_as_record, records):
        w = r.get("workload") or {}
        if w.get("mode") in kinds.SERVING_MODES:
            for side, runs in (("candidate", r.get("runs")), ("reference", r.get("reference_runs"))):
                if runs:
                    by_model[w.get("model", "?")][side].append(_serving_points(runs))
    paths: List[Path] = []
    if not any(s or t for sides in by_model.values() for pts in sides.values() for s, t, *_ in pts):
        return paths
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    markers = dict(zip(_TARGET_FIGURES, ("s", "^", "D")))
    for model, sides in sorted(by_model.items()):
        parts = [p for pts in sides.values() for p in pts]
        if not any(s or t for s, t, *_ in parts):
            continue
        bound = next((b for _, _, b, _, _ in parts if b is not None), None)
        pct = next((q for _, _, _, q, _ in parts if q is not None), None)  # the peak search's own
        fig, ax = plt.subplots(figsize=(9, 5), dpi=100)
        for side, pts in sides.items():
            version = next((v for *_, v in pts if v), None)
            who = f"{side} (mxnet {version})" if version else side
            held_c, over_c = _SIDE_COLOURS[side]
            search = [p for s, *_ in pts for p in s]
            target = [p for _, t, *_ in pts for p in t]
            held = [(x, y) for x, y, ok in search if ok]
            over = [(x, y) for x, y, ok in search if not ok]
            if held:
                ax.plot(*zip(*sorted(held)), "o", color=held_c,
                        label=f"{who}: peak search, held" + (f" (p{100 * pct:g})" if pct is not None else ""))
            if over:
                ax.plot(*zip(*sorted(over)), "o", mfc="none", color=over_c,
                        label=f"{who}: peak search, not held (over, unserved or unsettled)")
            for i, name in enumerate(_TARGET_FIGURES):
                pts_i = sorted((p[0], p[1 + i]) for p in target)
                if pts_i:
                    ax.plot(*zip(*pts_i), markers[name], color=held_c, alpha=0.4 + 0.2 * i,
                            label=f"{who}: target rate, {name.split('_')[1]}")
        if bound is not None:
            ax.axhline(bound, color="gray", linestyle="--", linewidth=1, label=f"bound {bound:g} ms")
        ax.set_xscale("log")
        ax.set_yscale("log")
        paths.append(_saved(fig, ax, out_dir / f"serving-{_safe(model)}.png",
                            "offered rate (queries / s, Poisson arrivals)",
                            "latency (ms, scheduled arrival to completion)",
                            f"{model} — serving under load (MLPerf LoadGen, Server scenario)",
                            loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0))
    return paths
