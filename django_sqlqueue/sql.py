"""The SQL text migration 0011 runs; the statements themselves now live in the drivers of
``db/`` (``db.ops(connection)``). This path stays for that migration, which never changes."""

from .db.postgresql import job_table_storage_parameters, reset_job_table_storage_parameters

__all__ = ["job_table_storage_parameters", "reset_job_table_storage_parameters"]
