"""Moved to :mod:`django_sqlqueue.models.job_queryset`; this path stays for code written
against it (docs/api.md). The old name is the new module itself, not a copy of its names: a
monkeypatch or ``mock.patch`` through either path changes the same object."""

import sys

from .models import job_queryset as _module

sys.modules[__name__] = _module
