"""The Celery application of the Celery drivers (``systems/celery.py``), set up the way Celery's
"First steps with Django" guide does: settings from Django's (namespace ``CELERY_``: only the
broker URL is set, see django_settings.py), tasks found in the installed apps' ``tasks`` modules.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.django_settings")

app = Celery("bench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
