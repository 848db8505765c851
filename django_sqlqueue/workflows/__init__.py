"""Workflows: jobs that wait for other jobs (docs/workflows.md).

``canvas.py`` builds them (``chain``, ``group``, ``chord``, ``Workflow``) and enqueues a whole
workflow in one transaction, above the models; ``transitions/settle.py`` releases or cancels a
job's children when a parent ends.
"""

from .canvas import EnqueuedWorkflow, Signature, Workflow, chain, chord, group, signature

__all__ = ["EnqueuedWorkflow", "Signature", "Workflow", "chain", "chord", "group", "signature"]
