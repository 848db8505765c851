"""What the docs say that the code can check: the settings and their defaults, the check ids and
what they name, each command's options, the job statuses and the log events. A change of
default (or a new setting, check, option or status) fails here until the docs follow."""

import ast
import dataclasses
import re
from pathlib import Path

import pytest
from django.core.management import load_command_class

from django_sqlqueue import checks as our_checks
from django_sqlqueue.conf import QueueSettings
from django_sqlqueue.statuses import JobStatus

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "django_sqlqueue"
PAGES = {path: path.read_text() for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]}
API = (ROOT / "docs" / "api.md").read_text()
DEFAULTS = {field.name: field.default for field in dataclasses.fields(QueueSettings)}
SOURCE = "\n".join(path.read_text() for path in PACKAGE.rglob("*.py")
                   if "migrations" not in path.parts)


def table(text, after):
    """The rows (lists of cells) of the first Markdown table after the line ``after``."""
    lines = text.split(after, 1)[1].split("\n\n|", 1)
    body = ("|" + lines[1]).split("\n\n", 1)[0] if len(lines) > 1 else ""
    rows = [line for line in body.splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
            for row in rows]


def literal(cell):
    """A table cell's value: ``5.0``, ``"default"``, ``None``; or the cell itself."""
    first = re.match(r"`([^`]*)`", cell.strip())
    text = first[1] if first else cell.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return cell


SETTINGS_ROWS = table(API, "All settings live in one dict.")


def documented_defaults():
    """(setting, the default its row says): a row may name two settings, ``A`, `B``, with
    ``0.01`, `0.5`` for their defaults."""
    for row in SETTINGS_ROWS:
        names = re.findall(r"`(\w+)`", row[0])
        values = re.findall(r"`([^`]*)`", row[2]) if len(names) > 1 else [row[2]]
        yield from zip(names, (literal(value if len(names) == 1 else f"`{value}`")
                               for value in values), strict=True)


def test_the_settings_table_names_every_setting_and_no_other():
    assert sorted(name for name, _ in documented_defaults()) == sorted(DEFAULTS)


@pytest.mark.parametrize(("name", "default"), list(documented_defaults()))
def test_each_setting_has_its_default_in_the_table(name, default):
    assert default == DEFAULTS[name], f"docs/api.md: {name}'s default is {DEFAULTS[name]!r}"


def mentions_with_defaults():
    """Every ``SQLQUEUE["KEY"]`` of the docs, with the default said beside it, ``(5)``."""
    for path, text in PAGES.items():
        for match in re.finditer(r'SQLQUEUE\[["\'](\w+)["\']\]`?(?:,? \(?([\w.,]+)\)?)?', text):
            yield path.name, match[1], match[2]


def test_every_setting_the_docs_name_exists():
    unknown = {(page, name) for page, name, _ in mentions_with_defaults()
               if name not in DEFAULTS}
    assert unknown == set()


def test_the_defaults_said_beside_a_setting_are_its_defaults():
    wrong = []
    for page, name, said in mentions_with_defaults():
        if name not in DEFAULTS or not said or not re.fullmatch(r"[\d.,]+|none", said):
            continue
        value = None if said == "none" else float(said.replace(",", ""))
        if value != DEFAULTS[name]:
            wrong.append((page, name, said, DEFAULTS[name]))
    assert wrong == []


def check_ids_in_code():
    ids = set(re.findall(r"sqlqueue\.([EW]\d{3})", SOURCE))
    ids |= set(re.findall(r'"([EW]1\d\d)"\)', SOURCE))  # backend_checks' error(..., "E104")
    return {f"sqlqueue.{code}" for code in ids}


def test_every_check_is_documented_and_every_documented_check_exists():
    documented = set()
    for path in (ROOT / "docs" / "api.md", ROOT / "docs" / "django-tasks.md"):
        documented |= set(re.findall(r"^\| `(sqlqueue\.[EW]\d{3})`", path.read_text(), re.M))
    mentioned = {found for text in PAGES.values()
                 for found in re.findall(r"sqlqueue\.[EW]\d{3}", text)}
    assert check_ids_in_code() - documented == set(), "checks missing from the docs' tables"
    assert mentioned - check_ids_in_code() == set(), "checks the code does not have"


def test_the_database_checks_name_the_databases_their_hint_names():
    """E002 and E104 refuse what DATABASE_HINT does not list: their rows name each database."""
    rows = [line for path in ("api.md", "django-tasks.md")
            for line in (ROOT / "docs" / path).read_text().splitlines()
            if line.startswith(("| `sqlqueue.E002`", "| `sqlqueue.E104`"))]
    assert len(rows) == 2
    for database in re.findall(r"(PostgreSQL|SQLite 3\.\d+|MariaDB 10\.\d+)",
                               our_checks.DATABASE_HINT):
        for row in rows:
            assert database.replace(" or newer", "") in row.replace("+", ""), (database, row)


COMMANDS = ["runworker", "purgejobs", "schedules", "queues", "stats"]


def options_of(parser):
    found = set()
    for action in parser._actions:
        found.update(action.option_strings)
        if isinstance(action.choices, dict):  # the subcommands of `queues`
            for subparser in action.choices.values():
                found |= options_of(subparser)
    return found


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_the_docs_give_a_command_exists(command):
    parser = load_command_class("django_sqlqueue", command).create_parser("manage.py", command)
    known = options_of(parser)
    unknown = set()
    for path, text in PAGES.items():
        for match in re.finditer(rf"manage\.py {command}\b([^\n`|]*)", text):
            line = match[1].split("#", 1)[0]
            unknown |= {(path.name, option) for option in re.findall(r"(?<![\w-])--?[a-z][\w-]*",
                                                                     line)
                        if option not in known}
    assert unknown == set()


def test_the_runworker_defaults_in_getting_started_are_its_parsers():
    parser = load_command_class("django_sqlqueue", "runworker").create_parser(
        "manage.py", "runworker")
    defaults = {option: action.default for action in parser._actions
                for option in action.option_strings}
    text = (ROOT / "docs" / "getting-started.md").read_text()
    said = re.findall(r"^\| `(--[\w-]+)[^|]*\|[^|]*\(default (\d+(?:\.\d+)?)", text, re.M)
    assert said, "no default read from the runworker table"
    for option, value in said:
        # None: the option's absence, which the table says in words ("default 1: no supervisor")
        assert defaults[option] is None or float(value) == defaults[option], option


def test_the_statuses_table_has_every_status_and_no_other():
    text = (ROOT / "docs" / "concepts.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \|[^|\n]*\| (?:yes|no) \|$", text, re.M)
    assert sorted(rows) == sorted(JobStatus.values)


def test_every_log_event_is_in_the_table():
    text = (ROOT / "docs" / "observability.md").read_text()
    documented = set()
    for row in table(text, "The events and their keys, which stay stable:"):
        documented |= set(re.findall(r"`([a-z_]+\.[a-z_]+)`", row[0]))
    emitted = set(re.findall(r'fields\(\s*"([a-z_]+\.[a-z_]+)"', SOURCE))
    emitted |= set(re.findall(r'event="([a-z_]+\.[a-z_]+)"', SOURCE))
    assert emitted, "no event read from the code"
    assert emitted - documented == set()
