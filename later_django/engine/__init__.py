"""The job engine: records, stages, enqueue, execution writes, retries, continuations.

Surfaces (the ``django.tasks`` backend, the native API, the worker) call the
engine; the engine calls the storage. Nothing here knows about processes,
threads or signals.
"""
