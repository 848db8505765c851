"""No import cycles between the package's modules, counting imports inside functions: a lower
layer never imports an upper one (the run path never imports the django.tasks backend, the
outcomes never import the models)."""

import ast
from pathlib import Path

import django_sqlqueue

PACKAGE = Path(django_sqlqueue.__file__).parent

#: The package's layers, bottom up: a module imports modules of its own layer and of those
#: below it, never of one above. A module belongs to the entry of the longest prefix that
#: names it (``schedules.operations`` is an operation, the rest of ``schedules`` a duty).
LAYERS = (
    ("base", ("conf", "statuses", "exceptions", "context", "signals")),
    ("database", ("db", "migration_operations")),
    ("duties", (
        "enqueue", "claim", "run", "registry", "schedules", "workflows", "waiting",
        "observability.metrics", "observability.tracing", "observability.durations",
        "observability.liveness", "observability", "worker.listening",
        "",  # the package's face: job, schedule, enqueue_on_commit, current_job
    )),
    ("models", ("models",)),
    ("operations", (
        "queues", "schedules.operations", "schedules.runtime", "observability.snapshot",
        "observability.throughput", "observability.queue_metrics", "observability.fleet",
        "checks",
    )),
    ("worker", ("worker",)),
    ("entry points", ("backend", "backend_checks", "admin", "management", "views", "urls", "apps")),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set) -> set:
    """The package's modules that ``path`` imports, anywhere in it."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in modules else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in modules and m != name}


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
    """The package's modules (but its migrations), and what each imports."""
    paths = [p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts]
    modules = {module_name(p) for p in paths}
    graph = {module_name(p): imports_of(p, modules) for p in paths}
    assert graph["django_sqlqueue.run.runner"], "the scan found no imports: it is broken"
    return graph


def layer_of(module: str) -> int:
    name = module.removeprefix("django_sqlqueue").removeprefix(".")
    found = [(len(prefix), level) for level, (_, prefixes) in enumerate(LAYERS)
             for prefix in prefixes
             if name == prefix or (prefix and name.startswith(prefix + "."))]
    assert found, f"{module} is in no layer of LAYERS: add it"
    return max(found)[1]


def test_the_package_has_no_import_cycles():
    graph = scan()
    assert cycles(graph) == []


def test_lower_layers_never_import_upper_ones():
    graph = scan()
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {imported} "
        f"({LAYERS[layer_of(imported)][0]})"
        for module, imported_modules in sorted(graph.items())
        for imported in sorted(imported_modules)
        if layer_of(imported) > layer_of(module)
    ]
    assert upward == []
