"""One direction through the package: no import cycles between its modules, and no module imports
one of a layer above its own, counting imports inside functions. The models sit above their
duties: a method of a model, manager or queryset hands its work to its duty (``Job.objects.claim``
to claim/), and the duties take the model from their caller (a queryset, a job, the model
itself) and never import the models. The package never reaches a model through the app
registry to dodge an import (and keeps no thin module at an old path:
tests/unit/test_reexports.py)."""

import ast
from pathlib import Path

import django_sqlqueue

PACKAGE = Path(django_sqlqueue.__file__).parent

#: The package's layers, bottom up: a module imports modules of its own layer and of those
#: below it, never of one above. A module belongs to the entry of the longest prefix that
#: names it ("" is the package's face: ``job``, ``schedule``, ``enqueue_on_commit``...).
LAYERS = (
    ("base", ("conf", "statuses", "exceptions", "context", "signals", "telemetry")),
    ("database", ("db", "migration_operations")),
    ("duties", ("enqueue", "claim", "run", "transitions", "waiting", "ticks")),
    ("models", ("models",)),
    ("domains", ("workflows", "schedules", "queues", "observability")),
    ("front doors", ("registry", "backend", "backend_checks", "checks", "")),
    ("top", ("worker", "admin", "management", "views", "urls", "apps", "embedded")),
)

#: Imports that go up a layer on purpose, each with its reason.
ALLOWED_UPWARD = {
    # The tracer is named with the package's version, which its face holds (pyproject reads it
    # there); the face is imported before any of its modules, so this adds no dependency.
    ("django_sqlqueue.telemetry.tracing", "django_sqlqueue"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set) -> dict:
    """The package's modules that ``path`` imports, anywhere in it: {module: False if some import
    of it is at the top of the module (or of a class), else "method" if every one is inside a
    method's body, else "function"}."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = {}

    def add(module, lazy):
        if module in modules and module != name:
            found[module] = lazy if module not in found else (
                found[module] and lazy and ("function" if "function" in (found[module], lazy)
                                            else "method"))

    def visit(node, lazy):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                add(candidate if candidate in modules else base, lazy)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, lazy)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # "method": a function of a class; "function": any other function's body.
                visit(child, lazy or ("method" if isinstance(node, ast.ClassDef) else "function"))
            else:
                visit(child, lazy)

    visit(ast.parse(path.read_text()), False)
    return found


def cycles(graph: dict) -> list:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return result


def scan():
    """The package's modules (but its migrations), and what each imports (and whether only
    inside functions)."""
    paths = [p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts]
    modules = {module_name(p) for p in paths}
    imports = {module_name(p): imports_of(p, modules) for p in paths}
    assert imports["django_sqlqueue.run.runner"], "the scan found no imports: it is broken"
    return imports


def layer_of(module: str) -> int:
    name = module.removeprefix("django_sqlqueue").removeprefix(".")
    found = [(len(prefix), level) for level, (_, prefixes) in enumerate(LAYERS)
             for prefix in prefixes
             if name == prefix or (prefix and name.startswith(prefix + "."))]
    assert found, f"{module} is in no layer of LAYERS: add it"
    return max(found)[1]


def test_the_package_has_no_import_cycles():
    """None, not even through imports inside functions, but the allowed imports up."""
    imports = scan()
    assert cycles({module: {imported for imported in found
                            if (module, imported) not in ALLOWED_UPWARD}
                   for module, found in imports.items()}) == []


def test_lower_layers_never_import_upper_ones():
    imports = scan()
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {imported} "
        f"({LAYERS[layer_of(imported)][0]}){f' inside a {lazy}' if lazy else ''}"
        for module, found in sorted(imports.items())
        for imported, lazy in sorted(found.items())
        if layer_of(imported) > layer_of(module)
        and (module, imported) not in ALLOWED_UPWARD
    ]
    assert upward == []


def test_the_duties_never_import_the_models():
    """Not even inside a function: a duty gets the model from its caller."""
    imports = scan()
    assert [(module, imported) for module, found in sorted(imports.items())
            if LAYERS[layer_of(module)][0] == "duties"
            for imported in found if imported.startswith("django_sqlqueue.models")] == []


def test_the_scan_sees_imports_inside_functions():
    imports = scan()
    assert imports["django_sqlqueue.registry"]["django_sqlqueue.models"] == "function"
    assert imports["django_sqlqueue.registry"]["django_sqlqueue.enqueue.inserting"] is False
    assert imports["django_sqlqueue.workflows.canvas"]["django_sqlqueue.models"] == "function"


def test_no_model_is_reached_through_the_app_registry():
    """``apps.get_model`` is for migrations, whose models are historical: elsewhere a module
    imports the model (inside a function where the package's face imports that module, as the
    models cannot be imported before the app registry is ready). Migration operations read
    the migration state's models, as migrations do."""
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.parts and path.name != "migration_operations.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "get_model(" in line or "get_models(" in line
    ]
    assert found == []
