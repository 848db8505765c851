"""Shared set-up of the Django-based drivers."""

import os
import subprocess
import sys

from ..processes import ROOT


def setup_django(system: str, dsn: str) -> None:
    os.environ["BENCH_SYSTEM"] = system
    os.environ["BENCH_DSN"] = dsn
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.django_settings"
    import django

    django.setup()


def env(system: str, dsn: str) -> dict:
    return {
        "BENCH_SYSTEM": system,
        "BENCH_DSN": dsn,
        "DJANGO_SETTINGS_MODULE": "benchmarks.django_settings",
        "PYTHONPATH": str(ROOT),
    }


def manage(system: str, dsn: str, *args) -> None:
    """Run a management command in a fresh interpreter (migrations print a lot)."""
    subprocess.run(
        [sys.executable, "-m", "django", *args], env={**os.environ, **env(system, dsn)},
        cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
    )


def manage_argv(*args) -> list:
    return [sys.executable, "-m", "django", *args]
