"""cronctl: scheduled jobs in version control."""

__version__ = "0.1.0"
