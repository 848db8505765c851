"""Queues as operators see them: pause, resume and limits (``control.py``), kept in the Queue
table that the claim reads (``claim/limited.py``)."""
