"""A throwaway primary and a streaming standby (tests/postgres_cluster.py twice): the failover
tests kill the primary and promote the standby, as a failover manager (Patroni,
pg_auto_failover) or a managed service (RDS Multi-AZ, Cloud SQL HA) does.

- ``Pair(synchronous=True)``: the primary waits, at each commit, for the standby to have the WAL
  on disk (``synchronous_commit = on`` with ``synchronous_standby_names = '*'``): a commit that
  returned is on the standby. ``synchronous=False`` is streaming replication's default: a commit
  returns once it is on the primary's disk, and the standby follows a moment later.
- ``crash()`` SIGKILLs the primary's postmaster and every one of its processes at once, as a
  machine that dies: nothing is flushed or sent after it.
- ``stall_replication()`` holds the primary's WAL sender still, as a slow link would.
- ``promote()`` is ``pg_ctl promote`` on the standby, which then takes writes.
- ``django_database(name)`` is the ``DATABASES`` entry that finds whichever server takes writes:
  libpq's multi-host ``HOST``/``PORT`` lists with ``target_session_attrs=read-write``.

Both servers keep fsync off, as in the rest of the suite: the crash here kills processes, not the
machine, so what the operating system holds survives it either way. What a crash loses is decided
by replication: what the standby had received when the primary died.
"""

import os
import signal
import time
from pathlib import Path

import psycopg

from tests.postgres_cluster import Cluster


class Pair:
    def __init__(self, *, synchronous: bool):
        self.synchronous = synchronous
        settings = {"wal_level": "replica", "max_wal_senders": 4, "wal_sender_timeout": "5s",
                    "synchronous_commit": "on"}
        if synchronous:
            settings["synchronous_standby_names"] = "*"
        self.primary = Cluster(options=settings)
        # The standby starts without synchronous_standby_names: once promoted it has no standby
        # of its own, and a commit would wait for one forever.
        self.standby = Cluster(options={"synchronous_commit": "on", "hot_standby": "on",
                                        "cluster_name": "standby"})
        self.promoted = False

    def start(self, timeout=60):
        self.primary.start()
        self.standby._run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port),
            "-U", self.primary.superuser, "-D", str(self.standby.datadir),
            "-X", "stream", "-R", "--no-sync", "--checkpoint=fast",
        )
        self.standby.start()
        self.wait_streaming(timeout)
        return self

    def wait_streaming(self, timeout=60):
        """Until the primary streams to the standby (and counts it as synchronous, if so)."""
        want = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.connect(self.primary) as conn:
                states = conn.execute(
                    "SELECT state, sync_state FROM pg_stat_replication").fetchall()
            if ("streaming", want) in states:
                return
            time.sleep(0.1)
        raise RuntimeError(f"the standby is not streaming ({want}) after {timeout}s: {states}")

    def connect(self, cluster, dbname="postgres", **kwargs):
        return psycopg.connect(host="127.0.0.1", port=cluster.port, user=cluster.superuser,
                               dbname=dbname, autocommit=True, **kwargs)

    def create_database(self, name):
        with self.connect(self.primary) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def django_database(self, name) -> dict:
        """A ``DATABASES`` entry reaching the writable server of the pair, whichever it is."""
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": self.primary.superuser,
            # libpq tries each host in turn and keeps the first that takes writes: the standby
            # refuses while it is one, and the dead primary refuses at once.
            "HOST": "127.0.0.1,127.0.0.1",
            "PORT": f"{self.primary.port},{self.standby.port}",
            "OPTIONS": {"target_session_attrs": "read-write", "connect_timeout": 3},
            "CONN_MAX_AGE": 600,
            "CONN_HEALTH_CHECKS": True,
        }

    def server_database(self, cluster, name) -> dict:
        """A ``DATABASES`` entry of one server of the pair (the standby: a read replica)."""
        return {**self.django_database(name), "HOST": "127.0.0.1", "PORT": str(cluster.port),
                "OPTIONS": {}}

    def postmaster_pid(self, cluster) -> int:
        return int((cluster.datadir / "postmaster.pid").read_text().split()[0])

    def crash(self):
        """SIGKILL the primary's postmaster and all its children at once. Each child leads a
        session of its own (PostgreSQL calls setsid() in every child), so killing the
        postmaster's process group ends the postmaster alone; the children are found by their
        parent. A child forked after the listing notices its postmaster gone and exits by
        itself; a stopped one (``stall_replication``) never would, and is listed."""
        pid = self.postmaster_pid(self.primary)
        pids = [pid, *_children(pid)]
        for each in pids:
            try:
                os.kill(each, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it ended by itself meanwhile
        deadline = time.monotonic() + 10
        while any(_alive(each) for each in pids) and time.monotonic() < deadline:
            time.sleep(0.01)

    def promote(self):
        self.standby._run("pg_ctl", "promote", "-w", "-t", "60", "-D", str(self.standby.datadir))
        self.promoted = True

    def stall_replication(self):
        """SIGSTOP the primary's WAL sender, as a slow or congested link would hold the WAL back:
        the primary goes on committing (asynchronous replication waits for no standby), and the
        standby gets none of it. (Stopping the standby's receiver instead holds back nothing:
        the sender goes on filling the socket's buffers, megabytes on one machine, which the
        receiver still reads after the crash.) ``crash()`` ends the stalled sender too;
        ``resume_replication()`` lets it go on."""
        with self.connect(self.primary) as conn:
            self._sender = conn.execute("SELECT pid FROM pg_stat_replication").fetchone()[0]
        os.kill(self._sender, signal.SIGSTOP)

    def resume_replication(self):
        os.kill(self._sender, signal.SIGCONT)

    def flush_lag_bytes(self) -> int:
        """WAL bytes the primary has written that the standby has not yet flushed: what a crash
        now would lose, were none of it to reach the standby in the moments left."""
        with self.connect(self.primary) as conn:
            row = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)::bigint "
                "FROM pg_stat_replication").fetchone()
        return row[0] if row else -1

    def destroy(self):
        for cluster in (self.standby, self.primary):
            cluster.destroy()


def _stat(pid) -> list | None:
    """The fields of /proc/<pid>/stat after the command's name (state first, then the parent's
    pid); None once the process is gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _children(parent) -> list:
    return [int(entry.name) for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and (fields := _stat(entry.name)) and int(fields[1]) == parent]


def _alive(pid) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"
