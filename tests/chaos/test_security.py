"""Scenario 8, security, on both vendors: only registered tasks execute, payloads are JSON only,
admin actions need their permissions, and no SQL is built by string formatting with user data."""

import ast
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest
from django.db import connection, models
from django.urls import reverse

import django_sqlqueue
import tests.admin.conftest  # noqa: F401 - switches the admin on, as for tests/admin
from django_sqlqueue.enqueue import notify
from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import call_task
from django_sqlqueue.statuses import JobStatus
from tests.admin.users import make_staff
from tests.factories import JobFactory
from tests.testapp.models import Run

PACKAGE = Path(django_sqlqueue.__file__).parent
SOURCES = {str(path.relative_to(PACKAGE)): ast.parse(path.read_text())
           for path in sorted(PACKAGE.rglob("*.py")) if "migrations" not in path.parts}

# ---- only registered tasks execute -----------------------------------------------------------
#: Rows naming callables that would do harm, each with arguments that would create MARKER.
DANGEROUS = [
    ("os.system", ["touch MARKER"]),
    ("posix.system", ["touch MARKER"]),
    ("subprocess.run", [["touch", "MARKER"]]),
    ("builtins.eval", ["__import__('pathlib').Path('MARKER').touch()"]),
    ("builtins.exec", ["__import__('pathlib').Path('MARKER').touch()"]),
    ("pathlib.Path.touch", ["MARKER"]),
    ("django_sqlqueue.run.execution.run_job", []),
    ("django.tasks:os.system", ["touch MARKER"]),  # the django.tasks backend's naming
]


@pytest.mark.django_db(transaction=True)
def test_a_row_naming_anything_but_a_registered_task_runs_nothing(start_worker, tmp_path,
                                                                  reliability):
    marker = str(tmp_path / "pwned")
    rows = [Job.objects.create(  # as a plain SQL INSERT would: no enqueue validation
        task_name=name, max_attempts=1,
        payload={"args": [[a.replace("MARKER", marker) for a in arg] if isinstance(arg, list)
                          else arg.replace("MARKER", marker) for arg in args]},
    ) for name, args in DANGEROUS]
    # A task no worker knows is given back (a newer worker may know it: run/unknown.py) until
    # UNKNOWN_TASK_MAX_SECONDS has passed, an hour by default: a fraction of a second here.
    worker = start_worker("--burst", "-c", "2", settings={"POLL_INTERVAL_SECONDS": 0.2,
                                                          "UNKNOWN_TASK_DELAY_SECONDS": 0.1,
                                                          "UNKNOWN_TASK_MAX_SECONDS": 0.3})
    assert worker.wait() == 0, worker.output
    for job in Job.objects.filter(pk__in=[row.pk for row in rows]):
        assert job.status == JobStatus.EXHAUSTED and job.result is None, (job.task_name, job.errors)
        assert job.errors[-1]["message"], job.task_name
    assert not Path(marker).exists() and not Run.objects.exists()
    reliability("security", dangerous_task_names=len(DANGEROUS), executed=0,
                sql_call_sites=len(_sql_calls()), sql_assembly_sites=len(_sql_assemblies()))


@pytest.mark.django_db
@pytest.mark.skipif(importlib.util.find_spec("django.tasks") is None,
                    reason="django.tasks needs Django 6")
def test_a_django_tasks_row_cannot_make_the_worker_import_a_module(monkeypatch):
    monkeypatch.delenv("SQLQUEUE_IMPORT_SIDE_EFFECT", raising=False)
    monkeypatch.delitem(sys.modules, "tests.chaos.import_side_effect", raising=False)
    Job.objects.create(task_name="django.tasks:tests.chaos.import_side_effect.VALUE",
                       max_attempts=1)
    (claimed,) = Job.objects.claim(None, "security-test")
    # refused (given back for a worker that may know it, or failed)...
    assert call_task(claimed).kind in ("failed", "aborted", "rescheduled")
    assert "SQLQUEUE_IMPORT_SIDE_EFFECT" not in os.environ, "the module's code ran"


# ---- payloads are JSON only ------------------------------------------------------------------
#: Modules that turn bytes into code or arbitrary objects. None of them may appear.
DESERIALISERS = {"pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle",
                 "yaml"}
#: Builtins that run code given as a string; none may be called.
BUILTIN_LOADERS = {"eval", "exec", "compile", "__import__"}
#: Functions that import code named by a string, and the only places allowed to call them.
# Each a settings value, never a path read from a row: this app's migrations package
# (MIGRATION_MODULES, else its own), the backoff function (OPTIONS["BACKOFF"]).
CODE_LOADERS = {"import_module": {"checks.py"},
                "import_string": {"backend.py", "backend_checks.py"}}


def _called_name(node):
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


@pytest.mark.django_db
def test_payloads_are_json_and_nothing_loads_code_from_a_row():
    assert isinstance(Job._meta.get_field("payload"), models.JSONField)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT data_type FROM information_schema.columns WHERE table_name = "
                           "'django_sqlqueue_job' AND column_name = 'payload'")
            assert cursor.fetchone()[0] == "jsonb"
    found = []
    for path, tree in SOURCES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [alias.name for alias in node.names] + [getattr(node, "module", "") or ""]
                found += [(path, n) for n in names if n.split(".")[0] in DESERIALISERS]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id in BUILTIN_LOADERS
            ):
                found.append((path, node.func.id, node.lineno))
            elif isinstance(node, ast.Call) and _called_name(node) in CODE_LOADERS:
                if path not in CODE_LOADERS[_called_name(node)]:
                    found.append((path, _called_name(node), node.lineno))
    assert not found, found


# ---- no SQL built from user data -------------------------------------------------------------
#: SQL text: starts with a statement keyword, or has a WHERE clause (messages that merely name
#: SQL features, like "LISTEN/NOTIFY" or "UPDATE ... RETURNING", are not statements).
SQL_TEXT = re.compile(
    r"^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|WITH|LISTEN|NOTIFY|EXPLAIN)\s|\sWHERE\s"
)
#: The only modules that assemble SQL text, and the only names the pieces may come from. Each was
#: read: quoted identifiers (``quote(...)``, ``table``, ``col``...), ``%s`` placeholders
#: (``values``), SQL compiled by Django's ORM with its params kept apart (``picked_ids_sql``,
#: ``sql``), and the LISTEN channel constant. A new entry needs the same review.
SQL_ASSEMBLY = {
    "sql.py": {"quote", "field", "table", "assignments", "attempts", "pk", "picked_ids_sql",
               "columns", "col", "values", "model", "lock", "queue", "statuses",
               # Session 5: the database's clock (now_sql's SQL text), the claim's assignments,
               # the set-based rescue (status constants, column names, SQL fragments of them).
               "now", "shift", "clock", "sets", "running", "later", "workers", "worker_name",
               "picked_sql", "failed", "exhausted", "errors", "left_over", "returning", "same",
               "message", "entry", "at",
               # the INSERT of new jobs (moved from inserting.py): names and column types
               "names", "sql_type", "position", "channel", "query_sql", "rows", "insert",
               "select", "clock_from", "succeeded", "local",
               # Issue 16, the claim of limited queues: a quoted column and the status column
               # (column, status), the text of a probe or a part built of those (probe, text),
               # and the part's number in a UNION ALL (an int from enumerate).
               "column", "status", "probe", "text", "number",
               # the first probe's condition: "IS NOT NULL" or "> ''" (constants of sql.py),
               # ORDER BY of quoted columns (order), a key's range of quoted columns (key_range)
               "first", "order", "key_range",
               # issue 17: the throughput rollup's upsert and the sampled status counts
               "key", "count", "upsert", "run_at",
               # Cancelling running jobs (issue 16): a status constant, CASE fragments of
               # column names and status constants.
               "cancelled", "given_up",
               # Issue 18, the bounded claim (ready_ids_after): ready_ids's own text cut at its
               # ORDER BY (head, tail) and the two index ranges built of it and quoted columns.
               "head", "tail", "lower",
               # Issue 19, MariaDB: "`is_ready` = 1 AND " or "" (ready).
               "ready",
               # Issue 25, interruptions: the rescue's condition of quoted columns (again,
               # _runs_again), status constants (JobStatus.X.value) and the message's constant
               # endings (statuses.INTERRUPTION_RUNS_AGAIN, INTERRUPTION_FINAL).
               "again", "_runs_again", "JobStatus", "INTERRUPTION_RUNS_AGAIN",
               "INTERRUPTION_FINAL"},
    # Issue 19, MariaDB's statements: quoted names (table, pk, col, column, workers,
    # worker_name, columns), the clock's SQL text (now, later), assignments of those and of
    # status constants (sets, returned), the ORM's compiled picked ids (picked_ids_sql), %s
    # placeholders (values; _ids(count), count an int), and a statement's head built of those
    # in the same module (prefix).
    # The INSERT of new jobs on MariaDB (insert_jobs): quoted column names (names, and len of
    # them for _ids), the SELECT list of %s placeholders and document columns named by their
    # position (select), and JSON_TABLE's column definitions: position, a type constant of
    # inserting._document_type, a path of the position (document).
    "sql_mariadb.py": {"table", "pk", "col", "column", "workers", "worker_name", "columns",
                       "now", "later", "sets", "returned", "running", "picked_ids_sql",
                       "values", "_ids", "count", "prefix", "names", "len", "select",
                       "document"},
    # Quoted column names, %s placeholders and column types from Field.db_type (session 2).
}
# Issue 33: sql.py's statements became the methods of the drivers in db/, sql_mariadb.py
# db/mariadb/statements.py. The same names, and: ``self``, the driver's own methods, which return
# SQL text of the same kinds (the clock, the ready condition, the lock clause, SET lists);
# ``value`` and ``job``, how a statement names an outcome's value columns ("v.status",
# "v.column3") and the job's row ("job." or the quoted table); ``again``, a condition of quoted
# columns; ``READY_LIST`` and ``JobStatus``, status constants.
_DRIVERS = SQL_ASSEMBLY.pop("sql.py") | {"self", "value", "job", "again", "READY_LIST",
                                         "JobStatus",
                                         # The limited claim's reads by key (keyed_reads.py): a
                                         # part's number in a UNION ALL (an int from range).
                                         "n",
                                         # Issue 30: the tags index's name, a constant.
                                         "TAGS_INDEX",
                                         # The limited claim's lock_queue: the Queue row's
                                         # quoted columns, joined (its part after RETURNING).
                                         "returned"}
# Issue 39: each database's driver is a package, its class in driver.py and its own SQL text in
# statements.py (SQLite's: its clock, with ``zone`` and ``shift`` as ``local`` and the shift
# were; the write lock's and the tag look-up's quoted names, ``table``, ``pk``, ``column``).
SQL_ASSEMBLY.update({f"db/{name}.py": _DRIVERS
                     for name in ("base", "writes", "pieces", "keyed_reads", "postgresql/driver",
                                  "postgresql/statements", "sqlite/driver", "sqlite/statements",
                                  "mariadb/driver")})
SQL_ASSEMBLY["db/sqlite/statements.py"] = _DRIVERS | {"zone"}
SQL_ASSEMBLY["db/mariadb/statements.py"] = SQL_ASSEMBLY.pop("sql_mariadb.py")
# Issue 30, fairness: MariaDB's ready_keys (now in db/mariadb/driver.py): the quoted table and
# columns (table, col), the driver's ready_prefix (quoted names), the key column (key, quoted)
# and its test (test: "> %s", "> ''" or "IS NOT NULL").
SQL_ASSEMBLY["db/mariadb/driver.py"] = _DRIVERS | {"ready_prefix", "test"}
# Issue 41, the prune's one statement on PostgreSQL (delete_jobs): the dependents' quoted table
# and column names (other, column), their CTE's number (an int of enumerate), those CTEs joined
# (deletes), and the condition of among_picked, of the quoted pk and the ORM's compiled pick
# (picked).
SQL_ASSEMBLY["db/postgresql/statements.py"] = _DRIVERS | {"other", "number", "deletes", "picked"}
# Issue 41, tablehealth: advice shown to the operator, never run: it names the statement that
# ends a session (a holder's pid, gid or thread id, as the database reported it).
SQL_ASSEMBLY["observability/table_health.py"] = {"holder"}


def _pieces(node):
    """(constant text, interpolated expressions) of an f-string, ``+``/``%`` or ``.format``."""
    if isinstance(node, ast.JoinedStr):
        return ("".join(v.value for v in node.values if isinstance(v, ast.Constant)),
                [v.value for v in node.values if isinstance(v, ast.FormattedValue)])
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        sides = [node.left, node.right]
        text = [s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)]
        return "".join(text), [s for s in sides if not isinstance(s, ast.Constant)]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format" and isinstance(node.func.value, ast.Constant)):
        return str(node.func.value.value), [*node.args, *(k.value for k in node.keywords)]
    return "", []


def _names(expressions) -> set:
    return {n.id for e in expressions for n in ast.walk(e) if isinstance(n, ast.Name)}


def _sql_assemblies(sources=SOURCES):
    """Every place SQL text is assembled from pieces: (path, line, names used)."""
    found = []
    for path, tree in sources.items():
        for node in ast.walk(tree):
            text, pieces = _pieces(node)
            if pieces and SQL_TEXT.search(text):
                found.append((path, node.lineno, _names(pieces)))
    return found


def _sql_calls(sources=SOURCES):
    return [(path, node) for path, tree in sources.items() for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and _called_name(node) in {"execute", "executemany", "raw", "extra", "RawSQL"}]


def test_sql_text_is_assembled_only_from_reviewed_names():
    unreviewed = [(path, line, sorted(names - SQL_ASSEMBLY.get(path, set())))
                  for path, line, names in _sql_assemblies()
                  if not names <= SQL_ASSEMBLY.get(path, set())]
    assert not unreviewed, f"SQL built from unreviewed values (path, line, names): {unreviewed}"
    # The names put in LISTEN's text.
    assert re.fullmatch(r"[a-z_]+", notify.CHANNEL)
    assert re.fullmatch(r"[a-z_]+", notify.CANCEL_CHANNEL)


def _unparameterised(sources=SOURCES):
    problems = []
    for path, call in _sql_calls(sources):
        statement = call.args[0] if call.args else None
        has_params = len(call.args) >= 2 or any(k.arg == "params" for k in call.keywords)
        if isinstance(statement, ast.Constant):
            if "%s" in statement.value and not has_params:
                problems.append((path, call.lineno, "placeholders without parameters"))
        elif not has_params and not _is_listen(statement):
            problems.append((path, call.lineno, "SQL text from a variable, without parameters"))
    return problems


def _is_listen(statement) -> bool:
    """``statements.listen(channel)``: LISTEN takes no parameter, and its one name is one of our
    constants (the workers' wake-up and cancel channels, the waiters' FINISHED_CHANNEL), passed
    to the PostgreSQL driver's ``listen`` (``channel``), whose text checks it is a plain name."""
    return (isinstance(statement, ast.Call) and _called_name(statement) == "listen"
            and _names(statement.args) <= {"CHANNEL", "CANCEL_CHANNEL", "FINISHED_CHANNEL",
                                           "channel"})


def test_every_statement_passes_its_values_as_parameters():
    assert _sql_calls() and not _unparameterised()


def test_the_scan_catches_sql_built_from_user_data():
    bad = {"models.py": ast.parse(
        "cursor.execute(f\"SELECT * FROM job WHERE queue = '{queue}'\")\n"
        "cursor.execute('DELETE FROM job WHERE id = ' + job_id)\n"
        "Job.objects.raw(\"UPDATE job SET status = '%s'\" % status)\n"
        "Job.objects.extra(where=['queue = {}'.format(queue)])\n"
        "cursor.execute(statement)\n"
    )}
    assert [line for _, line, _ in _sql_assemblies(bad)] == [1, 2, 3]
    assert [line for _, line, _ in _unparameterised(bad)] == [1, 2, 3, 4, 5]


# ---- admin actions need their permissions ----------------------------------------------------
ACTIONS = {"retry_now": "retry_job", "run_now": "run_job_now", "cancel": "cancel_job",
           "delete_selected": "delete_job"}


@pytest.mark.django_db
def test_admin_actions_need_their_permission_on_every_path(client):
    """A staff user with every permission but one cannot run that action, from the list or from
    the job's page; a user who is not staff can run none, whatever permissions they hold."""
    job = JobFactory(failed=True, scheduled=True)  # every action applies to it
    before = Job.objects.filter(pk=job.pk).values().get()
    changelist = reverse("admin:django_sqlqueue_job_changelist")
    everything = {"view_job", *ACTIONS.values()}
    users = [make_staff(f"all-but-{p}", *(everything - {p})) for p in ACTIONS.values()]
    outsider = make_staff("not-staff", *everything)
    outsider.is_staff = False
    outsider.save()
    for action, user in [*zip(ACTIONS, users, strict=True), *((a, outsider) for a in ACTIONS)]:
        client.force_login(user)
        listed = client.post(changelist, {"action": action, "_selected_action": [job.pk],
                                          "post": "yes"})
        assert listed.status_code in (200, 302)
        if action != "delete_selected":
            page = client.post(reverse("admin:django_sqlqueue_job_act", args=[job.pk, action]))
            if user is outsider:  # sent to the admin's login page
                assert page.status_code == 302, (action, page.status_code)
                assert page["Location"].startswith(reverse("admin:login")), page["Location"]
            else:  # a staff user without the permission: refused
                assert page.status_code == 403, (action, user.username, page.status_code)
        assert Job.objects.filter(pk=job.pk).values().get() == before, (action, user.username)
