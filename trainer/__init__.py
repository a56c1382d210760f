"""eaglenest trainer: a library (torch + transformers, no S3, no database) that the worker
calls with local paths, and a command line (``python -m trainer --help``).

Kept import-light on purpose: importing ``trainer`` must not pull in torch, so the API
and CLI help stay fast. Import the sub-packages you need (``trainer.data``, ...).
"""
