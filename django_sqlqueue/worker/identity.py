"""Which process table a worker lives in, so that a missing pid can be trusted to mean death.

A pid means something only in the pid namespace that gave it out, and only since the machine
booted. Host names prove neither: containers with host networking, or pods given the same
``hostname:``, share one name but each has its own process table, where the other's pid does not
exist. So a worker records the kernel's boot id (``/proc/sys/kernel/random/boot_id``, new at
every boot, the same in every container of one kernel) and the inode of its pid namespace
(``/proc/self/ns/pid``), and another process judges its pid only when both are known and equal
to its own. Anywhere else (macOS, a row without them) death is judged by the heartbeat alone.
"""

import os
from dataclasses import dataclass

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
PID_NAMESPACE_PATH = "/proc/self/ns/pid"


@dataclass(frozen=True)
class ProcessTable:
    """What identifies a process table; None where unknown."""

    boot_id: str | None
    pid_namespace: int | None

    @property
    def known(self) -> bool:
        return self.boot_id is not None and self.pid_namespace is not None

    def same_as(self, boot_id, pid_namespace) -> bool:
        """True only when both are known and equal: the pids of a worker that recorded
        ``boot_id`` and ``pid_namespace`` are then pids of this table."""
        return self.known and (boot_id, pid_namespace) == (self.boot_id, self.pid_namespace)


def current() -> ProcessTable:
    """This process's table (read each time: cheap, and a fork into a new namespace changes it)."""
    try:
        with open(BOOT_ID_PATH) as file:
            boot_id = file.read().strip() or None
    except OSError:
        boot_id = None
    try:
        pid_namespace = os.stat(PID_NAMESPACE_PATH).st_ino
    except OSError:
        pid_namespace = None
    return ProcessTable(boot_id, pid_namespace)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists in this process's pid namespace."""
    if pid <= 0:
        return True  # not one process (0 and -n name process groups): nothing to judge by
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True
