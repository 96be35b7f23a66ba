"""PostgreSQL statements of the topic store: the shared ones as they are."""

from __future__ import annotations

from later_django.storage.postgres import PostgresDriver
from later_django.storage.queries.topics import TopicQueries


@PostgresDriver.register
class PostgresTopicQueries(TopicQueries):
    pass
