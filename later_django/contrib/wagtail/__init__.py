"""later_django in Wagtail's admin: a "Background jobs" menu item linking to the
dashboard and a panel on Wagtail's dashboard (jobs per stage, failures of the last
hour). Add ``"later_django.contrib.wagtail"`` to ``INSTALLED_APPS`` after
``"later_django"``; see docs/integrations/wagtail.md."""
