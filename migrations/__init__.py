"""Alembic migrations; ``migrations.runner`` applies them from code (CLI, tests, stack)."""
