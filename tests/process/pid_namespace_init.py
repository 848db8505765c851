"""The init process of a throwaway pid namespace, for tests/process/test_pid_namespaces.py.

    unshare --pid --fork --kill-child python -m tests.process.pid_namespace_init SKIP -- CMD...

Runs as pid 1 of the new namespace: first uses up SKIP pids (forks children that exit at once),
so that the command gets a pid no process has in another such namespace, then runs the command
as its child, passes SIGTERM and SIGINT on to it, reaps orphans (an init's duty), and exits with
the command's exit code. As two containers sharing a host name (Docker host networking, pods with
a fixed ``hostname:``), each with its own process table.
"""

import os
import signal
import sys


def main():
    skip = int(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1:]
    for _ in range(skip):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    child = os.fork()
    if child == 0:
        os.execvp(command[0], command)

    def forward(signum, frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        pid, status = os.wait()  # any child: orphans are re-parented to pid 1
        if pid == child:
            sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
