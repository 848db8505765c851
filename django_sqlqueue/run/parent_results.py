"""A workflow step's parents' results, given to its function as first argument: how
``workflows/canvas.py`` marks a step (``"parent_results": "one"`` or ``"list"`` in its
payload), for both the ``@job`` runner and the ``django.tasks`` backend."""

from asgiref.sync import sync_to_async

from ..exceptions import InvalidJob


def check_given(job, given) -> None:
    """InvalidJob unless ``given`` (a payload's ``"parent_results"``) is "one" or "list"."""
    if given not in ("one", "list"):
        raise InvalidJob(f'job {job.pk} has "parent_results": {given!r}; it must be "one" or '
                         '"list".')


def parent_results_argument(job, given: str):
    """The argument a workflow's step is given: its first parent's result (``"one"``) or the
    list of its parents' results in order (``"list"``); read from the database now."""
    values = job.parent_results()
    return (values[0] if values else None) if given == "one" else values


def with_parent_results(job, function, given: str, *, is_async: bool):
    """``function`` called with its parents' results as first argument: ``"one"``, the first
    parent's; ``"list"``, all of them in order. Read when the attempt starts, so that a
    database error there is the attempt's (an interruption), not the loader's."""
    check_given(job, given)

    def results():
        return parent_results_argument(job, given)

    if is_async:
        async def call_async(*args, **kwargs):
            return await function(await sync_to_async(results)(), *args, **kwargs)
        return call_async

    def call(*args, **kwargs):
        return function(results(), *args, **kwargs)
    return call
