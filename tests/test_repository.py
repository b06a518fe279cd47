"""The repository's promises: README commands, CI script."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands():
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    return [ln.strip() for ln in block.strip().splitlines() if not ln.startswith("#")]


def test_readme_opens_with_the_suite_and_the_test_command():
    main, tests = _readme_commands()
    assert main.endswith("pytest perf_tests -m cpu")
    assert "pytest tests" in tests


def test_ci_runs_the_readme_test_command_exactly():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _readme_commands()[1] in [ln.strip() for ln in ci]


def _import_graph():
    """module -> modules of this package it imports (anywhere in the file, lazy imports too)."""
    import ast
    pkg = ROOT / "pytest_mxperf"
    graph = {}
    for path in pkg.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        base = name if rel.name == "__init__" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    anchor = base.split(".")
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    mod = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if mod.startswith("pytest_mxperf"):
                    for alias in node.names:
                        sub = f"{mod}.{alias.name}"
                        deps.add(sub if (pkg.parent / (sub.replace(".", "/") + ".py")).exists()
                                 or (pkg.parent / sub.replace(".", "/")).is_dir() else mod)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("pytest_mxperf"))
        deps.discard(name)
        graph[name] = {d for d in deps if d != "pytest_mxperf"}
    return graph


def test_the_package_has_no_import_circles():
    graph = _import_graph()
    state, cycles = {}, []

    def visit(n, stack):
        state[n] = "open"
        for d in sorted(graph.get(n, ())):
            if state.get(d) == "open":
                cycles.append(stack[stack.index(d):] + [d] if d in stack else [n, d])
            elif d not in state:
                visit(d, stack + [d])
        state[n] = "done"

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_child_side_imports_nothing_from_the_parent_side():
    """Workers run under other MXNet installs: they use the protocol, the zoo and jsonio only."""
    allowed = {"pytest_mxperf.workers", "pytest_mxperf.zoo", "pytest_mxperf.model.jsonio", "pytest_mxperf.model.user_network"}
    graph = _import_graph()
    bad = {n: sorted(d for d in deps if not any(d == a or d.startswith(a + ".") for a in allowed))
           for n, deps in graph.items() if n.startswith("pytest_mxperf.workers")}
    assert not {n: d for n, d in bad.items() if d}, bad


#: The package's floors, lowest first (docs/architecture.md): a module imports from its own
#: floor or a lower one, never from a higher one.
FLOORS = [
    {"model", "zoo", "workers"},  # what both sides share (data, its JSON form), and the child side
    {"proc"},                     # starting and bounding processes; MXNet installs
    {"machine"},                  # facts about the machine
    {"judge"},                    # rules: statistics to verdicts, floors, machine states
    {"store", "history"},         # baselines, results files, the history store
    {"measure"},                  # the session's measurements
    {"output"},                   # what a session shows and writes
    {"outcome"},                  # the end of a session: judge, confirm, record, write
    {"cli"},                      # command-line tools
    {"plugin", "command_line", "collection", "session_start", "hookspecs", ""},  # the pytest wiring, the package
]


def _floor(module: str) -> int:
    part = module.split(".")[1] if "." in module else ""
    return next(i for i, names in enumerate(FLOORS) if part in names)


def test_every_module_sits_on_a_floor_and_imports_nothing_from_a_higher_one():
    graph = _import_graph()
    upward = sorted(f"{n} -> {d}" for n, deps in graph.items() for d in deps if _floor(d) > _floor(n))
    assert not upward, "imports from a higher floor: " + "; ".join(upward)


def test_every_link_between_the_readme_and_the_docs_resolves():
    import re
    bad = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not target.startswith(("http://", "https://")) and not (page.parent / target).exists():
                bad.append(f"{page.name} -> {target}")
    assert not bad, bad
    assert len((ROOT / "README.md").read_text().splitlines()) < 200  # a front page, the rest in docs/


# ----------------------------------------------------------------------------- the core's shape (issue 34)

def test_the_plugin_is_thin():
    """plugin.py: at most 250 lines, no hook body over 10 lines, nothing of ours on pytest's
    config but through ``config.stash``."""
    import ast
    import re
    src = (ROOT / "pytest_mxperf" / "plugin.py").read_text()
    assert len(src.splitlines()) <= 250
    long = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("pytest_"):
            body = node.body[1:] if isinstance(node.body[0], ast.Expr) and isinstance(
                getattr(node.body[0], "value", None), ast.Constant) else node.body  # the docstring is not the body
            lines = node.end_lineno - body[0].lineno + 1
            if lines > 10:
                long.append(f"{node.name}: {lines} lines")
    assert not long, long
    assert not re.search(r"config\._", src)


def test_the_reference_option_is_read_where_the_comparison_is_chosen():
    """At most 3 modules name ``options.reference``: the mode is decided once."""
    import re
    naming = [p.name for p in (ROOT / "pytest_mxperf").rglob("*.py")
              if re.search(r"\b(options|o)\.reference\b", p.read_text())]
    assert len(naming) <= 3, naming


def test_the_architecture_map_names_every_module_and_nothing_else():
    """docs/architecture.md names every module of the package by its path in the package
    (``folder/module.py``), and every such path it names exists."""
    import re
    text = (ROOT / "docs" / "architecture.md").read_text()
    pkg = ROOT / "pytest_mxperf"
    modules = {str(p.relative_to(pkg)) for p in pkg.rglob("*.py") if p.name != "__init__.py"}
    named = set(re.findall(r"`((?:[a-z_]+/)?[a-z_0-9]+\.py)`", text))
    folders = {m.split("/")[0] for m in modules if "/" in m}
    assert not sorted(modules - named), f"modules the map does not name: {sorted(modules - named)}"
    in_package = {n for n in named if n.split("/")[0] in folders or "/" not in n}
    missing = sorted(n for n in in_package if n not in modules
                     and not (ROOT / "tests" / n).exists() and not (ROOT / "benchmarks" / n).exists())
    assert not missing, f"named in the map but not in the package: {missing}"


def test_the_test_commands_work_units_keep_real_mxnet_tests_apart_and_modules_whole():
    """``--dist loadgroup`` hands xdist's workers whole units (tests/conftest.py): every test of
    a real-MXNet module, and the tests marked spins, in one unit (never two at once); any other
    module a unit of its own; a group suffix an older xdist adds to test ids changes nothing."""
    from conftest import REAL_MXNET_UNIT, SPINNING_TESTS, work_unit
    assert work_unit("tests/test_zoo.py::test_count_covers_all_models") == REAL_MXNET_UNIT
    assert work_unit("tests/test_wheel.py::test_x[a-b]@real-mxnet") == REAL_MXNET_UNIT
    assert work_unit("tests/test_tables.py::test_y[p]") == "tests/test_tables.py"
    assert work_unit("tests/test_tables.py::test_y[a@b]") == "tests/test_tables.py"
    for stem, function in SPINNING_TESTS:
        assert work_unit(f"tests/{stem}.py::{function}") == REAL_MXNET_UNIT
        assert work_unit(f"tests/{stem}.py::test_another_one") == f"tests/{stem}.py"


def test_the_repository_ships_no_machines_baseline():
    """A clean clone is never judged against a baseline nobody on that machine recorded
    (issue 75, part 4): ``baselines/`` holds its README alone, whatever a session wrote there
    (git tracks no other file in it); the tests read theirs from ``tests/data/``."""
    import subprocess
    tracked = subprocess.run(["git", "ls-files", "baselines"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:  # not a git checkout (an sdist): what is on disk is what ships
        names = sorted(p.name for p in (ROOT / "baselines").iterdir() if not p.name.startswith("."))
    else:
        names = sorted(Path(p).name for p in tracked.stdout.split())
    assert names == ["README.md"], names
    assert sorted((ROOT / "tests" / "data").glob("baseline-*.json"))


def _literal_constants(path):
    """The module-level UPPER_CASE names ``path`` binds to a number or a truth value (the
    rules' numbers), with or without an annotation."""
    import ast
    tree = ast.parse(path.read_text())
    out = []
    for node in tree.body:
        targets, value = ([node.target], node.value) if isinstance(node, ast.AnnAssign) else (
            (node.targets, node.value) if isinstance(node, ast.Assign) else ((), None))
        for t in targets:
            if isinstance(t, ast.Name) and t.id.isupper() and isinstance(value, ast.Constant) \
                    and isinstance(value.value, (int, float, bool)):
                out.append(t.id)
    return out


def test_the_end_of_a_sessions_rules_keep_their_numbers_in_judge():
    """docs/architecture.md, "Constants, defined once": the rules' numbers live in judge/
    (``judge/thresholds.py``; a rule's own module there); outcome/ applies them and binds none."""
    found = {p.name: _literal_constants(p) for p in sorted((ROOT / "pytest_mxperf" / "outcome").glob("*.py"))}
    assert not {name: c for name, c in found.items() if c}, found
    assert {"SETUP_CLEARANCE", "PROVISIONAL_CLEARS", "OWN_DF", "LOOKS"} <= set(
        _literal_constants(ROOT / "pytest_mxperf" / "judge" / "thresholds.py"))


def _phrases(path):
    """The string literals of ``path`` that are phrases (three words or more), docstrings and
    annotations aside: text a person reads."""
    import ast
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            skip.add(id(node.body[0].value))
        anns = ([node.returns] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []) + (
            [node.annotation] if isinstance(node, (ast.arg, ast.AnnAssign)) else [])
        skip.update(id(n) for ann in anns if ann is not None for n in ast.walk(ann))
    return [f"{path.name}:{n.lineno} {n.value[:50]!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
            and len(n.value.split()) >= 3]


def test_the_end_of_a_session_words_nothing_itself():
    """docs/architecture.md, "Why these floors": outcome/ decides kinds and passes facts; every
    sentence a verdict, a cell or a profile carries from it is worded in output/
    (``output/reasons.py``, ``output/messages.py``), so rewording a line changes no status. The
    check finds a phrase where one is put back: output/reasons.py holds them."""
    found = [p for path in sorted((ROOT / "pytest_mxperf" / "outcome").glob("*.py")) for p in _phrases(path)]
    assert not found, found
    assert len(_phrases(ROOT / "pytest_mxperf" / "output" / "reasons.py")) >= 20


def test_every_kind_of_cell_is_declared_in_the_registry_alone():
    """docs/architecture.md, "One measurement model": the package names no kind's list of modes
    outside model/kinds.py (a tuple of two or more kinds' names, as the tables before it were).
    The child side (workers/, zoo/) reads no registry: its copies (the profile worker's kinds,
    the FLOP counter's forward-only and training kinds) are held to it by
    tests/test_kind_registry.py."""
    import ast
    from pytest_mxperf.model import kinds
    names = set(kinds.MODES)
    found = []
    for path in (ROOT / "pytest_mxperf").rglob("*.py"):
        rel = path.relative_to(ROOT / "pytest_mxperf").as_posix()
        if rel == "model/kinds.py" or rel.startswith(("workers/", "zoo/")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                strs = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if len(strs) >= 2 and len(strs) == len(node.elts) and set(strs) <= names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {strs}")
    assert not found, found


def test_the_results_index_names_what_each_claim_rests_on():
    """benchmarks/results/INDEX.md is what benchmarks/results_index.py writes from the docs as they
    are (run it after a doc or a results file changes), every results file a doc names exists, and
    something rests on every results file (a doc or a test names it) and every script of benchmarks/
    (a named results file or a corpus it made, a doc or a test that names it, a replay, a kept
    script that uses it): experiments nothing rests on go (git keeps them)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("results_index", ROOT / "benchmarks" / "results_index.py")
    index = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(index)
    assert index.missing(ROOT) == []
    assert (ROOT / "benchmarks" / "results" / "INDEX.md").read_text() == index.index_text(ROOT), \
        "benchmarks/results/INDEX.md is stale: run python benchmarks/results_index.py"
    assert index.unrested(ROOT) == [], "nothing rests on these: remove them (git keeps them) or name them"


def test_the_package_points_at_the_docs_not_at_benchmarks():
    """docs/architecture.md, "Evidence": a comment or docstring of the package says what a
    constant or a behaviour is and why, and points at the doc section that holds its evidence;
    the docs name the results file and the script. No module of the package cites
    ``benchmarks/`` (a script, a results file or a corpus) itself."""
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}"
             for path in sorted((ROOT / "pytest_mxperf").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if "benchmarks/" in line]
    assert not found, "\n".join(found)
