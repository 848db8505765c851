"""The opening of a script for ``python -c`` that runs as if a package were not installed: an
import hook refuses it, Django is set up, then every module of django_sqlqueue is imported (the
optional-dependency tests go on from there)."""

PREAMBLE = """
import importlib, pkgutil, sys

HIDDEN = {hidden!r}
TASKS_BACKEND = ("django_sqlqueue.backend", "django_sqlqueue.backend_checks")

class Hidden:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}} (hidden by the test)")

sys.meta_path.insert(0, Hidden())
for name in [m for m in sys.modules if m.split(".")[0] in HIDDEN]:
    del sys.modules[name]

import django
django.setup()
import django_sqlqueue

def import_all(path, prefix):
    for module in pkgutil.iter_modules(path, prefix):
        if module.name in TASKS_BACKEND and django.VERSION < (6, 0):
            continue  # django.tasks is Django 6's
        if module.name == "django_sqlqueue.admin":
            continue  # needs django.contrib.admin; scripts/check_install.sh serves it
        imported = importlib.import_module(module.name)
        if module.ispkg:
            import_all(imported.__path__, module.name + ".")

import_all(django_sqlqueue.__path__, "django_sqlqueue.")
"""


def without(*packages: str) -> str:
    """The preamble for a script that runs without ``packages`` (top-level names)."""
    return PREAMBLE.format(hidden=tuple(packages))
