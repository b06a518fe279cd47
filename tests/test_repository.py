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
