"""The dashboard, `cronctl serve` (docs/dashboard.md): its server, pages, API and actions."""
