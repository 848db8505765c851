"""Jobs' status changes outside their run's outcome, and what each does to the jobs that wait
for them: ``changes.py`` (expire, rescue, cancel, retry now), ``settle.py`` (the release or
cancel of a workflow's children when a parent ends), ``deleted.py`` (the children of a parent
deleted before it finished). Below the models: ``JobQuerySet``, the outcome writer and the
maintenance steps call them with the job model (a queryset, or the model itself); they never
import the models.
"""
