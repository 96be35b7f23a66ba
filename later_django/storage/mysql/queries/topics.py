"""MySQL/MariaDB statements of the topic store.

``insert_if_absent`` must say whether it wrote the row. Under ``CLIENT_FOUND_ROWS``
(which Django sets) an ``ON DUPLICATE KEY UPDATE`` that keeps the row reports one
row, as an insert does, and ``INSERT IGNORE`` would also turn a data error (a topic
too long for its column) into a warning and a truncated row. So the statement leaves
its outcome in ``LAST_INSERT_ID()``: 1 when the inserted row was written, 0 when the
existing row stayed, read back in the same transaction (one row or none: the rows
``Driver.execute`` counts).
"""

from __future__ import annotations

from later_django.storage.driver import Returning
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.topics import TopicQueries


@MysqlDriver.register
class MysqlTopicQueries(TopicQueries):
    insert_if_absent = Returning(
        [
            "INSERT INTO later_topic (namespace, topic, partitions, created_at) "
            "VALUES (%(namespace)s, %(topic)s, %(partitions)s, "
            "%(now)s + LAST_INSERT_ID(1) - 1) "
            "ON DUPLICATE KEY UPDATE created_at = later_topic.created_at + LAST_INSERT_ID(0)"
        ],
        "SELECT 1 FROM DUAL WHERE LAST_INSERT_ID() = 1",
    )
