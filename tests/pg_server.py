"""A real PostgreSQL server for the tests, started from the server binaries this machine has.

``server_binaries()`` finds them where they are (the ``PATH``, ``pg_config --bindir``, the
distributions' versioned directories: Debian's ``/usr/lib/postgresql/<version>/bin``, the
PGDG RPMs' ``/usr/pgsql-<version>/bin``, a source build's ``/usr/local/pgsql/bin``), the
newest first; no path is assumed. ``Server`` runs one in a temporary directory, listening on
loopback only, with password authentication (scram-sha-256) when given a password, else
trust; as the ``postgres`` account when the tests run as root (the server refuses root).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional


def _version(d: str) -> tuple:
    m = re.search(r"(\d+)(?:\.(\d+))?", d)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (0, 0)


def server_binaries() -> Optional[str]:
    """The directory of a PostgreSQL server's ``initdb`` and ``pg_ctl`` on this machine, or None."""
    found: List[str] = []
    exe = shutil.which("pg_ctl")
    if exe:
        found.append(str(Path(exe).resolve().parent))
    if shutil.which("pg_config"):
        try:
            out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                found.append(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    versioned = glob.glob("/usr/lib/postgresql/*/bin") + glob.glob("/usr/pgsql-*/bin")
    found += sorted(versioned, key=_version, reverse=True) + ["/usr/local/pgsql/bin"]
    for d in found:
        if Path(d, "pg_ctl").exists() and Path(d, "initdb").exists():
            return d
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A started server: ``url(password=True)``, ``stop()``."""

    def __init__(self, bindir: str, user: str = "mxperf", password: Optional[str] = None):
        self.bindir, self.user, self.password = bindir, user, password
        self.dir = Path(tempfile.mkdtemp(prefix="mxperf-pg-"))  # outside pytest's private tree
        data, sock = self.dir / "data", self.dir / "sock"
        sock.mkdir()
        self._as = {}
        if os.geteuid() == 0:
            import pwd
            pw = pwd.getpwnam("postgres")  # KeyError: no account to run it as
            self._as = {"user": pw.pw_uid, "group": pw.pw_gid}
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            os.chown(sock, pw.pw_uid, pw.pw_gid)
        init = [f"{bindir}/initdb", "-D", str(data), "-U", user]
        if password is not None:
            pwfile = self.dir / "pw"
            pwfile.write_text(password + "\n")
            if self._as:
                os.chown(pwfile, self._as["user"], self._as["group"])
            init += ["-A", "scram-sha-256", f"--pwfile={pwfile}"]
        else:
            init += ["-A", "trust"]
        subprocess.run(init, check=True, capture_output=True, **self._as)
        if password is not None:
            (self.dir / "pw").unlink()
        self.port = _free_port()
        self.data = data
        subprocess.run([f"{bindir}/pg_ctl", "-D", str(data), "-w", "-l", str(self.dir / "log"), "-o",
                        f"-p {self.port} -k {sock} -c listen_addresses=127.0.0.1", "start"],
                       check=True, capture_output=True, **self._as)

    def url(self, with_password: bool = True, db: str = "postgres") -> str:
        cred = f"{self.user}:{self.password}" if (with_password and self.password is not None) else self.user
        return f"postgresql://{cred}@127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        subprocess.run([f"{self.bindir}/pg_ctl", "-D", str(self.data), "-m", "immediate", "stop"],
                       capture_output=True, **self._as)
        shutil.rmtree(self.dir, ignore_errors=True)
