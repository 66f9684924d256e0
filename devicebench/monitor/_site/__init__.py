"""Directory put on a monitored child's PYTHONPATH: holds its ``sitecustomize``."""
