"""Imported by nothing on purpose: a module whose top-level code leaves a trace, so that
test_security.py can tell whether a worker imported it because a job row named it."""

import os

os.environ["SQLQUEUE_IMPORT_SIDE_EFFECT"] = "ran"
VALUE = 1
