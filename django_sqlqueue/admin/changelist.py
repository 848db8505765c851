"""The job list's ChangeList: a lean queryset, and a date hierarchy that does not scan the table.

Django's date hierarchy runs ``MIN``/``MAX`` and ``SELECT DISTINCT date_trunc(...)`` over every
matching row on each page view: seconds on a million jobs, since enqueued_at has no index. Jobs
are numbered in the order they are enqueued, so the first and last enqueued_at are read through
the primary key instead (two one-row index reads), and the links are every year, month or day
between them, rather than only those that have jobs.
"""

import calendar
import datetime as dt

from django.contrib.admin.views.main import ChangeList
from django.utils import formats, timezone
from django.utils.text import capfirst

from .expressions import LastError

#: Columns the list never reads: they can hold megabytes per page of jobs.
HEAVY_FIELDS = ("payload", "result", "errors")


class JobChangeList(ChangeList):
    def get_queryset(self, request, exclude_parameters=None):
        queryset = super().get_queryset(request, exclude_parameters)
        return queryset.defer(*HEAVY_FIELDS).annotate(
            last_error_type=LastError("type"), last_error_message=LastError("message")
        )

    def get_results(self, request):
        super().get_results(request)
        ids = getattr(self.paginator, "ids", None)
        if ids is not None and ((self.show_all and self.can_show_all) or not self.multi_page):
            # The paginator read every matching id: fetch the rows through the primary key
            # instead of running the filter over the table a second time.
            self.result_list = self.result_list.filter(pk__in=ids)

    def _enqueued_range(self):
        dates = self.queryset.order_by().values_list(self.date_hierarchy, flat=True)
        first, last = dates.order_by("pk").first(), dates.order_by("-pk").first()
        if first is None or last is None:
            return None, None
        first, last = timezone.localtime(first), timezone.localtime(last)
        return min(first, last).date(), max(first, last).date()

    def date_nav(self) -> dict:
        """The context of admin/date_hierarchy.html, as Django's date_hierarchy tag makes it."""
        field = self.date_hierarchy
        year, month, day = (
            self.params.get(f"{field}__{part}") for part in ("year", "month", "day")
        )
        first, last = None, None
        if not (year or month or day):
            first, last = self._enqueued_range()
            if first is None:
                return {"show": False}
            if first.year == last.year:
                year = first.year
                if first.month == last.month:
                    month = first.month

        def link(filters):
            return self.get_query_string(filters, [f"{field}__"])

        try:
            year = int(year) if year else None
            month = int(month) if month else None
            day = int(day) if day else None
            if year and month and day:
                chosen = dt.date(year, month, day)
        except ValueError:
            return {"show": False}  # Django's own filter reports the bad date
        keys = {"year": f"{field}__year", "month": f"{field}__month", "day": f"{field}__day"}
        if year and month and day:
            return {
                "show": True,
                "back": {"link": link({keys["year"]: year, keys["month"]: month}),
                         "title": capfirst(formats.date_format(chosen, "YEAR_MONTH_FORMAT"))},
                "choices": [{"title": capfirst(formats.date_format(chosen, "MONTH_DAY_FORMAT"))}],
            }
        if year and month:
            if not 1 <= month <= 12:
                return {"show": False}
            days = range(1, calendar.monthrange(year, month)[1] + 1)
            if first is not None:  # no date chosen: the range is known, offer only its days
                days = range(first.day, last.day + 1)
            return {
                "show": True,
                "back": {"link": link({keys["year"]: year}), "title": str(year)},
                "choices": [
                    {"link": link({keys["year"]: year, keys["month"]: month, keys["day"]: d}),
                     "title": capfirst(formats.date_format(dt.date(year, month, d),
                                                          "MONTH_DAY_FORMAT"))}
                    for d in days
                ],
            }
        if year:
            months = range(first.month, last.month + 1) if first is not None else range(1, 13)
            return {
                "show": True,
                "back": {"link": link({}), "title": "All dates"},
                "choices": [
                    {"link": link({keys["year"]: year, keys["month"]: m}),
                     "title": capfirst(formats.date_format(dt.date(year, m, 1),
                                                          "YEAR_MONTH_FORMAT"))}
                    for m in months
                ],
            }
        if first is None:
            first, last = self._enqueued_range()
            if first is None:
                return {"show": False}
        return {
            "show": True,
            "back": None,
            "choices": [
                {"link": link({keys["year"]: str(y)}), "title": str(y)}
                for y in range(first.year, last.year + 1)
            ],
        }
