"""What a new user reads first (README, docs/getting-started.md) matches what they can do today:
the install lines work without a package index that has no django-sqlqueue, the tables
``migrate`` makes are counted right, and every ``runworker`` option is in the table."""

import re
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import load_command_class
from django.core.management.base import BaseCommand

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
GETTING_STARTED = (ROOT / "docs" / "getting-started.md").read_text()


@pytest.mark.parametrize("page", [README, GETTING_STARTED], ids=["README", "getting-started"])
def test_install_lines_install_from_a_clone_or_a_wheel_and_say_alpha(page):
    """Not published on PyPI: ``pip install django-sqlqueue`` fails. (Change this test when it
    is published.)"""
    installs = re.findall(r"^pip install (.+?)(?:\s+#.*)?$", page, flags=re.MULTILINE)
    assert installs, "no install line"
    for target in installs:
        assert re.match(r'"?(-e "?/path/to/django-sqlqueue|dist/django_sqlqueue-.*\.whl)',
                        target), target
    assert "not on PyPI yet" in page or "not published on PyPI yet" in page
    assert "alpha" in page


def test_getting_started_counts_the_tables_migrate_makes():
    tables = sorted(model._meta.db_table
                    for model in apps.get_app_config("django_sqlqueue").get_models()
                    if model._meta.managed and not model._meta.proxy)
    count = re.search(r"`migrate` creates (\w+) tables: (.*?) A worker", GETTING_STARTED,
                      flags=re.DOTALL)
    assert count and int(count.group(1)) == len(tables), tables
    assert sorted(re.findall(r"`(django_sqlqueue_\w+)`", count.group(2))) == tables


def test_getting_started_lists_every_runworker_option():
    parser = load_command_class("django_sqlqueue", "runworker").create_parser(
        "manage.py", "runworker")
    ours = {option for action in parser._actions for option in action.option_strings
            if action.container is parser._optionals and action.help != "==SUPPRESS=="
            and option.startswith("--")}
    django_own = {option for action in BaseCommand().create_parser("manage.py", "x")._actions
                  for option in action.option_strings}  # --verbosity, --settings...
    table = GETTING_STARTED.split("`runworker` options:", 1)[1].split("\n\n", 2)[1]
    documented = set(re.findall(r"^\| `(--[\w-]+)", table, flags=re.MULTILINE))
    assert ours - django_own - documented == set()
