"""The ``--database`` option every command of the app shares: declared once, checked once."""

from django.conf import settings
from django.core.management.base import CommandError
from django.db import router


def add_database_option(parser) -> None:
    parser.add_argument("--database", help="alias of the jobs database (default: router)")


def database_alias(options, model) -> str:
    """The alias ``--database`` names, or the router's choice for writing ``model``; a
    ``CommandError`` naming the aliases there are if it is not in ``settings.DATABASES``."""
    alias = options["database"] or router.db_for_write(model)
    if alias not in settings.DATABASES:
        raise CommandError(f"--database {alias!r} is not in settings.DATABASES (aliases: "
                           f"{', '.join(settings.DATABASES)}).")
    return alias
