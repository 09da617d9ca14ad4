"""Rollups: the stored tool calls recomputed into per-tool counts (docs/contract/metrics.md).

    rows.py        pure: the rollup rows, their columns and the bucket arithmetic
    attempts.py    pure: attempts linked into logical calls, and their counts
    histograms.py  pure: mergeable latency histograms
    python_path.py the recompute in Python through the ORM (SQLite's path, the SQL path's reference)
    sql.py         the same recompute in SQL on PostgreSQL
    refresh.py     the job: claim changed buckets, recompute them, rebuild, prune

Empty on purpose: importing a pure module of the package must not import Django.
"""
