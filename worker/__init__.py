"""Celery app, dispatch and the optimization-job pipeline; owns every status change after creation."""
