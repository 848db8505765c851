class OrdersOnOther:
    """ExternalOrder lives in the "other" database; everything else in "default". Nothing in
    "jobs": the tests that route the queue there (JobsDatabaseRouter) create its tables."""

    def _alias(self, model):
        return "other" if model._meta.model_name == "externalorder" else "default"

    def db_for_read(self, model, **hints):
        return self._alias(model)

    def db_for_write(self, model, **hints):
        return self._alias(model)

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        if db == "jobs":
            return False
        if model_name is None:
            return None
        return db == ("other" if model_name == "externalorder" else "default")


# The router of docs/scaling.md ("A jobs database of its own"), word for word.
class JobsDatabaseRouter:
    """django-sqlqueue's tables (jobs, workers, schedules) in the "jobs" database; nothing
    else there."""

    def db_for_read(self, model, **hints):
        return "jobs" if model._meta.app_label == "django_sqlqueue" else None

    def db_for_write(self, model, **hints):
        return "jobs" if model._meta.app_label == "django_sqlqueue" else None

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        if app_label == "django_sqlqueue":
            return db == "jobs"
        return False if db == "jobs" else None


class QueueAlsoOnBulkJobs:
    """A second primary, "bulk_jobs", holding django-sqlqueue's tables and nothing else (the
    queues routed to databases of docs/topology.md): ``migrate --database bulk_jobs`` creates
    them there; jobs get there by ``using="bulk_jobs"``."""

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        if db == "bulk_jobs":
            return app_label == "django_sqlqueue"
        return None
