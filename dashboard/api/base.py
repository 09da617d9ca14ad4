"""What every project API view shares: `/api/v1/projects/<slug>/…` scoped to the caller's projects."""

from __future__ import annotations

from django.utils import timezone
from rest_framework.exceptions import ValidationError

from dashboard import scoping, timerange
from dashboard.api.query import query_parameters_check
from ingest.models import Project


class ProjectScopedMixin:
    """`self.project`: the URL's project if the caller is a member; 404 otherwise (never 403, never data)."""

    _project: Project | None = None
    # The query parameters a GET reads ({name: str | int}); any other is a 400 naming it (dashboard/api/query.py).
    query_parameters: dict = {}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method in ("GET", "HEAD"):
            self.project  # an outsider gets 404 before any 400 says a word about parameters
            query_parameters_check(request.query_params, self.query_parameters)
        for name, value in kwargs.items():  # a path's <path:tool> may hold a %00, which PostgreSQL text cannot
            if isinstance(value, str) and "\x00" in value:
                self.project  # an outsider still gets 404 first
                raise ValidationError({name: ["must not contain a NUL character"]})

    @property
    def project(self) -> Project:
        if self._project is None:
            self._project = scoping.project_for_user(self.request.user, self.kwargs["project"])
        return self._project

    def time_range(self) -> timerange.TimeRange:
        """?range= (1h, 24h, 7d, 30d, 90d, custom with start/end), as on the pages; a bad one is a 400 naming
        the parameter at fault (range, start or end)."""
        try:
            return timerange.parse_range(self.request.query_params, timezone.now())
        except timerange.RangeError as exc:
            raise ValidationError({exc.parameter: [str(exc)]}) from None

    def filters(self) -> timerange.Filters:
        return timerange.parse_filters(self.request.query_params)
