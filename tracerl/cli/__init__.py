"""The ``tracerl`` command line."""
