"""later_django in the Django admin: the dashboard pages (:mod:`.views`, :mod:`.urls`),
their actions (:mod:`.actions`), and the admin-tools modules (:mod:`.dashboard`).

The admin's autodiscovery imports this package; it registers no ModelAdmin
(later_django's tables have composite primary keys, which the admin refuses),
so the pages are reached through their URLs, included before ``admin.site.urls``.
"""
