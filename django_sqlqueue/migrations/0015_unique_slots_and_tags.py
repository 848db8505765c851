"""Unique keys over chosen statuses and a period (``unique_slot``, ``unique_states``), and tags
and metadata on jobs (docs/api.md).

The slot's unique index holds only the jobs that hold their slot (db/job_table.py); MariaDB has
no partial indexes, so there it is a unique index on a generated column, as migration 0012 does
for the unique key (one ALTER TABLE, which rebuilds the table as 0012's did). PostgreSQL gets a
GIN index on tags (db/postgresql/statements.py); SQLite and MariaDB filter by tag without an index. Those
two are SQL that the model state does not hold.

On PostgreSQL every new index is built CONCURRENTLY, so writes go on while it is built
(migration_operations.py), and a build cut short is redone by running the migration again. Not
atomic: PostgreSQL cannot build an index concurrently inside a transaction, and MariaDB refuses
DDL in one.
"""

import django.db.models.expressions
import django.db.models.lookups
from django.db import migrations, models

from django_sqlqueue.db import ops
from django_sqlqueue.db.mariadb import statements as mariadb_statements
from django_sqlqueue.db.postgresql import statements as postgresql
from django_sqlqueue.migration_operations import AddJobConstraint, AddJobIndex


def _on(vendor, statement):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != vendor:
            return
        if vendor == "postgresql":  # a build cut short leaves an invalid index: drop it first
            if ops(schema_editor.connection).index_is_invalid(postgresql.TAGS_INDEX):
                schema_editor.execute(postgresql.drop_tags_index())
        schema_editor.execute(statement())
    return run


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ("django_sqlqueue", "0014_runtime_schedules"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="metadata",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="tags",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="unique_slot",
            field=models.CharField(blank=True, editable=False, max_length=300, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="unique_states",
            field=models.PositiveSmallIntegerField(blank=True, editable=False, null=True),
        ),
        AddJobIndex(
            model_name="job",
            index=models.Index(condition=models.Q(("unique_slot__isnull", False)),
                               fields=["unique_slot"], name="sqlqueue_job_unique_slots"),
        ),
        AddJobConstraint(
            model_name="job",
            constraint=models.UniqueConstraint(
                condition=models.Q(
                    ("unique_slot__isnull", False),
                    django.db.models.lookups.GreaterThan(
                        django.db.models.expressions.CombinedExpression(
                            models.F("unique_states"), "&",
                            models.Case(
                                models.When(status="queued", then=models.Value(1)),
                                models.When(status="running", then=models.Value(2)),
                                models.When(status="failed", then=models.Value(4)),
                                models.When(status="succeeded", then=models.Value(8)),
                                models.When(status="exhausted", then=models.Value(16)),
                                models.When(status="cancelled", then=models.Value(32)),
                                models.When(status="expired", then=models.Value(64)),
                                default=models.Value(0),
                            ),
                        ),
                        0,
                    ),
                ),
                fields=("unique_slot",),
                name="sqlqueue_job_unique_slot",
            ),
        ),
        migrations.RunPython(
            _on("mysql", mariadb_statements.add_held_slot_column),
            _on("mysql", mariadb_statements.drop_held_slot_column),
            elidable=False,
            hints={"model_name": "job"},
        ),
        migrations.RunPython(
            _on("postgresql", postgresql.add_tags_index),
            _on("postgresql", postgresql.drop_tags_index),
            elidable=False,
            hints={"model_name": "job"},
        ),
    ]
