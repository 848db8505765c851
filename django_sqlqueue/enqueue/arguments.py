"""A job's arguments checked against its function's signature at enqueue, so that a job that
could never run is not stored to fail in the worker.

``inspect.Signature.bind`` decides, and words the error. It is also the slowest step of
``prepare()`` (a third of it: ``bind`` builds the whole mapping of names to values, which the
check then throws away), so calls that plainly fit are let through first by a check of their
shape alone (how many positional arguments, which names), made from the signature once
(``_Shape``). It only ever lets through calls that ``bind`` accepts; anything it is unsure of
goes to ``bind``, errors included.
"""

import contextlib
import contextvars
import inspect

from ..exceptions import InvalidArguments

#: 1 while a workflow's step is prepared whose function is given its parents' results as its
#: first argument when it runs (workflows/canvas.py): its arguments are checked with that one.
_given_first = contextvars.ContextVar("sqlqueue_given_first", default=0)


@contextlib.contextmanager
def parent_results_given_first():
    """Within: ``call_arguments`` counts one more first argument, given at run time."""
    token = _given_first.set(1)
    try:
        yield
    finally:
        _given_first.reset(token)


def call_arguments(task_name: str, signature: inspect.Signature | None, args, kwargs) -> None:
    """``args`` and ``kwargs`` bind to the function's ``signature`` (None: unreadable, not
    checked), or :class:`InvalidArguments` says why not."""
    if signature is None:
        return
    given_first = _given_first.get()
    if _shape(signature).fits(given_first + len(args), kwargs):
        return
    try:
        signature.bind(*(None,) * given_first, *args, **kwargs)
    except TypeError as exc:
        raise InvalidArguments(
            f"{task_name}{signature}: {exc}; nothing was enqueued. Pass the arguments the "
            "function takes."
        ) from None


class _Shape:
    """What a call must look like to bind to a signature, in sets and counts."""

    def __init__(self, signature: inspect.Signature):
        kinds = inspect.Parameter
        params = list(signature.parameters.values())
        positional = [p for p in params
                      if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
        self.positional_names = tuple(p.name for p in positional)
        self.takes_more_positional = any(p.kind is kinds.VAR_POSITIONAL for p in params)
        self.takes_any_keyword = any(p.kind is kinds.VAR_KEYWORD for p in params)
        self.keyword_names = frozenset(
            p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY))
        self.positional_only = frozenset(
            p.name for p in params if p.kind is kinds.POSITIONAL_ONLY)
        # Per number of positional arguments given: the parameters still needing a keyword.
        self.required_after = tuple(
            frozenset(p.name for p in positional[count:] if p.default is p.empty)
            | frozenset(p.name for p in params
                        if p.kind is kinds.KEYWORD_ONLY and p.default is p.empty)
            for count in range(len(positional) + 1)
        )

    def fits(self, count: int, kwargs: dict) -> bool:
        """True if a call with ``count`` positional arguments and ``kwargs`` surely binds;
        False if it may not (``bind`` decides)."""
        if count > len(self.positional_names) and not self.takes_more_positional:
            return False
        count = min(count, len(self.positional_names))
        if not kwargs:
            return not self.required_after[count]
        names = kwargs.keys()
        if not names.isdisjoint(self.positional_names[:count]):
            return False  # given twice
        if self.takes_any_keyword:
            if not names.isdisjoint(self.positional_only):
                return False  # a positional-only name as a keyword: bind decides
        elif not names <= self.keyword_names:
            return False
        return self.required_after[count] <= names


#: id(signature) -> (signature, its _Shape). By identity: a signature with an unhashable default
#: (``def f(x=[])``) cannot be a dict key. A task keeps its signature object for its life.
_shapes: dict = {}


def _shape(signature: inspect.Signature) -> _Shape:
    entry = _shapes.get(id(signature))
    if entry is None or entry[0] is not signature:
        if len(_shapes) > 4096:
            _shapes.clear()  # signatures made on the fly: never more than a few tasks' worth
        entry = _shapes[id(signature)] = (signature, _Shape(signature))
    return entry[1]
