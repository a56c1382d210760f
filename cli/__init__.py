"""`eaglenest` subcommands owned by the control plane: migrate, keys, api."""
