"""Alerting: drift findings become alerts, and alerts become notices on the project's channels.

    evaluation.py       rollups -> the pure detectors (dashboard/drift.py) -> findings
    lifecycle.py        findings -> alerts: open, refresh, acknowledge, resolve, mute
    eval_regressions.py eval runs' regressions -> alerts (a receiver of evals.signals)
    targets.py          where a notice may go: webhook URLs and e-mail addresses vetted
    transports.py       webhook / Slack / e-mail senders
    delivery.py         claimed sends, retries with backoff, the delivery log
    tasks.py            the thin Celery tasks of delivery

Empty on purpose: importing one module of the package imports only what it needs.
"""
