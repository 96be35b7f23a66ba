"""``path("later/metrics", include("later_django.metrics.urls"))``."""

from django.urls import path

from later_django.metrics import views

app_name = "later_django_metrics"
urlpatterns = [path("", views.metrics, name="metrics")]
