"""The API's query parameters, checked: an unknown or malformed one is a 400 that names it (README, REST API).

A view declares the parameters it reads in `query_parameters` ({name: type}, `str` or `int`,
or just the names); `ProjectScopedMixin.initial` (dashboard/api/base.py) calls
`query_parameters_check` for its GET and HEAD requests, after authentication and the scope
check, so an outsider still learns nothing but a 404 from the view. The answer:

    400 {"detail": "Unknown query parameter 'foo'; allowed: agent, end, …", "parameter": "foo"}

DRF's own parameters (`format`, `page`) are always allowed. A value holding a NUL is a 400 too
(PostgreSQL text cannot hold one). An `int` is ASCII digits alone (`whole_number`: str.isdigit
also takes '²', '١٢' and '５'), at most MAX_WHOLE_NUMBER; `page` is one from 1. A page past the
last is DRF's own 404 ("Invalid page."): the number is well formed, the page does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rest_framework import status
from rest_framework.exceptions import APIException

# DRF's format override (URL_FORMAT_OVERRIDE) and PageNumberPagination's page number.
ALWAYS = {"format": str, "page": int}
# What every ranged, filtered read takes (dashboard/timerange.py), as on the pages.
RANGE = {"range": str, "start": str, "end": str}
FILTERS = {"service": str, "environment": str, "agent": str}
RANGED = {**RANGE, **FILTERS}
# The eval cases' list and export (evals.selectors.parse_case_filters).
CASE_QUERY = {"status": str, "tool": str, "tag": str, "q": str}
# The largest whole number a query parameter may be: a PostgreSQL bigint.
MAX_WHOLE_NUMBER = 2**63 - 1


def whole_number(text: str, *, low: int = 0, high: int = MAX_WHOLE_NUMBER) -> int | None:
    """`text` (spaces around it aside) as an int if it is ASCII digits from `low` to `high`, else None.

    The one parse of an integer the API reads from text: str.isdigit() alone takes '²' (which
    int() then refuses) and '١٢' or '５' (which int() reads as 12 and 5)."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(high)):
        return None
    number = int(text)
    return number if low <= number <= high else None


class QueryParameterError(APIException):
    """400 `{"detail": …, "parameter": name}`."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid_query_parameter"

    def __init__(self, parameter: str, message: str):
        super().__init__()
        self.detail = {"detail": message, "parameter": parameter}


def _declared(allowed: Mapping[str, type] | Iterable[str]) -> dict[str, type]:
    if isinstance(allowed, Mapping):
        return {**ALWAYS, **allowed}
    return {**ALWAYS, **dict.fromkeys(allowed, str)}


def query_parameters_check(params, allowed: Mapping[str, type] | Iterable[str]) -> None:
    """Raise QueryParameterError for the first parameter (by name) that is not `allowed`, or
    whose value is not of its declared type (`int`: a whole number), or that is given twice."""
    declared = _declared(allowed)
    for name in sorted(params.keys()):
        if name not in declared:
            raise QueryParameterError(name, f"Unknown query parameter {name!r}; allowed: {', '.join(sorted(declared))}")
        values = params.getlist(name) if hasattr(params, "getlist") else [params[name]]
        if len(values) > 1:
            raise QueryParameterError(name, f"Query parameter {name!r} is given {len(values)} times; give it once")
        value = values[0] if values else ""
        if "\x00" in value:
            raise QueryParameterError(name, f"Query parameter {name!r} must not contain a NUL character")
        if declared[name] is int and value != "":
            low = 1 if name == "page" else 0
            if whole_number(value, low=low) is None:
                wanted = f"a whole number from {low} to {MAX_WHOLE_NUMBER}"
                raise QueryParameterError(name, f"Query parameter {name!r} must be {wanted}, not {value[:40]!r}")
