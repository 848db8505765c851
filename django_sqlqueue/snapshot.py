"""Moved to :mod:`django_sqlqueue.observability.snapshot`; this path stays for code written against
it (docs/observability.md: snapshot.take()). The old name is the new module itself, not a copy
of its names: a monkeypatch or ``mock.patch`` through either path changes the same object."""

import sys

from .observability import snapshot as _module

sys.modules[__name__] = _module
