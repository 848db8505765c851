"""The job table's fillfactor (PostgreSQL only): see ``JOB_TABLE_FILLFACTOR`` in
db/postgresql/statements.py.

A storage parameter, as in 0011: SQL run only on PostgreSQL, nothing elsewhere (SQLite has no
fillfactor; InnoDB's is one server setting for index builds, not a table's), and no change to the
model state. ``ALTER TABLE ... SET (fillfactor)`` changes no row and takes a lock that lets reads
and writes go on, so it is instant on a big, busy table; the pages filled after it keep the room.
"""

from django.db import migrations

from django_sqlqueue.db.postgresql import statements


def _on_postgresql(statement):  # as in 0011: a migration keeps what it runs to itself
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(statement())
    return run


class Migration(migrations.Migration):

    dependencies = [
        ("django_sqlqueue", "0023_worker_version"),
    ]

    operations = [
        migrations.RunPython(
            _on_postgresql(statements.job_table_fillfactor),
            _on_postgresql(statements.reset_job_table_fillfactor),
            elidable=False,
            hints={"model_name": "job"},  # only where the job table is (0011 says why)
        ),
    ]
