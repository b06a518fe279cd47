"""The index of ``benchmarks/``: for each results file, the places in the docs (README.md and
docs/*.md, by section) whose claims name it and the scripts it says made it; the files no doc
names, kept because a test names them; and for each script, what rests on it. A doc names a
file by its name, or by a pattern with ``*`` (``warmup-same-figures-*.txt``).
tests/test_repository.py holds the committed index to this, and fails on a results file or a
script that nothing rests on (git keeps what went).

    python benchmarks/results_index.py          # writes benchmarks/results/INDEX.md
"""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
INDEX = RESULTS / "INDEX.md"
#: a results file's name as the docs write it: a name with a date, or a pattern of one
_NAMED = re.compile(r"[A-Za-z0-9_.*-]+\.(?:txt|json)")
#: the tools every kept replay runs on: a script that imports it is a replay, kept with it
REPLAY_LIB = "replay_lib"


def docs(root: Path = ROOT) -> List[Path]:
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def results_files(root: Path = ROOT) -> List[str]:
    return sorted(p.name for p in (root / "benchmarks" / "results").iterdir() if p.name != INDEX.name)


def scripts(root: Path = ROOT) -> List[str]:
    """The scripts of ``benchmarks/``, by module name."""
    return sorted(p.stem for p in (root / "benchmarks").glob("*.py"))


def citations(root: Path = ROOT) -> Dict[str, List[str]]:
    """results file name -> the places that name it ("docs/x.md: section"), in order, once each."""
    files = results_files(root)
    out: Dict[str, List[str]] = {f: [] for f in files}
    for doc in docs(root):
        section, fenced = "(top)", False
        for line in doc.read_text().splitlines():
            if line.startswith("```"):
                fenced = not fenced
            elif line.startswith("#") and not fenced:
                section = line.lstrip("#").strip()
                continue
            for name in set(_NAMED.findall(line)):
                for f in fnmatch.filter(files, name.split("/")[-1]):
                    place = f"{doc.relative_to(root)}: {section}"
                    if place not in out[f]:
                        out[f].append(place)
    return out


def missing(root: Path = ROOT) -> List[str]:
    """Names of results files the docs name that do not exist (a pattern that matches none)."""
    files = [p.name for p in (root / "benchmarks" / "results").iterdir()]
    gone = []
    for doc in docs(root):
        text = doc.read_text()
        for m in re.finditer(r"benchmarks/results/([A-Za-z0-9_.*-]+\.(?:txt|json))", text):
            if not fnmatch.filter(files, m.group(1)):
                gone.append(f"{doc.relative_to(root)}: {m.group(1)}")
    return sorted(set(gone))


def _names_file(text: str, name: str) -> bool:
    """Whether ``text`` names the results file ``name``: by its name, or by its stem not
    followed by more of a name (``daily-gate-2026-11-26`` is not ``daily-gate-2026-11-26d``)."""
    stem = re.escape(name.rsplit(".", 1)[0])
    return re.search(stem + r"(?![A-Za-z0-9_-])", text) is not None


def elsewhere(root: Path, names: List[str]) -> Dict[str, List[str]]:
    """name -> the tests and the package's modules that name it (comments, docstrings)."""
    out: Dict[str, List[str]] = {n: [] for n in names}
    for path in sorted(list((root / "tests").glob("*.py")) + list((root / "pytest_mxperf").rglob("*.py"))):
        text = path.read_text()
        for n in names:
            if _names_file(text, n):
                out[n].append(str(path.relative_to(root)))
    return out


def _names_script(text: str, script: str) -> bool:
    """Whether ``text`` (a results file, a doc, a test) names the script ``script``:
    ``benchmarks/x.py``, or ``x.py`` alone (not ``workers/x.py``), or imports it."""
    return re.search(r"(?:benchmarks/|(?<![\w/.]))" + re.escape(script) + r"\.py\b", text) is not None \
        or re.search(r"^\s*(?:import|from) " + re.escape(script) + r"\b", text, re.M) is not None


def made_by(root: Path, names: List[str]) -> Dict[str, List[str]]:
    """results file name -> the scripts it names (the commands that made it)."""
    mods = scripts(root)
    out = {}
    for n in names:
        text = (root / "benchmarks" / "results" / n).read_text(errors="replace")
        out[n] = [m for m in mods if _names_script(text, m)]
    return out


def _docstrings(tree: ast.AST) -> set:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _imports(root: Path, script: str) -> List[str]:
    """The scripts of benchmarks/ that ``script`` imports, or runs (a string, not a docstring,
    that names ``x.py``)."""
    mods = set(scripts(root))
    tree = ast.parse((root / "benchmarks" / f"{script}.py").read_text())
    skip = _docstrings(tree)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in mods}
        elif isinstance(node, ast.ImportFrom) and node.module in mods:
            found.add(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found |= {m for m in mods if re.search(r"(?<![\w/])" + re.escape(m) + r"\.py\b", node.value)}
    return sorted(found - {script})


def tools(root: Path = ROOT) -> Dict[str, List[str]]:
    """script -> what rests on it: the results files the docs or the tests name that it made,
    the corpora in ``benchmarks/data`` it collected, the docs and the tests that name or import it, being a replay (it imports ``replay_lib``,
    the replays' library), and the scripts kept for those that import or run it."""
    cited = citations(root)
    lone = [f for f, places in cited.items() if not places]
    by_tests = elsewhere(root, lone)
    named = [f for f, places in cited.items() if places] + [
        f for f in lone if any(p.startswith("tests/") for p in by_tests[f])]
    makers = made_by(root, named)
    texts = {str(d.relative_to(root)): d.read_text() for d in docs(root)}
    texts.update({str(t.relative_to(root)): t.read_text() for t in sorted((root / "tests").glob("*.py"))})
    uses = {s: _imports(root, s) for s in scripts(root)}
    #: the recorded corpora the replays and the tests read (``replay_lib``), each naming what collected it
    corpora = {d.name: d.read_text(errors="replace") for d in sorted((root / "benchmarks" / "data").glob("*.json"))}
    out: Dict[str, List[str]] = {}
    for s in scripts(root):
        why = [f"made `{f}`" for f in named if s in makers[f]]
        why += [f"made the corpus `data/{d}`" for d, text in corpora.items() if _names_script(text, s)]
        why += [f"named by {where}" for where, text in texts.items() if _names_script(text, s)]
        if s == REPLAY_LIB:
            why.append("the replays' library")
        elif REPLAY_LIB in uses[s]:
            why.append("a replay (imports replay_lib)")
        out[s] = why
    kept = {s for s, why in out.items() if why}
    while True:  # what a kept script imports or runs is kept with it
        more = {dep for s in kept for dep in uses[s]} - kept
        if not more:
            break
        kept |= more
    for s in scripts(root):
        out[s] += [f"used by {user}.py" for user in scripts(root) if s in uses[user] and user in kept]
    return out


def unrested(root: Path = ROOT) -> List[str]:
    """Results files no doc and no test names, and scripts nothing rests on: experiments to
    remove (git keeps them)."""
    cited = citations(root)
    lone = [f for f, places in cited.items() if not places]
    named = elsewhere(root, lone)
    out = [f"benchmarks/results/{f}" for f in lone if not any(p.startswith("tests/") for p in named[f])]
    out += [f"benchmarks/{s}.py" for s, why in tools(root).items() if not why and s != "results_index"]
    return out


def _short(items: List[str], n: int = 3) -> str:
    return "; ".join(items[:n]) + (f"; and {len(items) - n} more" if len(items) > n else "")


def index_text(root: Path = ROOT) -> str:
    cited = citations(root)
    rested = {f: places for f, places in cited.items() if places}
    lone = [f for f, places in cited.items() if not places]
    makers = made_by(root, list(cited))
    lines = ["# benchmarks: what rests on each file",
             "",
             "Written by `benchmarks/results_index.py` (tests/test_repository.py holds it to the docs): each results",
             "file, the places in README.md and docs/*.md whose claims name it, and the scripts it names (the",
             "commands that made it); then each script of `benchmarks/` and what rests on it. Every figure in a file",
             "says which CPU it came from and the command that made it.",
             "",
             f"## Named by the docs ({len(rested)} files)",
             "",
             "| file | named in | made by |",
             "|---|---|---|"]
    lines += [f"| `{f}` | {'; '.join(places)} | {', '.join(makers[f]) or '-'} |" for f, places in rested.items()]
    lines += ["", f"## Named by a test, not by a doc ({len(lone)} files)", "",
              "No claim in the docs names these; a test's comment or docstring does (the evidence of what the",
              "test holds, or of the case it reproduces), so they stay while it does.", "",
              "| file | named by | made by |", "|---|---|---|"]
    other = elsewhere(root, lone)
    lines += [f"| `{f}` | {', '.join(other[f]) or '-'} | {', '.join(makers[f]) or '-'} |" for f in lone]
    kept = tools(root)
    lines += ["", f"## The scripts ({len(kept)})", "",
              "What rests on each: the results files above it made, the docs and tests that name or import it, the",
              "scripts kept for those that use it, the replays' library.", "",
              "| script | what rests on it |", "|---|---|"]
    lines += [f"| `{s}.py` | {_short(why, 4) or ('this index' if s == 'results_index' else '-')} |"
              for s, why in kept.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    INDEX.write_text(index_text())
    gone, lone = missing(), unrested()
    print(f"{INDEX.relative_to(ROOT)} written; names in the docs with no file: {gone or 'none'}; "
          f"what nothing rests on: {lone or 'none'}")
    if gone or lone:
        sys.exit(1)


if __name__ == "__main__":
    main()
