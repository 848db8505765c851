"""Migration operations of our own, for a job table that is big and busy when it is migrated.

A plain ``CREATE INDEX`` takes a lock that blocks every write to the table while it reads the
whole table (a partial index too: every row is checked against its condition). On a job table of
millions of finished rows that stops enqueues, claims and outcome writes for as long as the build
takes. ``AddJobIndex`` builds the index ``CONCURRENTLY`` on PostgreSQL instead: writes go on,
at the cost of two passes over the table and a wait for transactions already running.
"""

from django.db import migrations

from .db import ops


class _Concurrently:
    """What AddJobIndex and AddJobConstraint share: on a driver that
    ``builds_indexes_concurrently``, the index ``index_name`` is built by ``build`` (an
    invalid leftover of an interrupted build dropped first) and dropped by ``drop``; elsewhere
    the Django operation runs as it is."""

    index_name = ""

    def build(self, schema_editor, model):
        raise NotImplementedError

    def drop(self, schema_editor, model):
        raise NotImplementedError

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not ops(schema_editor.connection).builds_indexes_concurrently:
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return None
        if ops(schema_editor.connection).index_is_invalid(self.index_name):
            self.drop(schema_editor, model)
        self.build(schema_editor, model)
        return None

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if not ops(schema_editor.connection).builds_indexes_concurrently:
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return None
        self.drop(schema_editor, model)
        return None

    def describe(self):
        return f"{super().describe()} (concurrently on PostgreSQL)"


class AddJobIndex(_Concurrently, migrations.AddIndex):
    """``AddIndex`` that builds (and, reversed, drops) the index ``CONCURRENTLY`` on PostgreSQL,
    and as ``AddIndex`` does elsewhere. The migration must be ``atomic = False``: PostgreSQL
    cannot build an index concurrently inside a transaction.

    A concurrent build that was interrupted (a cancelled statement, a lost connection) leaves an
    invalid index behind under the same name; the build first drops such a leftover, so running
    the migration again is enough. The model state is ``AddIndex``'s: makemigrations sees no
    difference.
    """

    @property
    def index_name(self):
        return self.index.name

    def build(self, schema_editor, model):
        schema_editor.add_index(model, self.index, concurrently=True)

    def drop(self, schema_editor, model):
        schema_editor.remove_index(model, self.index, concurrently=True)


class AddJobConstraint(_Concurrently, migrations.AddConstraint):
    """``AddConstraint`` of a partial unique constraint (an index, on PostgreSQL) that builds
    (and, reversed, drops) its index ``CONCURRENTLY`` on PostgreSQL, as ``AddJobIndex`` does;
    as ``AddConstraint`` elsewhere. The migration must be ``atomic = False``. The model state is
    ``AddConstraint``'s."""

    @property
    def index_name(self):
        return self.constraint.name

    def build(self, schema_editor, model):
        # Django has no concurrent form of a unique index: its own statement, made concurrent.
        create = str(self.constraint.create_sql(model, schema_editor))
        prefix = "CREATE UNIQUE INDEX "
        if not create.startswith(prefix):  # only a partial unique constraint is an index
            raise ValueError(f"AddJobConstraint builds unique indexes, not: {create}")
        schema_editor.execute(prefix + "CONCURRENTLY " + create.removeprefix(prefix), params=None)

    def drop(self, schema_editor, model):
        name = schema_editor.quote_name(self.constraint.name)
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}", params=None)

