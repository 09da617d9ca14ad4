"""Thin Celery task: a large replay range runs here (dashboard/replay/service.py queues it after commit)."""

from celery import shared_task

from dashboard.replay import jobs


@shared_task(ignore_result=True)
def replay_job(result_id: int) -> None:
    jobs.replay_job_run(result_id=result_id)
