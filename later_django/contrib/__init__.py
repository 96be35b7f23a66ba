"""Optional apps that fit later_django into another application's admin; each is
installed on its own (``INSTALLED_APPS``) and needs that application."""
