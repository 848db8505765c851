"""System checks (``manage.py check``): settings and database support."""

import difflib
import pkgutil
from importlib import import_module

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router

from .db import ops


@checks.register(checks.Tags.compatibility)
def check_settings(app_configs=None, **kwargs):
    from .conf import get_settings

    try:
        get_settings()
    except ImproperlyConfigured as exc:
        # One line that names the key and what to change: the message says both.
        return [checks.Error(str(exc), id="sqlqueue.E001")]
    return []


@checks.register(checks.Tags.compatibility)
def check_setting_name(app_configs=None, **kwargs):
    """A misspelt ``SQLQUEUE`` (``SQL_QUEUE``, ``SQLQUEUES``...) would be ignored in silence."""
    near = near_misses(dir(settings))
    return [checks.Warning(
        f"settings.{name} is not read by django-sqlqueue: did you mean SQLQUEUE?",
        hint=f"Rename {name} to SQLQUEUE.", id="sqlqueue.W003",
    ) for name in near]


def near_misses(names) -> list:
    """The setting names among ``names`` that look like ``SQLQUEUE`` but are not it."""
    found = []
    for name in names:
        if name == "SQLQUEUE" or not name.isupper():
            continue
        squeezed = name.replace("_", "")
        # Its letters in order (SQL_QUEUE, SQLQUEUES, DJANGO_SQLQUEUE), or a typo after "SQLQ"
        # (SQLQEUE); not any other queue's setting (SQS_QUEUE, RQ_QUEUES).
        if "SQLQUE" in squeezed or (squeezed.startswith("SQLQ") and difflib.SequenceMatcher(
                None, squeezed, "SQLQUEUE").ratio() >= 0.85):
            found.append(name)
    return sorted(found)


def database_problem(alias: str) -> str | None:
    """Why the database ``alias`` cannot hold the jobs table, or None if it can: its driver's
    rules (``db/``). The claim is one UPDATE ... RETURNING (with FOR UPDATE SKIP LOCKED on
    PostgreSQL); on MariaDB a SELECT ... FOR UPDATE SKIP LOCKED (10.6+) and an UPDATE in one
    transaction."""
    return ops(connections[alias]).problem()


DATABASE_HINT = ("Keep the jobs table on PostgreSQL, on SQLite 3.35 or newer, or on MariaDB 10.6 "
                 "or newer.")


@checks.register(checks.Tags.database)
def check_database(app_configs=None, databases=None, **kwargs):
    """The jobs database must be one the claim query runs on."""
    from .models import Job

    alias = router.db_for_write(Job)
    if databases is None or alias not in databases:
        return []
    problem = database_problem(alias)
    if problem is None:
        return []
    return [
        checks.Error(
            f"the jobs database {alias!r} cannot run django-sqlqueue: {problem}.",
            hint=DATABASE_HINT,
            id="sqlqueue.E002",
        )
    ]


def migrations_problem(alias: str) -> str | None:
    """What ``alias`` lacks of this app's migrations, as one line naming ``manage.py migrate``;
    None if every one is applied. Reads Django's migration table (absent: nothing applied).

    The names of this app's migration files, listed without importing them, against the rows
    of that table: every worker start and health probe asks, and loading every app's migration
    graph (Django's ``MigrationExecutor``) took a tenth of a worker's start-up. (This app has no
    squashed migrations; one would have to count as applied when all it replaces are.)"""
    from django.db.migrations.loader import MigrationLoader
    from django.db.migrations.recorder import MigrationRecorder

    app = "django_sqlqueue"
    module_name, _ = MigrationLoader.migrations_module(app)
    if module_name is None:  # MIGRATION_MODULES turned them off: the tables come from syncdb
        return None
    files = sorted(name for _, name, is_package in
                   pkgutil.iter_modules(import_module(module_name).__path__)
                   if not is_package and not name.startswith("_"))
    recorder = MigrationRecorder(connections[alias])
    applied = ({name for label, name in recorder.applied_migrations() if label == app}
               if recorder.has_table() else set())
    missing = [name for name in files if name not in applied]
    if not missing:
        return None
    which = missing[0] if len(missing) == 1 else f"{missing[0]} to {missing[-1]}"
    option = "" if alias == "default" else f" --database {alias}"
    return (f"the jobs database {alias!r} lacks {len(missing)} of django_sqlqueue's migrations "
            f"({which}): run `python manage.py migrate{option}` first.")


@checks.register(checks.Tags.database, deploy=True)
def check_migrations(app_configs=None, databases=None, **kwargs):
    """The jobs database has this app's tables: ``check --deploy --database default``. A
    deployment check, as ``migrate`` runs the database checks (not those) before it migrates:
    it would tell everyone who runs it to run it."""
    from .models import Job

    alias = router.db_for_write(Job)
    if databases is None or alias not in databases:
        return []
    problem = migrations_problem(alias)
    return [] if problem is None else [checks.Warning(problem, id="sqlqueue.W002")]


@checks.register(checks.Tags.compatibility)
def check_database_options(app_configs=None, **kwargs):
    """The jobs database's settings have the options we recommend for it (SQLite's WAL, timeout
    and IMMEDIATE transactions); read from the settings, without connecting."""
    from .models import Job

    alias = router.db_for_write(Job)
    missing = ops(connections[alias]).missing_options()
    if not missing:
        return []
    return [checks.Warning(
        f"the jobs database {alias!r} lacks the recommended OPTIONS {', '.join(missing)}: "
        "without them an enqueue or a claim behind another process's write fails with "
        "'database is locked'.",
        hint=f"Add them to DATABASES[{alias!r}]['OPTIONS'] (docs/getting-started.md#sqlite).",
        id="sqlqueue.W004",
    )]


@checks.register(checks.Tags.compatibility)
def check_listen_database(app_configs=None, **kwargs):
    """Workers behind a transaction pooler need a direct connection to LISTEN on, or they poll."""
    from .conf import get_settings
    from .db import listening
    from .models import Job

    try:
        conf = get_settings()
    except ImproperlyConfigured:
        return []  # sqlqueue.E001 says why
    target = conf.LISTEN_DATABASE
    if target is not None:
        if listening.is_alias(target) and target not in connections:
            return [checks.Error(
                f"SQLQUEUE['LISTEN_DATABASE'] {target!r} is not in settings.DATABASES.",
                hint="Name an alias of DATABASES or give a libpq connection string "
                     "('postgresql://user@host:5432/dbname').",
                id="sqlqueue.E003",
            )]
        return []
    alias = router.db_for_write(Job)
    if (conf.NOTIFY and ops(connections[alias]).supports_notify
            and listening.behind_pooler(alias)):
        return [checks.Warning(
            f"Workers will poll every {conf.POLL_INTERVAL_SECONDS:g}s instead of LISTENing: "
            + listening.polling_reason(alias) + ".",
            hint="Set SQLQUEUE['LISTEN_DATABASE'] to an alias (or connection string) that "
                 "reaches PostgreSQL directly; see docs/scaling.md.",
            id="sqlqueue.W001",
        )]
    return []


@checks.register(checks.Tags.compatibility)
def check_read_database(app_configs=None, **kwargs):
    """SQLQUEUE["READ_DATABASE"] names an alias of DATABASES."""
    from .conf import get_settings

    try:
        target = get_settings().READ_DATABASE
    except ImproperlyConfigured:
        return []  # sqlqueue.E001 says why
    if target is not None and target not in connections:
        return [checks.Error(
            f"SQLQUEUE['READ_DATABASE'] {target!r} is not in settings.DATABASES.",
            hint="Name the alias of a replica of the jobs database (docs/topology.md).",
            id="sqlqueue.E004",
        )]
    return []
