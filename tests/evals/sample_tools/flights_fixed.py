"""search_flights with its bugs fixed: a bad date is an actionable validation error."""

import datetime as dt


def search_flights(origin: str, destination: str, date: str) -> dict:
    try:
        day = dt.date.fromisoformat(date)
    except ValueError:
        return {
            "isError": True,
            "error": {
                "type": "validation",
                "message": f"date {date!r} must be YYYY-MM-DD",
                "field": "date",
                "suggestion": "write the date as YYYY-MM-DD, e.g. 2026-01-31",
                "retryable": False,
            },
        }
    return {"flights": [{"from": origin, "to": destination, "day": day.isoformat(), "fare": 420}]}


TOOLS = {"search_flights": search_flights}
