"""A workflow as the admin's workflow page draws it (docs/workflows.md): its jobs in layers by
depth (a job's layer is one more than its deepest parent's), each with its state and, for a
waiting or cancelled one, why.

Two reads, whatever the workflow's size: its jobs' few columns, and its edges. A big layer (a
chord's group of 10,000) is not drawn job by job: past ``MAX_NODES_PER_LAYER`` it is summed up
as counts by status, with the jobs worth a look listed first (failed, running, cancelled...)
up to that bound. Workflows of more than ``MAX_JOBS`` jobs are only counted.
"""

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db.models import Count

from ..models import Job, JobDependency
from ..statuses import FINISHED_STATUSES, JobStatus
from ..transitions.settle import CANCELLED_BY_PARENT
from .display import STATUS_ORDER

#: Jobs drawn in a layer at most; a bigger layer shows its counts by status and these.
MAX_NODES_PER_LAYER = 30
#: Jobs of a workflow read at most to draw it; a bigger one shows only its counts by status.
MAX_JOBS = 50_000
#: Parents named on a node at most ("after #12, #13"); more are counted.
MAX_PARENTS_NAMED = 5
#: The order in which a big layer lists its jobs: the ones that need a look first.
ATTENTION = [JobStatus.EXHAUSTED, JobStatus.EXPIRED, JobStatus.FAILED, JobStatus.CANCELLED,
             JobStatus.RUNNING, JobStatus.QUEUED, JobStatus.WAITING, JobStatus.SUCCEEDED]

COLUMNS = ("pk", "task_name", "status", "attempts", "max_attempts", "parents_pending",
           "cancelled_by", "cancel_requested_at")


@dataclass
class Node:
    pk: int
    task_name: str
    status: str
    attempts: int
    max_attempts: int
    parents_pending: int
    cancelled_by: str | None
    cancelling: bool
    parents: list = field(default_factory=list)  # ids, in their position's order
    #: Why it has not run: "waiting for 3 of 50 parents" (and of what status the unfinished
    #: ones are); "parent #123 ended exhausted" for one a workflow cancelled.
    reason: str = ""
    cancelled_by_parent: int | None = None


@dataclass
class Layer:
    depth: int
    size: int
    counts: list  # (status, n) in STATUS_ORDER
    nodes: list  # the Nodes drawn: all, or up to MAX_NODES_PER_LAYER, attention first

    @property
    def collapsed(self) -> bool:
        return self.size > len(self.nodes)


@dataclass
class Graph:
    workflow_id: object
    total: int
    counts: list  # (status, n) in STATUS_ORDER
    layers: list = field(default_factory=list)  # empty if the workflow is past MAX_JOBS
    too_big: bool = False

    def count(self, *statuses) -> int:
        return sum(n for status, n in self.counts if status in statuses)

    @property
    def unfinished(self) -> int:
        return self.total - self.count(*FINISHED_STATUSES)


def _ordered_counts(counter: Counter) -> list:
    rank = {status: n for n, status in enumerate(STATUS_ORDER)}
    return sorted(((status, n) for status, n in counter.items() if n),
                  key=lambda item: rank.get(item[0], len(rank)))


def read(workflow_id, using="default") -> Graph | None:
    """The workflow's graph, or None if no job has that workflow id."""
    jobs = Job.objects.using(using).filter(workflow_id=workflow_id)
    rows = list(jobs.order_by("pk").values_list(*COLUMNS)[:MAX_JOBS + 1])
    if not rows:
        return None
    if len(rows) > MAX_JOBS:
        counts = Counter(dict(jobs.order_by().values_list("status").annotate(n=Count("pk"))))
        return Graph(workflow_id, sum(counts.values()), _ordered_counts(counts), too_big=True)
    nodes = {row[0]: Node(*row[:6], cancelled_by=row[6], cancelling=row[7] is not None)
             for row in rows}
    edges = (JobDependency.objects.using(using).filter(child__workflow_id=workflow_id)
             .order_by("child_id", "position").values_list("child_id", "parent_id"))
    for child, parent in edges:
        if child in nodes:
            nodes[child].parents.append(parent)
    for node in nodes.values():
        node.reason = _reason(node, nodes)
    layers = defaultdict(list)
    for pk, depth in _depths(nodes).items():
        layers[depth].append(nodes[pk])
    graph = Graph(workflow_id, len(nodes),
                  _ordered_counts(Counter(node.status for node in nodes.values())))
    graph.layers = [_layer(depth, layers[depth]) for depth in sorted(layers)]
    return graph


def _depths(nodes: dict) -> dict:
    """{job id: its layer}: 0 for a job with no parent in the workflow, else one more than its
    deepest parent (Kahn's order, so each edge is looked at once)."""
    children = defaultdict(list)
    pending = {}
    for pk, node in nodes.items():
        known = [parent for parent in node.parents if parent in nodes]
        pending[pk] = len(known)
        for parent in known:
            children[parent].append(pk)
    depth = dict.fromkeys((pk for pk, n in pending.items() if n == 0), 0)
    frontier = list(depth)
    while frontier:
        following = []
        for pk in frontier:
            for child in children[pk]:
                depth[child] = max(depth.get(child, 0), depth[pk] + 1)
                pending[child] -= 1
                if pending[child] == 0:
                    following.append(child)
        frontier = following
    return depth


def _reason(node: Node, nodes: dict) -> str:
    if node.status == JobStatus.WAITING:
        unfinished = Counter(nodes[p].status for p in node.parents
                             if p in nodes and nodes[p].status not in FINISHED_STATUSES)
        of_what = ", ".join(f"{n} {status}" for status, n in _ordered_counts(unfinished))
        text = f"waiting for {node.parents_pending} of {len(node.parents)} parents"
        return f"{text} ({of_what})" if of_what else text
    if node.status == JobStatus.CANCELLED and node.cancelled_by:
        if node.cancelled_by.startswith(CANCELLED_BY_PARENT):
            rest = node.cancelled_by.removeprefix(CANCELLED_BY_PARENT)
            parent, _, how = rest.partition(" ")
            if parent.isdigit():
                node.cancelled_by_parent = int(parent)
                return f"parent #{parent} {how}"
        return f"cancelled by {node.cancelled_by}"
    if node.status == JobStatus.RUNNING and node.cancelling:
        return "asked to stop"
    return ""


def _layer(depth: int, members: list) -> Layer:
    counts = _ordered_counts(Counter(node.status for node in members))
    if len(members) <= MAX_NODES_PER_LAYER:
        return Layer(depth, len(members), counts, sorted(members, key=lambda node: node.pk))
    rank = {status: n for n, status in enumerate(ATTENTION)}
    shown = sorted(members, key=lambda node: (rank.get(node.status, len(rank)), node.pk))
    return Layer(depth, len(members), counts, shown[:MAX_NODES_PER_LAYER])
