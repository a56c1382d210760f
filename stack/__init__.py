"""`eaglenest up`: the embedded stack (SQLite, filesystem broker, a worker, SeaweedFS, the api)."""
