"""What the operations do, shared by the AWS handlers and the REST routes: validate, persist, dispatch."""
