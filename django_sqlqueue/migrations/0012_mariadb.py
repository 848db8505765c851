"""MariaDB's stand-ins for the job table's partial indexes and partial unique constraint
(db/mariadb_statements.py says how): generated columns, and the ready indexes and the unique
key's index on them. Only on MariaDB; on other databases both directions do nothing and the
model state is unchanged (makemigrations sees no difference).

MariaDB's DDL is not transactional: each direction is one ALTER TABLE, which MariaDB applies
whole or not at all, so a run that fails leaves the table as it was and can simply run again.
"""

from django.db import migrations

from django_sqlqueue.db import mariadb_statements


def _on_mariadb(statement):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "mysql":
            schema_editor.execute(statement())
    return run


class Migration(migrations.Migration):

    # DDL inside a transaction is refused on MariaDB (Django: it cannot be rolled back).
    atomic = False

    dependencies = [
        ("django_sqlqueue", "0011_job_table_vacuum"),
    ]

    operations = [
        migrations.RunPython(
            _on_mariadb(mariadb_statements.add_generated_columns),
            _on_mariadb(mariadb_statements.drop_generated_columns),
            elidable=False,
            # Only where the job table is (a jobs database of its own, docs/scaling.md).
            hints={"model_name": "job"},
        ),
    ]
