"""Throwaway PostgreSQL clusters for floe's integration tests.

The server is PostgreSQL 15 from Debian unless ``FLOE_PG_VERSION`` names another
major version of the matrix (16, 17, 18: installed by scripts/bootstrap under
.venv/postgres/<major>); ``FLOE_PG_BINDIR`` names a bin directory outright. A cluster is initdb'ed into a fresh temporary directory, listens on a free
loopback port with ``wal_level=logical``, and is stopped and deleted afterwards.
PostgreSQL refuses to run as root, so when the tests run as root (as CI does) the
server runs as an unprivileged user (``FLOE_PG_USER``, default ``nobody``).

Each cluster directory records the pid of the process that created it; a later
run removes directories whose creator is gone (a crashed or killed test run), so
leftovers never pile up or get in the way.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DIR_PREFIX = "floe-pg-"
OWNER_FILE = "owner.pid"


VERSIONS = (15, 16, 17, 18)
ROOT = Path(__file__).resolve().parents[2]


def pg_version() -> int:
    """The major version the tests start (FLOE_PG_VERSION, default 15)."""
    text = os.environ.get("FLOE_PG_VERSION", "15")
    if not text.isdigit() or int(text) not in VERSIONS:
        raise RuntimeError(f"FLOE_PG_VERSION={text!r}: the matrix has "
                           f"{', '.join(map(str, VERSIONS))}")
    return int(text)


def pg_bindir() -> Path:
    if "FLOE_PG_BINDIR" in os.environ:
        bindir = Path(os.environ["FLOE_PG_BINDIR"])
    elif pg_version() == 15:
        bindir = Path("/usr/lib/postgresql/15/bin")
    else:
        bindir = ROOT / ".venv" / "postgres" / str(pg_version()) / "bin"
    if not (bindir / "initdb").exists():
        raise RuntimeError(
            f"PostgreSQL {pg_version()} server binaries not found in {bindir} (no "
            "initdb). Run scripts/bootstrap (installs Debian's postgresql-15 and "
            ".venv/postgres/16-18), or set FLOE_PG_BINDIR to the directory holding "
            "initdb and pg_ctl."
        )
    return _readable_installation(bindir)


def client_tool(name: str) -> Path:
    """A client program (pg_basebackup, pg_recvlogical) of the tests' version, or
    18's when its installation has none (17's binaries carry the server only; 18's
    clients speak to the older servers)."""
    tool = pg_bindir() / name
    if tool.exists():
        return tool
    return _readable_installation(ROOT / ".venv" / "postgres" / "18" / "bin") / name


def _readable_installation(bindir: Path) -> Path:
    """As root the server runs as FLOE_PG_USER, which may not reach an installation
    inside the checkout (a clone under /root): such an installation is copied once
    into the temporary directory, readable by all."""
    if os.geteuid() != 0 or str(bindir).startswith("/usr/"):
        return bindir
    name = os.environ.get("FLOE_PG_USER", "nobody")
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        return bindir  # PgCluster says what is wrong
    try:
        probe = subprocess.run([str(bindir / "postgres"), "--version"],
                               capture_output=True, user=user.pw_uid, group=user.pw_gid,
                               extra_groups=[], cwd="/")
        if probe.returncode == 0:
            return bindir
    except PermissionError:
        pass
    install = bindir.resolve().parent
    server = (install / "bin" / "postgres").stat()
    tag = hashlib.sha256(f"{install} {server.st_size} {server.st_mtime_ns}".encode())
    tag = tag.hexdigest()[:12]
    copy = Path(tempfile.gettempdir()) / f"floe-postgres-{tag}"
    if not (copy / "bin" / "initdb").exists():
        part = Path(tempfile.mkdtemp(prefix=copy.name + "-", dir=copy.parent))
        shutil.copytree(install, part / "pg", symlinks=True)
        os.chmod(part, 0o755)
        subprocess.run(["chmod", "-R", "a+rX", str(part)], check=True)
        try:
            os.rename(part / "pg", copy)
        except OSError:
            pass  # another test run made it first
        shutil.rmtree(part, ignore_errors=True)
    return copy / "bin"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tmp_root() -> str:
    return os.environ.get("FLOE_PG_TMPDIR", tempfile.gettempdir())


def sweep_leftovers(root: str | None = None) -> list[str]:
    """Stops and removes clusters whose creating process no longer exists.

    Returns the directories removed."""
    removed = []
    for d in glob.glob(os.path.join(root or _tmp_root(), DIR_PREFIX + "*")):
        owner_file = os.path.join(d, OWNER_FILE)
        try:
            owner = int(Path(owner_file).read_text().strip())
        except (OSError, ValueError):
            # Not ours, or half-made: only touch it when it is clearly stale.
            if time.time() - os.path.getmtime(d) < 3600:
                continue
            owner = -1
        if owner > 0 and _pid_alive(owner):
            continue
        pidfile = os.path.join(d, "data", "postmaster.pid")
        try:
            postmaster = int(Path(pidfile).read_text().splitlines()[0])
            if _pid_alive(postmaster):
                os.kill(postmaster, signal.SIGQUIT)  # immediate shutdown
                for _ in range(100):
                    if not _pid_alive(postmaster):
                        break
                    time.sleep(0.05)
        except (OSError, ValueError, IndexError):
            pass
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


class PgCluster:
    """One PostgreSQL server in its own temporary directory."""

    def __init__(self, extra_conf: dict[str, str] | None = None):
        self.bindir = pg_bindir()
        self.extra_conf = extra_conf or {}
        self.base: Path | None = None
        self.port: int | None = None
        self._run_as = None
        if os.geteuid() == 0:
            name = os.environ.get("FLOE_PG_USER", "nobody")
            try:
                self._run_as = pwd.getpwnam(name)
            except KeyError as e:
                raise RuntimeError(
                    f"running as root, PostgreSQL must run as an unprivileged user, "
                    f"but user {name!r} does not exist; set FLOE_PG_USER to one that does"
                ) from e

    @property
    def data_dir(self) -> Path:
        assert self.base is not None
        return self.base / "data"

    @property
    def log_file(self) -> Path:
        assert self.base is not None
        return self.base / "postgres.log"

    @property
    def run_as_uid(self) -> int:
        return self._run_as.pw_uid if self._run_as else os.geteuid()

    def dsn(self, dbname: str = "postgres", **extra: str) -> str:
        parts = {"host": "127.0.0.1", "port": str(self.port), "user": "postgres",
                 "dbname": dbname, **extra}
        return " ".join(f"{k}={v}" for k, v in parts.items())

    def _run(self, args: list[str], check: bool = True, timeout: float = 120):
        kwargs = {}
        if self._run_as is not None:
            kwargs = dict(user=self._run_as.pw_uid, group=self._run_as.pw_gid,
                          extra_groups=[])
        env = dict(os.environ, LC_ALL="C", LANG="C")
        if self._run_as is not None:
            env["HOME"] = str(self.base)
        proc = subprocess.run(args, capture_output=True, text=True, env=env,
                              cwd=self.base, timeout=timeout, **kwargs)
        if check and proc.returncode != 0:
            log = self.log_file.read_text() if self.log_file.exists() else ""
            raise RuntimeError(
                f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n"
                f"{proc.stderr}\n--- server log ---\n{log[-4000:]}"
            )
        return proc

    def start(self) -> "PgCluster":
        sweep_leftovers()
        self.base = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=_tmp_root()))
        (self.base / OWNER_FILE).write_text(str(os.getpid()))
        if self._run_as is not None:
            os.chown(self.base, self._run_as.pw_uid, self._run_as.pw_gid)
        self._run([str(self.bindir / "initdb"), "-D", str(self.data_dir), "-U", "postgres",
                   "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"])
        return self._configure_and_start()

    def start_standby(self, primary: "PgCluster", slot: str) -> "PgCluster":
        """A hot standby of `primary` (pg_basebackup through its physical slot `slot`)
        that keeps failover slots in step (sync_replication_slots, from PostgreSQL
        17), started on a port of its own."""
        sweep_leftovers()
        self.base = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=_tmp_root()))
        (self.base / OWNER_FILE).write_text(str(os.getpid()))
        if self._run_as is not None:
            os.chown(self.base, self._run_as.pw_uid, self._run_as.pw_gid)
        self._run([str(client_tool("pg_basebackup")), "-h", "127.0.0.1", "-p", str(primary.port), "-U",
                   "postgres", "-D", str(self.data_dir), "-X", "stream", "-S", slot, "-c", "fast",
                   "--no-sync"])
        (self.data_dir / "standby.signal").touch()
        if self._run_as is not None:
            os.chown(self.data_dir / "standby.signal", self._run_as.pw_uid,
                     self._run_as.pw_gid)
        self.extra_conf = {
            "primary_conninfo": f"'host=127.0.0.1 port={primary.port} user=postgres "
                                "dbname=postgres'",
            "primary_slot_name": f"'{slot}'",
            "hot_standby_feedback": "on",
            **({"sync_replication_slots": "on"} if pg_version() >= 17 else {}),
            **self.extra_conf,
        }
        return self._configure_and_start()

    def restart_stopped(self) -> None:
        """Starts a server stop() stopped, on its port."""
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-l",
                   str(self.log_file), "-w", "-t", "60", "start"])

    def promote(self) -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-w", "-t",
                   "60", "promote"])

    def _configure_and_start(self) -> "PgCluster":
        last_error = None
        for _ in range(5):
            self.port = _free_port()
            conf = {
                "listen_addresses": "'127.0.0.1'",
                "port": str(self.port),
                "unix_socket_directories": f"'{self.base}'",
                "wal_level": "logical",
                "max_replication_slots": "32",
                "max_wal_senders": "32",
                "max_connections": "100",
                "shared_buffers": "128MB",
                "fsync": "off",
                "full_page_writes": "off",
                "timezone": "'UTC'",
                **self.extra_conf,
            }
            with open(self.data_dir / "postgresql.auto.conf", "w") as f:
                for k, v in conf.items():
                    f.write(f"{k} = {v}\n")
            proc = self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data_dir),
                              "-l", str(self.log_file), "-w", "-t", "60", "start"],
                             check=False)
            if proc.returncode == 0:
                return self
            last_error = proc.stderr + (self.log_file.read_text()
                                        if self.log_file.exists() else "")
            if "could not bind" not in last_error and "in use" not in last_error:
                break
        self.destroy()
        raise RuntimeError(f"PostgreSQL did not start:\n{last_error}")

    def stop(self, mode: str = "fast") -> None:
        if self.base is None or not (self.data_dir / "postmaster.pid").exists():
            return
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-m", mode,
                   "-w", "-t", "60", "stop"], check=False)

    def restart(self) -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data_dir),
                   "-l", str(self.log_file), "-w", "-t", "60", "restart"])

    def destroy(self) -> None:
        """Stops the server (immediately) and deletes its directory."""
        if self.base is None:
            return
        try:
            self.stop(mode="immediate")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None

    def drop_database(self, name: str, timeout: float = 30) -> None:
        """Drops a database and its replication slots. A slot still active (the
        walsender of a floe just killed has not exited yet, slower on a loaded machine)
        blocks DROP DATABASE, and a slot left behind makes every later test's slot of the
        same name fail ("was not created in this database"): end its walsender first."""
        import psycopg  # the tests' dependency; pgcluster itself runs without it
        with psycopg.connect(self.dsn(), autocommit=True) as admin:
            deadline = time.monotonic() + timeout
            while True:
                slots = admin.execute(
                    "SELECT slot_name, active_pid FROM pg_replication_slots "
                    "WHERE database = %s", (name,)).fetchall()
                if not slots:
                    break
                for slot, pid in slots:
                    try:
                        if pid is not None:
                            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                        else:
                            admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                    except psycopg.errors.ObjectInUse:
                        pass  # became active again in between: next round
                if time.monotonic() > deadline:
                    raise AssertionError(f"slots of {name} still there after {timeout}s: "
                                         f"{slots}")
                time.sleep(0.1)
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def __enter__(self) -> "PgCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.destroy()


def contrib_or_skip(db, sql: str, what: str, params=None) -> None:
    """Runs `sql` (CREATE EXTENSION, a slot of a contrib plugin) on `db`, skipping the
    test when this PostgreSQL build lacks the contrib module `what` (pgserver's 16
    ships neither pg_walinspect nor test_decoding)."""
    import psycopg
    import pytest

    try:
        db.execute(sql, params)
    except (psycopg.errors.FeatureNotSupported, psycopg.errors.UndefinedFile) as e:
        pytest.skip(f"this PostgreSQL build has no {what} (contrib): {e}".splitlines()[0])

