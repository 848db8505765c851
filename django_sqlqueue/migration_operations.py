"""Migration operations of our own, for a job table that is big and busy when it is migrated.

A plain ``CREATE INDEX`` takes a lock that blocks every write to the table while it reads the
whole table (a partial index too: every row is checked against its condition). On a job table of
millions of finished rows that stops enqueues, claims and outcome writes for as long as the build
takes. ``AddJobIndex`` builds the index ``CONCURRENTLY`` on PostgreSQL instead: writes go on,
at the cost of two passes over the table and a wait for transactions already running.
"""

from django.db import migrations

from .db import ops
from .db.postgresql import INDEX_IS_INVALID


class AddJobIndex(migrations.AddIndex):
    """``AddIndex`` that builds (and, reversed, drops) the index ``CONCURRENTLY`` on PostgreSQL,
    and as ``AddIndex`` does elsewhere. The migration must be ``atomic = False``: PostgreSQL
    cannot build an index concurrently inside a transaction.

    A concurrent build that was interrupted (a cancelled statement, a lost connection) leaves an
    invalid index behind under the same name; the build first drops such a leftover, so running
    the migration again is enough. The model state is ``AddIndex``'s: makemigrations sees no
    difference.
    """

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not ops(schema_editor.connection).builds_indexes_concurrently:
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return None
        if _invalid_index_exists(schema_editor, self.index.name):
            schema_editor.remove_index(model, self.index, concurrently=True)
        schema_editor.add_index(model, self.index, concurrently=True)
        return None

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if not ops(schema_editor.connection).builds_indexes_concurrently:
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return None
        schema_editor.remove_index(model, self.index, concurrently=True)
        return None

    def describe(self):
        return f"{super().describe()} (concurrently on PostgreSQL)"


def _invalid_index_exists(schema_editor, name: str) -> bool:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(INDEX_IS_INVALID, [schema_editor.quote_name(name)])
        row = cursor.fetchone()
    return bool(row and row[0])
