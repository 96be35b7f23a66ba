"""SQLite statements of the topic store: the shared ones as they are."""

from __future__ import annotations

from later_django.storage.queries.topics import TopicQueries
from later_django.storage.sqlite import SqliteDriver


@SqliteDriver.register
class SqliteTopicQueries(TopicQueries):
    pass
