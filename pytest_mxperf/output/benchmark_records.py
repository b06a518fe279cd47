"""Hand measured cells to pytest-benchmark, so ``--benchmark-json`` / ``--benchmark-autosave``
keep them and ``pytest-benchmark compare`` reads them.

Its ``benchmark`` fixture would time a callable inside the pytest process (spawn and bind
included); instead its Metadata record is built from the worker's seconds per batch (one
"iteration" is one batch). Cells whose figure is not a time per batch (kvstore, clusters,
convergence) carry their figures in ``extra_info`` only.
"""

from __future__ import annotations

from typing import Any, Dict, Optional


def add_cell(benchmark_session, node_name: str, nodeid: str, callspec, cell) -> Optional[Any]:
    """Append one cell to pytest-benchmark's session; returns the Metadata or None."""
    if benchmark_session is None or not cell.ok_runs:
        return None
    try:
        from pytest_benchmark.stats import Metadata
    except ImportError:  # pragma: no cover
        return None
    timings = [s for r in cell.ok_runs for s in r.seconds_per_batch]
    if not timings:
        return None
    extra: Dict[str, Any] = {
        "cell": cell.workload.key(),
        "metric": cell.primary.name,
        "unit_of_figure": cell.primary.unit,
        "figure": cell.median_or_none,
        "images_per_s": cell.median_or_none if cell.primary.name == "throughput" else None,
        "process_medians": cell.process_medians,
        "batch_size": cell.workload.batch_size,
        "total_batch": cell.workload.total_batch,
        "contexts": list(cell.workload.contexts),
        "mode": cell.workload.mode,
        "unit": "seconds per batch",
        "batches_per_round": [r.batches_per_round for r in cell.ok_runs],
    }

    class _Origin:
        name = node_name
        fullname = nodeid
        group = f"mxperf-{cell.workload.mode}"
        param = getattr(callspec, "id", None)
        params = {k: (list(v) if isinstance(v, (list, tuple)) else v)
                  for k, v in getattr(callspec, "params", {}).items()}
        cprofile_stats = None
        has_error = False
        extra_info = extra

    meta = Metadata(_Origin, iterations=1, options={"timer": "worker perf_counter", "min_rounds": 1})
    for s in timings:
        meta.update(s)
    benchmark_session.benchmarks.append(meta)
    return meta


#: pytest-benchmark's options that change what its terminal tables show: a user who gives one
#: wants the tables (their defaults as pytest-benchmark 5 declares them)
DISPLAY_OPTIONS = {"benchmark_verbose": False, "benchmark_columns": None, "benchmark_sort": "min",
                   "benchmark_group_by": "group", "benchmark_name": "normal", "benchmark_time_unit": None,
                   "benchmark_histogram": [], "benchmark_compare": [], "benchmark_cprofile": None}


def display_asked(getoption) -> bool:
    """Whether any of pytest-benchmark's display options was given (``getoption(name, default)``
    as pytest's ``config.getoption``)."""
    return any(getoption(name, default) != default for name, default in DISPLAY_OPTIONS.items())


class _Text:
    """The part of pytest's terminal reporter pytest-benchmark's table writes to, into text."""

    def __init__(self):
        self.parts = []

    def write(self, text, **markup):
        self.parts.append(text)

    def write_line(self, text, **markup):
        self.parts.append(text + "\n")

    def rewrite(self, text, **markup):
        pass

    def ensure_newline(self):
        pass


def table_text(benchmark_session, config) -> str:
    """pytest-benchmark's terminal tables of the session, as text, rendered by its own
    ``TableResults`` after its ``finish`` grouped them (no histogram written); "" when it has
    none."""
    from functools import partial

    from pytest_benchmark.table import TableResults
    from pytest_benchmark.utils import report_noprogress
    groups = getattr(benchmark_session, "groups", None)
    if not groups:
        return ""
    out = _Text()
    TableResults(columns=benchmark_session.columns, sort=benchmark_session.sort, histogram=False,
                 name_format=benchmark_session.name_format, logger=benchmark_session.logger,
                 scale_unit=partial(config.hook.pytest_benchmark_scale_unit, config=config)
                 ).display(out, groups, progress_reporter=report_noprogress)
    return "".join(out.parts)


def tables(config, report_dir, verbose: bool, write_text) -> Optional[str]:
    """pytest-benchmark's terminal tables of the cells: written to DIR/benchmark.txt with
    --perf-report DIR (``write_text(dir, name, lines)``), and kept off the terminal unless -v
    or one of its display options asks for them, through the attribute its --benchmark-quiet
    sets (``BenchmarkSession.quiet``, read by its ``display`` only: its --benchmark-json,
    --benchmark-save/-autosave and --benchmark-compare-fail work as before). Returns what the
    screen says of them: where they are ("" when in no file), or None when they follow on the
    terminal."""
    bs = session_of(config)
    if bs is None or not getattr(bs, "groups", None):
        return None
    where = None
    if report_dir:
        try:
            text = table_text(bs, config)
        except (ImportError, AttributeError, TypeError):  # a pytest-benchmark whose table is drawn otherwise
            text = ""
        if text:
            where, _ = write_text(report_dir, "benchmark.txt", text.splitlines())
    if verbose or getattr(bs, "verbose", False) or display_asked(config.getoption):
        return None
    bs.quiet = True
    return where or ""


def session_of(config):
    """pytest-benchmark's session on pytest's config (its ``_benchmarksession``), None without it."""
    return getattr(config, "_benchmarksession", None)
