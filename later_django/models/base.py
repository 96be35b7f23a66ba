"""What every model shares: the column lengths and ``LaterModel`` with its manager.

Every ``later_*`` model subclasses :class:`LaterModel`; names, namespaces, queue and
worker ids are ``NAME_LENGTH`` characters, keys and class paths ``KEY_LENGTH``.
"""

from __future__ import annotations

from django.db import models, router

NAME_LENGTH = 200
KEY_LENGTH = 500


class LaterManager(models.Manager):
    """The manager of every later_* model: the ORM for cold paths.

    ``write_alias()`` is the database the router picks for this model's writes
    (``db_manager("alias")`` picks another); ``storage.stores.stores_for`` of it
    is the storage there. Hot paths run the storage drivers' named SQL.
    """

    def write_alias(self) -> str:
        return self._db or router.db_for_write(self.model)


class LaterModel(models.Model):
    """Base of every later_* model (only adds the manager)."""

    objects = LaterManager()

    class Meta:
        abstract = True
        # Named, not found from the module: a process that imports the backend while
        # "later_django" is missing from INSTALLED_APPS (Wagtail builds its tasks'
        # backends while the apps load) then reaches check E018, which says what to
        # add, instead of stopping at Django's "doesn't declare an explicit app_label".
        app_label = "later_django"
