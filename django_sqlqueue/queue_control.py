"""Moved to :mod:`django_sqlqueue.queues.control`; this path stays for code written against it
(docs/limits.md). The old name is the new module itself, not a copy of its names: a monkeypatch
or ``mock.patch`` through either path changes the same object."""

import sys

from .queues import control as _module

sys.modules[__name__] = _module
