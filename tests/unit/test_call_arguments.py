"""The enqueue's check of a job's arguments against its function (enqueue/arguments.py) accepts
exactly the calls that ``inspect.Signature.bind`` accepts, whatever the signature: its quick
check of the call's shape never lets through a call that could not run."""

import contextlib
import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_sqlqueue.enqueue import arguments
from django_sqlqueue.exceptions import InvalidArguments

P = inspect.Parameter
NAMES = ["a", "b", "c", "d"]


@st.composite
def signatures(draw):
    """A signature of up to four named parameters of any kinds (in the order Python allows),
    some with defaults, maybe with *args and **kwargs."""
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    kinds = sorted(draw(st.lists(st.sampled_from(
        [P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY]),
        min_size=len(names), max_size=len(names))))
    params, defaulted = [], False
    for name, kind in zip(names, kinds, strict=True):
        # After a defaulted positional parameter, the next positional ones need defaults too.
        default = [] if (kind is not P.KEYWORD_ONLY and defaulted) or draw(st.booleans()) else (
            P.empty)
        defaulted = defaulted or (default is not P.empty and kind is not P.KEYWORD_ONLY)
        params.append(P(name, kind, default=default))
    if draw(st.booleans()):  # *args goes before the keyword-only ones
        at = next((n for n, p in enumerate(params) if p.kind is P.KEYWORD_ONLY), len(params))
        params.insert(at, P("args", P.VAR_POSITIONAL))
    if draw(st.booleans()):
        params.append(P("kwargs", P.VAR_KEYWORD))
    return inspect.Signature(params)


calls = st.tuples(st.integers(0, 5), st.lists(st.sampled_from([*NAMES, "e"]), unique=True))


def binds(signature, args, kwargs) -> bool:
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(signatures(), calls, st.booleans())
def test_a_call_is_accepted_exactly_when_it_binds(signature, call, parents_given_first):
    count, names = call
    args, kwargs = tuple(range(count)), dict.fromkeys(names, 0)
    given_first = (None,) if parents_given_first else ()
    expected = binds(signature, given_first + args, kwargs)
    with (arguments.parent_results_given_first() if parents_given_first
          else contextlib.nullcontext()):
        if expected:
            arguments.call_arguments("t", signature, args, kwargs)
        else:
            with pytest.raises(InvalidArguments, match="nothing was enqueued"):
                arguments.call_arguments("t", signature, args, kwargs)
    if arguments._shape(signature).fits(len(given_first) + count, kwargs):
        assert expected, (signature, given_first + args, kwargs)


def _f(a, b=1, /, c=2, *, d, **kw): ...
def _g(a, b=1, *args, c): ...
def _h(a, /, b): ...


@pytest.mark.parametrize("func, args, kwargs", [
    (_h, (1,), {"b": 2}),  # fits
    (_h, (1, 2), {"b": 2}),  # b given twice
    (_h, (), {"a": 1, "b": 2}),  # a is positional-only
    (_h, (1,), {}),  # b missing
    (_h, (1,), {"b": 2, "x": 3}),  # x unknown
    (_f, (1,), {"d": 4, "a": 9}),  # a positional-only, so "a" goes into **kw
    (_f, (1, 2, 3), {"d": 4, "c": 5}),  # c given twice
    (_f, (1,), {}),  # d missing
    (_g, (1, 2, 3, 4), {"c": 5}),  # fits, *args takes the rest
    (_g, (1,), {"a": 1, "c": 5}),  # a given twice
], ids=lambda value: repr(value) if not callable(value) else value.__name__)
def test_the_edges_of_a_call_are_judged_as_bind_judges_them(func, args, kwargs):
    signature = inspect.signature(func)
    if binds(signature, args, kwargs):
        arguments.call_arguments("t", signature, args, kwargs)
    else:
        with pytest.raises(InvalidArguments):
            arguments.call_arguments("t", signature, args, kwargs)
    if arguments._shape(signature).fits(len(args), kwargs):
        assert binds(signature, args, kwargs)
