"""Where a session came from, recorded beside its figures in the history: the user project's
git commit (when the session ran in a git checkout) and the CI run (when the environment
names one)."""

from __future__ import annotations

import os
import subprocess
from typing import Mapping, Optional

from pytest_mxperf.proc.child_env import child_env

#: CI systems' run ids, first found wins
CI_RUN_VARIABLES = (("GITHUB_RUN_ID", "github"), ("CI_PIPELINE_ID", "gitlab"), ("BUILDKITE_BUILD_ID", "buildkite"),
                    ("CIRCLE_WORKFLOW_ID", "circleci"), ("BUILD_TAG", "jenkins"), ("TF_BUILD_BUILDID", "azure"))


def git_commit(cwd: Optional[str] = None) -> Optional[str]:
    """HEAD of the git checkout at ``cwd`` (with "+dirty" when it has uncommitted changes
    to tracked files); None outside a checkout or without git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10,
                              env=child_env())
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10, env=child_env())
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def ci_run(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """"github:123456789" (with the attempt when GitHub gives one), or None."""
    env = os.environ if env is None else env
    for var, name in CI_RUN_VARIABLES:
        if env.get(var):
            attempt = env.get("GITHUB_RUN_ATTEMPT") if name == "github" else None
            return f"{name}:{env[var]}" + (f".{attempt}" if attempt else "")
    return None
