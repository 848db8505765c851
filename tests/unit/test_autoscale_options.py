"""``runworker --autoscale MIN:MAX`` is checked at the boundary: a clear error naming the fix,
before anything starts."""

import pytest
from django.core.management import CommandError, call_command

from django_sqlqueue.worker.config import WorkerConfig


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--autoscale", "4"], "--autoscale takes MIN:MAX, two whole numbers of processes (for "
                               "example --autoscale 1:4), not '4'."),
        (["--autoscale", "a:b"], "--autoscale takes MIN:MAX"),
        (["--autoscale", "0:4"], "--autoscale 0:4: MIN must be at least 1 (scaling to zero is "
                                 "a platform's job, see docs/autoscaling.md)"),
        (["--autoscale", "5:2"], "and at most MAX"),
        (["--autoscale", "1:1000"], "and MAX at most 256"),
        (["--autoscale", "1:4", "--processes", "2"],
         "--autoscale sets the number of processes: leave out --processes"),
        (["--autoscale", "1:4", "--burst"], "--autoscale cannot be combined with --burst"),
    ],
)
def test_bad_autoscale_options_get_a_clear_error(args, message):
    with pytest.raises(CommandError) as error:
        call_command("runworker", *args, verbosity=0)
    assert message in str(error.value)


def test_a_good_range_is_parsed_and_a_supervised_child_ignores_it():
    config = WorkerConfig(autoscale=" 2:6 ")
    assert (config.autoscale_range, config.processes) == ((2, 6), 1)
    child = WorkerConfig(autoscale="2:6", processes=1, supervised=True)
    assert child.autoscale_range is None
