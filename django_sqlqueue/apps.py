from django.apps import AppConfig


class SQLQueueConfig(AppConfig):
    name = "django_sqlqueue"
    verbose_name = "SQL queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.core.exceptions import ImproperlyConfigured
        from django.utils.module_loading import autodiscover_modules

        from . import checks  # noqa: F401 - registers the system checks
        from .conf import QueueSettings, get_settings

        try:
            modules = get_settings().TASK_MODULES
        except ImproperlyConfigured:
            # Start anyway, so that `manage.py check` can report sqlqueue.E001 with its hint.
            modules = QueueSettings.TASK_MODULES
        # Import every installed app's tasks.py / jobs.py, so their @job functions are registered
        # in web processes and workers alike.
        autodiscover_modules(*modules)
        # SQLQUEUE["EMBEDDED_WORKER"] in runserver's serving process (embedded/runserver.py).
        from .embedded.runserver import autostart

        autostart()
