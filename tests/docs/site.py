"""Runs one page's snippets in order, as a reader would, in the fresh site of
tests/docs/settings.py. Sybil finds the blocks (fenced ``python``, ``bash``, ``sh`` and
``console`` blocks, ``<!-- invisible-code-block: python -->`` set-up a page keeps out of sight,
and ``<!-- skip: next "reason" -->`` markers); the evaluators here run them:

- A Python block headed ``# shop/tasks.py`` (any ``path.py``) is that file: it is written into
  the site and imported as its module (``shop.tasks``), and its public names join the page's
  namespace, as the reader's shell would import them. ``# shop/models.py`` also creates the
  tables of its models (and drops those of the page before).
- A block headed ``# settings.py``, or made only of UPPERCASE assignments, is settings: each
  name is applied to the site for the rest of the page (``override_settings``), then Django's
  checks must pass; ``INSTALLED_APPS`` must name apps the site has (``...`` stands for the rest);
  ``DATABASES`` entries on SQLite are opened with their options, others must name an importable
  engine.
- Any other Python block runs in the page's namespace, which is the module ``shop.tasks``
  would be (``@job`` there registers ``shop.tasks.<name>``); top-level ``await`` works.
- A shell block runs each command: ``python manage.py X ...`` as ``call_command`` in this site
  (``runworker`` with ``--burst`` added, and in one process where it says ``--processes``), its
  output through the filter after a ``|`` (``jq``, ``grep``); ``python -c`` and
  ``bash scripts/docs.sh`` (with this environment's packages, into a temporary directory) as
  subprocesses. Anything else is an error: mark the block.
"""

import ast
import asyncio
import contextlib
import importlib
import inspect
import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
import types
from pathlib import Path

from django.apps import apps
from django.conf import global_settings, settings
from django.core import checks
from django.core.management import call_command
from django.db import connection
from django.db.utils import ConnectionHandler
from django.test.utils import override_settings
from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from django_sqlqueue.enqueue import registered as registry
from django_sqlqueue.schedules import declare
from django_sqlqueue.waiting import listener

ROOT = Path(__file__).resolve().parents[2]
FILE_HEADER = re.compile(r"#\s+([\w/]+\.py)\b")
SETTING_NAME = re.compile(r"[A-Z][A-Z0-9_]*$")
OWN_SETTINGS = {"SQLQUEUE", "TASKS"}  # ours and Django 6's, absent from global_settings before


class SnippetError(AssertionError):
    """A snippet did not run as the page says."""


def counts_as_a_setting(name):
    return SETTING_NAME.match(name) and (hasattr(global_settings, name) or name in OWN_SETTINGS)


class Page:
    """One page's run: its namespace, and what it changed in the site, undone by ``close()``."""

    def __init__(self, path: Path):
        self.path = path
        self.overrides = []
        self.written = {}  # site file -> its text before the page, or None
        self.tasks = dict(registry._tasks)
        self.declared = dict(declare._declared)
        self.modules = set(sys.modules)

    def adopt(self, namespace):
        """What a page's plain blocks run in: the module ``shop/tasks.py`` would be; the module
        ``shop.tasks`` finds their names (a worker runs a ``django.tasks`` task only from a
        module imported at start-up, looked up by name)."""
        namespace.update({"__name__": "shop.tasks", "__package__": "shop"})
        self.page_namespace = namespace
        self.install(PageModule("shop.tasks"))

    def install(self, module):
        module.page_namespace = self.page_namespace
        module.__package__ = "shop"
        sys.modules["shop.tasks"] = module
        importlib.import_module("shop").tasks = module

    # Python ---------------------------------------------------------------------------------

    def python(self, example):
        source = str(example.parsed)
        first = source.lstrip().splitlines()[0] if source.strip() else ""
        header = FILE_HEADER.match(first)
        if header and header[1] == "settings.py" or self.only_settings(source):
            return self.apply_settings(example, source)
        if header:
            return self.module_file(example, header[1], source)
        namespace = example.namespace
        before = {name: namespace.get(name) for name in namespace if SETTING_NAME.match(name)}
        self.run(example, source, namespace)
        changed = {name: value for name, value in namespace.items()
                   if counts_as_a_setting(name) and before.get(name, object()) is not value}
        if changed:
            self.override(changed)

    @staticmethod
    def only_settings(source):
        body = ast.parse(source).body
        return bool(body) and all(
            isinstance(node, ast.Assign) and all(isinstance(target, ast.Name)
                                                 and counts_as_a_setting(target.id)
                                                 for target in node.targets)
            for node in body)

    def run(self, example, source, namespace):
        padded = "\n" * example.line + source
        code = compile(padded, str(self.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)  # noqa: S307 - the docs' own code
        if inspect.CO_COROUTINE & code.co_flags:
            asyncio.run(result)

    def module_file(self, example, relative, source):
        name = relative.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        file = Path(settings.BASE_DIR) / relative
        for parent in list(file.relative_to(settings.BASE_DIR).parents)[:-1]:
            init = Path(settings.BASE_DIR) / parent / "__init__.py"
            if not init.exists():
                self.write(init, "")
        self.write(file, source)
        package = name.rpartition(".")[0]
        if package:
            importlib.import_module(package)
        models = name.endswith(".models") and package in {c.name for c in apps.get_app_configs()}
        if models:
            self.drop_models(package)
        if name == "shop.tasks":
            module = PageModule(name)
            self.install(module)
        else:
            module = types.ModuleType(name)
            sys.modules[name] = module
            if package:
                setattr(sys.modules[package], name.rpartition(".")[2], module)
        module.__file__, module.__package__ = str(file), package
        self.run(example, source, module.__dict__)
        if models:
            self.create_models(package)
        example.namespace.update({key: value for key, value in vars(module).items()
                                  if not key.startswith("_")})

    def write(self, file: Path, text: str):
        if file not in self.written:
            self.written[file] = file.read_text() if file.exists() else None
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)

    # Models ---------------------------------------------------------------------------------

    @staticmethod
    def drop_models(label):
        models = list(apps.all_models[label].values())
        with connection.schema_editor() as editor:
            tables = connection.introspection.table_names()
            for model in reversed(models):
                if model._meta.db_table in tables:
                    editor.delete_model(model)
        apps.all_models[label].clear()
        apps.get_app_config(label).models = apps.all_models[label]
        apps.clear_cache()

    @staticmethod
    def create_models(label):
        apps.clear_cache()
        with connection.schema_editor() as editor:
            for model in apps.get_app_config(label).get_models():
                editor.create_model(model)

    # Settings -------------------------------------------------------------------------------

    def apply_settings(self, example, source):
        namespace = {"BASE_DIR": Path(tempfile.mkdtemp(prefix="docs-settings-"))}
        self.run(example, source, namespace)
        values = {name: value for name, value in namespace.items()
                  if SETTING_NAME.match(name) and name != "BASE_DIR"}
        if "INSTALLED_APPS" in values:
            missing = [app for app in values.pop("INSTALLED_APPS") if app is not Ellipsis
                       and app not in settings.INSTALLED_APPS]
            if missing:
                raise SnippetError(f"the page installs {missing}, which the site lacks")
        if "DATABASES" in values:
            self.open_databases(values.pop("DATABASES"), namespace["BASE_DIR"])
        if values:
            self.override(values)

    def override(self, values):
        override = override_settings(**values)
        override.enable()
        self.overrides.append(override)
        errors = [message for message in checks.run_checks(include_deployment_checks=False)
                  if message.level >= checks.ERROR and not message.is_silenced()]
        if errors:
            raise SnippetError("the page's settings fail Django's checks:\n"
                               + "\n".join(str(error) for error in errors))

    @staticmethod
    def open_databases(databases, base_dir):
        for alias, config in databases.items():
            if config == {...}:  # `{"default": {...}}`: the reader's own, left out
                continue
            engine = config["ENGINE"]
            if not engine.endswith("sqlite3"):
                importlib.import_module(engine)  # a misspelt backend fails here
                continue
            handler = ConnectionHandler({alias: {**config, "NAME": base_dir / "db.sqlite3"}})
            try:
                with handler[alias].cursor() as cursor:
                    cursor.execute("SELECT 1")
            finally:
                handler.close_all()

    # Shell ----------------------------------------------------------------------------------

    def shell(self, example):
        source = str(example.parsed)
        if example.region.lexemes.get("arguments") == "console":
            lines = [line[2:] for line in source.splitlines() if line.startswith("$ ")]
        else:
            lines = source.replace("\\\n", " ").splitlines()
        for line in lines:
            words = shlex.split(line, comments=True)
            if words:
                self.command(words)

    def command(self, words):
        if "|" in words:  # `manage.py stats --json | jq ...`: the output goes through a filter
            at = words.index("|")
            output = self.command(words[:at])
            result = subprocess.run(words[at + 1:], input=output, capture_output=True, text=True,
                                    timeout=60)
            if result.returncode:
                raise SnippetError(f"{shlex.join(words[at + 1:])} exited with {result.returncode}"
                                   f" on:\n{output}\n{result.stderr}")
            return result.stdout
        env = {}
        while words and re.match(r"\w+=", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        if words[:2] == ["python", "manage.py"]:
            with patched_environ(env):
                return self.manage(words[2:])
        if words[:2] == ["bash", "scripts/docs.sh"]:  # the site, built by this environment
            with tempfile.TemporaryDirectory() as site:
                return self.subprocess(words, {**env, "SQLQUEUE_DOCS_PYTHON": sys.executable,
                                               "SQLQUEUE_DOCS_SITE": site}, timeout=300)
        if words[:2] == ["python", "-c"]:
            return self.subprocess([sys.executable, *words[1:]], env)
        raise SnippetError(f"cannot run {shlex.join(words)!r} here: put a "
                           "<!-- skip: next \"why\" --> marker before the block")

    @staticmethod
    def subprocess(words, env, timeout=60):
        result = subprocess.run(words, env={**os.environ, **env}, cwd=ROOT, capture_output=True,
                                text=True, timeout=timeout)
        if result.returncode:
            raise SnippetError(f"{shlex.join(words)} failed:\n{result.stdout}{result.stderr}")
        return result.stdout

    @staticmethod
    def manage(arguments):
        name, *arguments = arguments
        if name == "runworker":
            arguments = one_process(arguments)
            if "--burst" not in arguments:
                arguments.append("--burst")
        out, err = io.StringIO(), io.StringIO()
        try:
            call_command(name, *arguments, stdout=out, stderr=err)
        except SystemExit as exit:
            if exit.code:
                raise SnippetError(f"manage.py {name} exited with {exit.code}:\n"
                                   f"{out.getvalue()}{err.getvalue()}") from None
        return out.getvalue()

    # End ------------------------------------------------------------------------------------

    def close(self):
        listener.stop_all()  # a page's waits on PostgreSQL LISTEN on a connection of their own
        for override in reversed(self.overrides):
            override.disable()
        if apps.all_models["shop"]:
            self.drop_models("shop")
        for file, text in self.written.items():
            if text is None:
                file.unlink()
            else:
                file.write_text(text)
        sys.modules.pop("shop.tasks", None)
        site = str(settings.BASE_DIR)
        for name in set(sys.modules) - self.modules:  # the page's own files, not libraries
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(site):
                del sys.modules[name]
        for name, module in list(sys.modules.items()):  # written over what was there before
            if str(getattr(module, "__file__", None) or "").startswith(site) and \
                    Path(module.__file__) in self.written:
                del sys.modules[name]
        registry._tasks.clear()
        registry._tasks.update(self.tasks)
        declare._declared.clear()
        declare._declared.update(self.declared)


class PageModule(types.ModuleType):
    """``shop.tasks`` during a page: its own names, then the page's."""

    def __getattr__(self, name):
        try:
            return self.__dict__["page_namespace"][name]
        except KeyError:
            raise AttributeError(name) from None


def one_process(arguments):
    """runworker's options without ``--processes N`` and ``--autoscale MIN:MAX``, checked first:
    the supervisor would start interpreters of this test run."""
    from django.core.management import load_command_class

    parser = load_command_class("django_sqlqueue", "runworker").create_parser(
        "manage.py", "runworker")
    parser.parse_args(arguments)  # a wrong option fails here, as it would for the reader
    kept, skip = [], False
    for word in arguments:
        if skip:
            skip = False
        elif word in ("--processes", "-p", "--autoscale"):
            skip = True
        elif not word.startswith(("--processes=", "--autoscale=")):
            kept.append(word)
    return kept


@contextlib.contextmanager
def patched_environ(values):
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


CURRENT = {}  # the page being run, for the evaluators


def evaluate_python(example):
    CURRENT["page"].python(example)


def evaluate_shell(example):
    CURRENT["page"].shell(example)


SYBIL = Sybil(parsers=[
    CodeBlockParser("python", evaluate_python),
    *(CodeBlockParser(language, evaluate_shell) for language in ("bash", "sh", "console")),
    SkipParser(),
])
