"""The job table's autovacuum settings (PostgreSQL only): see db/postgresql.py's
job_table_storage_parameters.

Django's models cannot express storage parameters, so this is SQL, run only on PostgreSQL; on
other databases both directions do nothing, and the model state is unchanged (makemigrations
sees no difference).
"""

from django.db import migrations

from django_sqlqueue.db.postgresql import (
    job_table_storage_parameters,
    reset_job_table_storage_parameters,
)


def _on_postgresql(statement):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(statement())
    return run


class Migration(migrations.Migration):

    dependencies = [
        ("django_sqlqueue", "0010_queue_limits"),
    ]

    operations = [
        migrations.RunPython(
            _on_postgresql(job_table_storage_parameters),
            _on_postgresql(reset_job_table_storage_parameters),
            elidable=False,
            # Only where the job table is: routers decide per model (a jobs database of its
            # own, docs/scaling.md), and a database without the table must skip this.
            hints={"model_name": "job"},
        ),
    ]
