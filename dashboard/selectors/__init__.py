"""Reads for the pages and the API, one module per area (tools, traces, alerts, ingest health).

Empty on purpose: each caller imports the module of its area.
"""
