"""CloudWatch Logs (Logs_20140328): the shapes, errors and filter patterns the api serves."""
