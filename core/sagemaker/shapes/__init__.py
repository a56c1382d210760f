"""Request and response bodies as pydantic models, named and nested exactly like botocore's shapes."""
