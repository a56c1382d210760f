"""Persistence: SQLAlchemy tables in db/models and keyword-only query functions in db/queries,
one module per table in each, named alike (db/models/optimization_job.py holds the table,
db/queries/optimization_job.py its queries); the process's Settings in db/settings.py.

The package itself imports nothing: db.settings is read by tools that run without SQLAlchemy
(the shipped-head build on a GPU image); importing db.models registers every table.
"""
