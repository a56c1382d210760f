"""The test suite; a regular package so `tests.*` never resolves to a dependency's stray top-level
`tests` package (smdebug-rulesconfig, pulled in by sagemaker-core, installs one)."""
