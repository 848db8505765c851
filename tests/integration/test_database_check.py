"""The database check (sqlqueue.E002): the jobs database of every pass is accepted; MariaDB
older than 10.6 (no SKIP LOCKED) and MySQL (untested) are refused with the reason."""

from types import SimpleNamespace

import pytest
from django.core.management import call_command

from django_sqlqueue.checks import DATABASE_HINT, _mysql_problem, database_problem


@pytest.mark.django_db
def test_the_jobs_database_of_this_pass_is_accepted(capsys):
    assert database_problem("default") is None
    call_command("check", databases=["default"])  # raises SystemCheckError on an error
    assert "sqlqueue.E002" not in capsys.readouterr().err


@pytest.mark.parametrize("version, mariadb, problem", [
    ((10, 6, 0), True, None),
    ((11, 4, 2), True, None),
    ((10, 5, 27), True, "MariaDB 10.5.27 lacks SELECT ... FOR UPDATE SKIP LOCKED (10.6+)"),
    ((8, 0, 36), False, "MySQL 8.0.36 is not supported (untested: only MariaDB 10.6+ is"),
])
def test_mariadb_before_10_6_and_mysql_are_refused_saying_why(version, mariadb, problem):
    server = SimpleNamespace(mysql_version=version, mysql_is_mariadb=mariadb)
    found = _mysql_problem(server)
    assert found == problem if problem is None else found.startswith(problem)
    assert "MariaDB 10.6" in DATABASE_HINT
