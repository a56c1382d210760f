"""Keyword-only query functions over the tables, one module per table (plus paging in listing.py)."""
