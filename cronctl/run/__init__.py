"""`cronctl run` and `cronctl work` (docs/architecture.md); run/once.py ties the modules
together."""
