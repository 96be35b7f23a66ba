"""URLs that leave later_django's dashboard out: check later_django.W004's case."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("django-admin/", admin.site.urls)]
