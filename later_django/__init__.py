"""later_django: durable background jobs for Django, stored in the application's database."""

__version__ = "0.1.0.dev0"
