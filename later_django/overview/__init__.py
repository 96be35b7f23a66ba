"""The figures of the dashboard, of ``later_status``, ``later_queue list`` and the
metrics view, read once and shared by all of them.

* :mod:`~later_django.overview.figures`: the values (``Overview`` and its figures,
  ``STAGES``) and the ``later_status --json`` shape;
* :mod:`~later_django.overview.snapshot`: :func:`~later_django.overview.snapshot.read_overview`,
  one bounded snapshot of a namespace (stages, last minute, recurring);
* :mod:`~later_django.overview.queues`: the one answer about which queues a namespace
  has (configured, or seen in messages, pauses and running jobs) and their figures;
* :mod:`~later_django.overview.topics`: topics, partitions and consumer-group lag;
* :mod:`~later_django.overview.history`: the charts' reads (queue length, throughput);
* :mod:`~later_django.overview.target`: which database and namespace a read is of.
"""
