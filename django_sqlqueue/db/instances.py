"""Model instances without ``Model.__init__``, where that changes nothing but the time taken.

``Model.__init__`` sends ``pre_init`` and ``post_init`` and copies each value onto the instance.
While nothing listens to those signals for the model and no field's attribute has a setter (a
``ForeignKey`` has one), copying the values into the instance's ``__dict__`` makes the same
instance. The worker builds dozens of jobs per claim and ``bulk_enqueue`` thousands per call: for
them, ``__init__`` with its two signal sends cost more than everything else in Python.
"""

import functools
import inspect

from django.db.models import DEFERRED, signals
from django.db.models.base import ModelState


def new_instance(model, attrs: dict, *, db=None, adding=True, direct=None):
    """What ``model(**attrs)`` (``adding``) or ``Model.from_db(db, ...)`` makes; ``attrs`` maps
    every concrete field's attname to its value (one left out is deferred), and may become the
    instance's ``__dict__``: pass a dict of your own. ``direct``: ``builds_directly(model)``,
    checked once by a caller that builds many instances (default: checked here)."""
    if builds_directly(model) if direct is None else direct:
        instance = model.__new__(model)
        instance.__dict__ = attrs  # not copied: one dict fewer per instance
        state = instance._state = ModelState()
    else:
        # A field left out stays deferred, as Model.from_db leaves it.
        instance = model(*[attrs.get(name, DEFERRED) for name in attnames(model)])
        state = instance._state
    state.adding = adding
    state.db = db
    return instance


def builds_directly(model) -> bool:
    """Whether ``new_instance`` may skip ``__init__`` (checked per call: receivers come and go)."""
    if not _plain_attributes(model):
        return False
    if not (signals.pre_init.receivers or signals.post_init.receivers):
        return True  # the usual case, found without looking up receivers by sender
    return not (signals.pre_init.has_listeners(model) or signals.post_init.has_listeners(model))


@functools.cache
def attnames(model) -> tuple:
    return tuple(field.attname for field in model._meta.concrete_fields)


@functools.cache
def _plain_attributes(model) -> bool:
    """True if no concrete field's attribute is a data descriptor (has ``__set__``)."""
    return not any(
        hasattr(type(inspect.getattr_static(model, name, None)), "__set__")
        for name in attnames(model)
    )
