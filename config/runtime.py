"""Process tuning for the web server (config/wsgi.py), shared with bench/pages.py so the benchmark
times what the server runs."""

import gc


def tune_gc() -> None:
    """Fewer, cheaper cyclic garbage collections while serving requests.

    A dashboard request allocates tens of thousands of short-lived containers (rows, dicts,
    template nodes). At CPython's default threshold (700 allocations) the collector ran many
    times a request, and now and then a full collection walked every object of the process:
    bench/pages.py measured the overview at p50 135 ms with p95 decided by ~400 ms outliers,
    and 106 / 118 ms with no collector at all. Objects alive after start-up (modules,
    settings, URL patterns) are frozen out of every later collection, and young collections
    wait for 50,000 allocations. Reference counting still frees almost everything at once;
    only reference cycles wait a little longer. (Ingest pauses the collector for its writes
    anyway: ingest.services.)
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
