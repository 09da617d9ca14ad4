"""search_flights with its bugs back: a generic error for a bad date, and an upstream timeout."""


def search_flights(origin: str, destination: str, date: str) -> dict:
    if "/" in date:
        return {"ok": False, "error": "Something went wrong"}
    raise TimeoutError("flight search upstream timed out after 30 s")


TOOLS = {"search_flights": search_flights}
