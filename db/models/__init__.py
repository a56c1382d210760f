"""The SQLAlchemy tables, one module each."""
