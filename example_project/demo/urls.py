"""The demo page's URLs (mounted at the site root)."""

from django.urls import path

from demo import views

app_name = "demo"
urlpatterns = [
    path("", views.index, name="index"),
    path("enqueue/<slug:action>/", views.enqueue, name="enqueue"),
]
