"""``runworker --processes P``: P worker processes, each restarted when it crashes or recycles.
With ``--autoscale MIN:MAX`` (a ``scaler``, worker/scaler.py), as many as it decides: more
started at once, one retired at a time by SIGTERM (a graceful stop) and not restarted.

``start_child()`` starts one (a fork or a fresh interpreter, see children.py) and returns it as a
``subprocess.Popen`` or an object that acts like one. Signals are forwarded: the first
SIGTERM/SIGINT asks every child to stop gracefully, a second one kills them.
"""

import signal
import sys
import time

from . import log_format as formats
from .process import RECYCLE_EXIT_CODE


class Supervisor:
    def __init__(self, *, processes: int, start_child, burst: bool, shutdown_timeout: float,
                 start_method: str = "spawn", out=None, idle=time.sleep,
                 on_child_exited=None, log_format: str = "text", scaler=None):
        self.scaler = scaler
        self.processes = scaler.settings.minimum if scaler else processes
        self.start_child = start_child
        self.start_method = start_method  # only said: start_child does it
        self.burst = burst
        self.shutdown_timeout = shutdown_timeout
        self.out = out or sys.stdout
        self.log_format = log_format  # of its lines, as its children's
        self.children: dict = {}  # slot -> Popen or ForkedChild
        self.restarts: dict = {}  # slot -> consecutive crash count
        self.started_at: dict = {}  # slot -> time.monotonic() of its latest start
        self.stopping = False
        self.idle = idle  # idle(seconds) between checks; the metrics endpoint serves then
        self.on_child_exited = on_child_exited or (lambda pid: None)
        self.retiring: set = set()  # slots asked to stop by the scaler: never restarted
        self.measure_failing = False  # the scaler's last look failed (said once)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        if self.scaler:
            s = self.scaler.settings
            self._say(f"supervisor: autoscaling {s.minimum} to {s.maximum} worker processes "
                      f"(target wait {s.target_wait:g}s, cool-down {s.cooldown:g}s, every "
                      f"{self.scaler.interval:g}s; --start-method {self.start_method})",
                      "supervisor.started", processes=self.processes, minimum=s.minimum,
                      maximum=s.maximum, target_wait_seconds=s.target_wait,
                      cooldown_seconds=s.cooldown, start_method=self.start_method)
        else:
            self._say(f"supervisor: starting {self.processes} worker processes "
                      f"(--start-method {self.start_method})", "supervisor.started",
                      processes=self.processes, start_method=self.start_method)
        for slot in range(self.processes):
            self._spawn(slot)
        while self.children:
            self.idle(0.2)
            for slot, child in list(self.children.items()):
                code = child.poll()
                if code is None:
                    continue
                del self.children[slot]
                self.on_child_exited(child.pid)
                self._child_exited(slot, child, code)
            if self.scaler and not self.stopping and self.scaler.due():
                self._autoscale()
        self._say("supervisor: all worker processes have exited", "supervisor.stopped")
        return 0

    def _child_exited(self, slot, child, code):
        if slot in self.retiring:
            self.retiring.discard(slot)
            self._say(f"supervisor: worker pid {child.pid} retired (exit code {code})",
                      "supervisor.child_retired", pid=child.pid, exit_code=code)
            return
        if self.stopping or (code == 0 and self.burst):
            return
        if code == RECYCLE_EXIT_CODE:
            self.restarts[slot] = 0
            self._spawn(slot)
            return
        if time.monotonic() - self.started_at.get(slot, 0) > 60:
            self.restarts[slot] = 0  # it ran fine for a while: not a crash loop
        crashes = self.restarts.get(slot, 0) + 1
        self.restarts[slot] = crashes
        delay = min(0.5 * 2 ** (crashes - 1), 30.0)  # a crash loop must not spin
        self._say(f"supervisor: worker pid {child.pid} exited with {code}; "
                  f"restarting in {delay:g}s", "supervisor.child_exited", level="warning",
                  pid=child.pid, exit_code=code, restart_in_seconds=delay)
        time.sleep(delay)
        if not self.stopping:
            self._spawn(slot)

    def _spawn(self, slot):
        child = self.start_child()
        self.children[slot] = child
        self.started_at[slot] = time.monotonic()
        self._say(f"supervisor: worker {slot + 1}/{self.processes} started, pid {child.pid}",
                  "supervisor.child_started", slot=slot + 1, pid=child.pid)
        if self.stopping:
            # The signal came while this child was starting (a spawned interpreter takes a
            # while), so the stop was sent to the others only: without it, this child would
            # work on and the supervisor wait for it forever.
            child.send_signal(signal.SIGTERM)

    def active(self) -> list:
        """The slots of the children not being retired, in order."""
        return sorted(slot for slot in self.children if slot not in self.retiring)

    def _autoscale(self):
        active = self.active()
        try:
            decision = self.scaler.look(len(active))
        except Exception as exc:  # noqa: BLE001 - a database away: keep the processes as they are
            if not self.measure_failing:  # once per outage, not at every look
                self._say(f"supervisor: autoscale: cannot measure ({type(exc).__name__}: "
                          f"{exc}); keeping {len(active)} process(es) until it can",
                          "supervisor.autoscale_failed", level="warning",
                          error=f"{type(exc).__name__}: {exc}")
            self.measure_failing = True
            return
        if self.measure_failing:
            self.measure_failing = False
            self._say("supervisor: autoscale: measuring again", "supervisor.autoscale_resumed")
        if decision.desired == len(active):
            return
        self.processes = decision.desired
        self._say(f"supervisor: autoscale {len(active)} -> {decision.desired}: "
                  f"{decision.reason}", "supervisor.autoscaled", action=decision.action,
                  processes_before=len(active), processes=decision.desired,
                  reason=decision.reason)
        try:
            self.scaler.keep(len(active), decision)  # the admin dashboard's last changes
        except Exception as exc:  # noqa: BLE001 - not kept: the change happens all the same
            self._say(f"supervisor: autoscale: could not record the change "
                      f"({type(exc).__name__}: {exc})", "supervisor.autoscale_not_recorded",
                      level="warning", error=f"{type(exc).__name__}: {exc}")
        if decision.desired > len(active):
            taken = set(self.children)
            free = (slot for slot in range(len(taken) + decision.desired) if slot not in taken)
            for _ in range(decision.desired - len(active)):
                self._spawn(next(free))
            return
        # Idle processes first (none of its jobs running at the look), then the youngest slots:
        # a busy one would have --shutdown-timeout to finish its jobs, then give them back.
        busy = self.scaler.busy_pids()
        order = sorted(active, key=lambda slot: (self.children[slot].pid in busy, -slot))
        for slot in order[:len(active) - decision.desired]:
            self.retiring.add(slot)
            self.children[slot].send_signal(signal.SIGTERM)

    def _on_signal(self, signum, frame):
        if self.stopping:
            self._say("supervisor: second signal, killing worker processes",
                      "supervisor.killing", level="warning")
            for child in self.children.values():
                child.kill()
            sys.exit(1)
        self.stopping = True
        self._say(f"supervisor: {signal.Signals(signum).name}, stopping worker processes",
                  "supervisor.stopping", signal=signal.Signals(signum).name)
        for child in self.children.values():
            child.send_signal(signal.SIGTERM)

    def _say(self, text, event, *, level="info", **values):
        if self.log_format != "text":
            text = formats.line(self.log_format, event, level=level,
                                logger="django_sqlqueue.worker.supervisor", **values)
        self.out.write(text if text.endswith("\n") else text + "\n")
        self.out.flush()
