"""The embedded worker in ``manage.py runserver``, started by the app when it is ready.

With the autoreloader (the default), runserver is two processes: the parent serves nothing and
only starts the child again after each change; the child (``RUN_MAIN=true``) serves and watches
the files. The worker runs in the child only. A code change stops it gracefully (the running
jobs finish, up to the shutdown timeout, or go back) before the child exits, and the new child
starts a new worker with the new code. With ``--noreload`` the one process serves and runs it.

Ctrl-C stops it in the main thread, before the KeyboardInterrupt: at the interpreter's exit it is
too late (Python refuses new threads then, which the stop's database calls may need). With
``--noreload`` the running jobs have the shutdown timeout. With the autoreloader, Ctrl-C reaches
both processes, and the parent kills the child a quarter of a second later (``subprocess.run``
does, on KeyboardInterrupt): the child gives its running jobs back at once, as a shutdown timeout
of 0 does; they run again at the next start, their attempts not counted. (Should the kill come
first, on a loaded machine, their leases bring them back, as after any killed worker.)
"""

import os
import signal
import sys
import threading

#: runserver's child process, the one that serves, has this in its environment (Django's
#: autoreloader sets it).
SERVING_CHILD = ("RUN_MAIN", "true")


def serving(argv=None, environ=None) -> bool:
    """Whether this process is the one ``runserver`` serves from."""
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    if len(argv) < 2 or argv[1] != "runserver":
        return False
    key, value = SERVING_CHILD
    return environ.get(key) == value or "--noreload" in argv


def autostart() -> None:
    """Start the embedded worker if this is runserver's serving process and the setting is on
    (the app's ``ready()`` calls it)."""
    if not serving():
        return
    from django.core.exceptions import ImproperlyConfigured
    from django.utils import autoreload

    from . import options, thread

    try:
        wanted = options.enabled()
    except ImproperlyConfigured:
        return  # runserver's system checks report it (sqlqueue.E001)
    if not wanted:
        return
    worker = thread.start()
    reloading = os.environ.get(SERVING_CHILD[0]) == SERVING_CHILD[1]
    _stop_on_ctrl_c(worker, give_back=reloading)
    if reloading:
        autoreload.file_changed.connect(_stop_before_reload, weak=False)


def _stop_before_reload(sender, file_path, **kwargs):
    """A changed file ends this child: stop the worker first, gracefully. Returns None, so that
    the reload goes on."""
    from . import thread

    thread.stop()


def _stop_on_ctrl_c(worker, *, give_back: bool) -> None:
    """Stop ``worker`` on SIGINT, then raise the KeyboardInterrupt as before (see above)."""
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set a handler; the exit hook stops it then
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):
        return  # ignored, or the system's default (no KeyboardInterrupt): leave it

    def stop_then_interrupt(signum, frame):
        if give_back:
            worker.config.shutdown_timeout = 0
        worker.stop()
        previous(signum, frame)

    signal.signal(signal.SIGINT, stop_then_interrupt)
