"""Moved to :mod:`django_sqlqueue.run.outcomes`; this path stays for code written against it and
for the class path rows record (django_sqlqueue.outcomes.WorkerLost). The old name is the new
module itself, not a copy of its names: a monkeypatch or ``mock.patch`` through either path
changes the same object."""

import sys

from .run import outcomes as _module

sys.modules[__name__] = _module
