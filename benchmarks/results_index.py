"""The index of ``benchmarks/results/``: for each results file, the places in the docs (README.md
and docs/*.md, by section) whose claims rest on it, and the files no claim in the docs names
(candidates to go: git keeps them). A doc names a file by its name, or by a pattern with ``*``
(``warmup-same-figures-*.txt``). tests/test_repository.py holds the committed index to this.

    python benchmarks/results_index.py          # writes benchmarks/results/INDEX.md
"""

from __future__ import annotations

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


def docs(root: Path = ROOT) -> List[Path]:
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def citations(root: Path = ROOT) -> Dict[str, List[str]]:
    """results file name -> the places that name it ("docs/x.md: section"), in order, once each."""
    files = sorted(p.name for p in (root / "benchmarks" / "results").iterdir() if p.name != INDEX.name)
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


def elsewhere(root: Path, names: List[str]) -> Dict[str, List[str]]:
    """name -> the package's modules and the tests that name it (comments, docstrings)."""
    out: Dict[str, List[str]] = {n: [] for n in names}
    for path in sorted(list((root / "pytest_mxperf").rglob("*.py")) + list((root / "tests").glob("*.py"))):
        text = path.read_text()
        for n in names:
            stem = n.rsplit(".", 1)[0]
            if stem in text:
                out[n].append(str(path.relative_to(root)))
    return out


def index_text(root: Path = ROOT) -> str:
    cited = citations(root)
    rested = {f: places for f, places in cited.items() if places}
    lone = [f for f, places in cited.items() if not places]
    lines = ["# benchmarks/results: what rests on each file",
             "",
             "Written by `benchmarks/results_index.py` (tests/test_repository.py holds it to the docs): each results",
             "file, and the places in README.md and docs/*.md whose claims name it. Every figure in a file says",
             "which CPU it came from and the command that made it.",
             "",
             f"## Named by the docs ({len(rested)} files)",
             "",
             "| file | named in |",
             "|---|---|"]
    lines += [f"| `{f}` | {'; '.join(places)} |" for f, places in rested.items()]
    lines += ["", f"## Named by no doc ({len(lone)} files)", "",
              "No claim in the docs rests on these now; where a module's comment or a test names one, it is said",
              "(its evidence belongs in a doc); the others are candidates to go (git keeps them).", "",
              "| file | named by code or tests |", "|---|---|"]
    other = elsewhere(root, lone)
    lines += [f"| `{f}` | {', '.join(other[f]) or '-'} |" for f in lone]
    return "\n".join(lines) + "\n"


def main() -> None:
    INDEX.write_text(index_text())
    gone = missing()
    print(f"{INDEX.relative_to(ROOT)} written; names in the docs with no file: {gone or 'none'}")
    if gone:
        sys.exit(1)


if __name__ == "__main__":
    main()
