"""The Prometheus metrics view (extra ``later-django[metrics]``).

``path("later/metrics", include("later_django.metrics.urls"))`` serves, per
namespace of ``LATER["METRICS"]["NAMESPACES"]`` (default: ``LATER["NAMESPACE"]``),
the figures of :func:`later_django.overview.snapshot.read_overview`: counters and small
tables, never a scan of jobs. Staff users and requests bearing
``LATER["METRICS"]["TOKEN"]`` may read it. The names are
:data:`later_django.core.metric_names.VIEW_METRICS`.
"""
