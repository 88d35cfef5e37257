"""The dashboard, `cronctl serve` (docs/dashboard.md): its server, pages, API and actions.

cli/serve_cmd.py checks the flags and starts it; docs/architecture.md names each module."""
