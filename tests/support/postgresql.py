"""A throwaway PostgreSQL server on a free loopback port, from the server
binaries of Debian's `postgresql` package (`make deps` installs it):
initdb into a temporary directory, no fsync, removed at the end. PostgreSQL
refuses to run as root, so as root it runs as the package's `postgres` user."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Optional

from ferrolock.testing import free_port


def binaries() -> Optional[str]:
    """The directory of the newest installed server's initdb and postgres, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return os.path.dirname(found[-1]) if found else None


def missing() -> Optional[str]:
    """Why no server can be started here, or None when one can."""
    if binaries() is None:
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin): `make deps` installs Debian's"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no `postgres` user to run the server as"
    return None


class PostgresServer:
    """A context manager: `url` is a SQLAlchemy URL (psycopg 3) of the
    `postgres` database, reachable with no password over 127.0.0.1."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="ferrolock-pg-")
        self.proc: Optional[subprocess.Popen] = None
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            os.chown(self.dir, pwd.getpwnam(self.user).pw_uid, -1)

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> "PostgresServer":
        bin_dir = binaries()
        assert bin_dir, missing()
        data = os.path.join(self.dir, "data")
        subprocess.run(
            [os.path.join(bin_dir, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"],
            user=self.user,
            check=True,
            capture_output=True,
            timeout=120,
        )
        self.proc = subprocess.Popen(
            [
                os.path.join(bin_dir, "postgres"),
                "-D",
                data,
                "-p",
                str(self.port),
                "-k",
                self.dir,
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ],
            user=self.user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        ready = os.path.join(bin_dir, "pg_isready")
        deadline = time.monotonic() + 60
        while subprocess.run([ready, "-q", "-h", "127.0.0.1", "-p", str(self.port)]).returncode != 0:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}: {self.proc.stderr.read().decode()}")
            assert time.monotonic() < deadline, "postgres did not accept connections within 60 s"
            time.sleep(0.05)  # the server is starting: nothing to await but its port
        return self

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
