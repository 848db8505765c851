"""A paginator that does not count a million rows to draw the page links.

``COUNT(*)`` on PostgreSQL reads every row the filter matches: seconds on a big job table, on
every page view. Instead, on PostgreSQL the count is the planner's estimate: ``pg_class.reltuples``
for the whole table, the row estimate of ``EXPLAIN`` when the list is filtered or searched.

Small results are counted exactly, because an estimate can be far off for a rare filter, and one
that is too low would hide pages. When the estimate is at most ``exact_up_to``, the ids of the
matching jobs are read, in list order, stopping after ``exact_up_to`` + 1: cheap when many rows
match, and when few do the list reads its page through those ids (see JobChangeList.get_results),
so the table is scanned once, not once to count and again for the page.

Other databases (SQLite) count exactly, as Django's paginator does.
"""


from django.core.paginator import Paginator
from django.db import connections
from django.utils.functional import cached_property

from ..db import ops


class EstimatedCountPaginator(Paginator):
    #: Results up to this size are counted exactly.
    exact_up_to = 1000

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.count_is_estimate = False
        self.ids = None  # every matching id, in order, when they were few enough to read

    @cached_property
    def count(self):
        queryset = self.object_list
        if not hasattr(queryset, "query") or not ops(connections[queryset.db]).estimates_rows:
            return super().count
        estimate = self._estimate(queryset)
        if estimate <= self.exact_up_to:
            ids = list(queryset.values_list("pk", flat=True)[: self.exact_up_to + 1])
            if len(ids) <= self.exact_up_to:
                self.ids = ids
                return len(ids)
            estimate = max(estimate, len(ids))
        self.count_is_estimate = True
        return estimate

    def page(self, number):
        number = self.validate_number(number)
        if self.ids is None:
            return super().page(number)
        start = (number - 1) * self.per_page
        rows = self.object_list.filter(pk__in=self.ids[start : start + self.per_page])
        return self._get_page(rows, number, self)

    def _estimate(self, queryset) -> int:
        driver = ops(connections[queryset.db])
        if not queryset.query.where:
            return int(driver.table_row_estimate(queryset.model))
        return int(driver.query_row_estimate(queryset.order_by().values("pk")))
