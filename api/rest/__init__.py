"""The /v1 REST face: the same services as the AWS handlers, bodies equal to the CLI's JSON."""
