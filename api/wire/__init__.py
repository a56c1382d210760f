"""AWS JSON 1.1 wire protocol: service shapes, Coral-style validation, operation registry, the route."""
