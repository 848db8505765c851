"""Fleets of real ``runworker`` processes that a test SIGKILLs at random (the chaos suite,
tests/chaos, and the django.tasks backend's kill tests, tests/tasks_backend/test_kills.py), and
the random seed such a run prints so that it can be replayed."""

import os
import random
import signal

from django.utils import timezone

from tests.support.waiting import StopWaiting, wait_until


def running_pids() -> set:
    """The pids of the workers running jobs now (a claim's ``claimed_by`` is host:pid:thread)."""
    from django_sqlqueue.models import Job
    from django_sqlqueue.statuses import JobStatus

    holders = Job.objects.filter(status=JobStatus.RUNNING).values_list("claimed_by", flat=True)
    return {int(holder.split(":")[1]) for holder in set(holders)
            if holder and holder.count(":") >= 2 and holder.split(":")[1].isdigit()}


def seed() -> int:
    """Random seed of the run: SQLQUEUE_CHAOS_SEED to replay one, else new each run (printed)."""
    return int(os.environ.get("SQLQUEUE_CHAOS_SEED") or random.SystemRandom().randrange(10**6))


class Fleet:
    """Workers of the given concurrencies; ``kill()`` SIGKILLs one and starts its replacement."""

    def __init__(self, start_worker, concurrencies, *, settings, args=("-q", "default")):
        self._start_worker = start_worker
        self.settings = settings
        self.args = list(args)
        self.killed = {}  # pid -> aware datetime just before its SIGKILL
        self.started = []  # every worker, the killed ones too
        self.unreaped = []  # killed with reap=False: zombies until reap_killed()
        self.workers = [self._start(c) for c in concurrencies]

    def _start(self, concurrency):
        worker = self._start_worker("-c", str(concurrency), *self.args, settings=self.settings)
        worker.concurrency = concurrency
        self.started.append(worker)
        return worker

    def kill(self, rng, *, among=None, reap=True):
        """SIGKILL a worker at random (``among``: of those whose pids are in it; None if none
        is) and start its replacement; returns the victim. ``reap=False``: the victim is left a
        zombie, dead but not waited for, until ``reap_killed()``: its pid still looks alive to
        maintenance's reaper, so nothing it held is rescued by pid until then."""
        if among is None:
            slot = rng.randrange(len(self.workers))
        else:
            slots = [n for n, worker in enumerate(self.workers) if worker.pid in among]
            if not slots:
                return None
            slot = rng.choice(slots)
        victim = self.workers[slot]
        self.killed[victim.pid] = timezone.now()
        os.killpg(victim.pid, signal.SIGKILL)
        if reap:
            victim.proc.wait()  # reap it: a zombie's pid still looks alive to the reaper
        else:
            os.waitid(os.P_PID, victim.pid, os.WEXITED | os.WNOWAIT)  # dead, left unreaped
            self.unreaped.append(victim)
        self.workers[slot] = self._start(victim.concurrency)
        return victim

    def reap_killed(self) -> None:
        """Reap the zombies ``kill(reap=False)`` left: their pids are gone, and maintenance's
        reaper rescues what they held at its next pass."""
        for victim in self.unreaped:
            victim.proc.wait()
        self.unreaped.clear()

    def wait_until(self, condition, *, what, timeout=120, interval=0.2):
        """``wait_until`` that fails at once, with the output, if a worker exits."""

        def check():
            if not self.running():
                raise StopWaiting(f"a worker exited: {self.dead()}")
            return condition()

        return wait_until(check, timeout=timeout, interval=interval, what=what,
                          worker=self.workers[0])

    def running(self) -> bool:
        return all(worker.is_running() for worker in self.workers)

    def dead(self) -> list:
        return [(w.pid, w.proc.returncode, w.output[-2000:]) for w in self.workers
                if not w.is_running()]

    def stop(self, timeout=60) -> list:
        """SIGTERM every worker once it is up (a process still importing Django has no handler
        yet, and would just die); returns their exit codes."""
        for worker in self.workers:
            wait_until(lambda w=worker: "wake-up:" in w.output or not w.is_running(),
                       what="the worker's banner", worker=worker)
            worker.signal(signal.SIGTERM)
        return [worker.wait(timeout=timeout) for worker in self.workers]

    def output(self) -> str:
        return "\n".join(worker.output for worker in self.workers)

    def output_of(self, pid, tail=3000) -> str:
        """The end of the output of the worker with this pid (killed or not), for a failed
        wait's message: what the worker holding a stuck job was doing."""
        for worker in self.started:
            if worker.pid == pid:
                return f"worker {pid} output (its end):\n{worker.output[-tail:]}"
        return f"no worker of this fleet had pid {pid}"
