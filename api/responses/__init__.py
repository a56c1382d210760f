"""Rows to response shapes: one describe and one summary shaper per resource."""
