"""Statements of the topic store: the fixed partition count of each topic, ``later_topic``.

Both vendors run them as they are. The insert does nothing when the
``(namespace, topic)`` row exists already, so of any number of concurrent
registrations exactly one writes the row and every one then reads it.
"""

from __future__ import annotations


class TopicQueries:
    """Topic statements (none is spelled per vendor)."""

    #: -> (partitions,) of the topic, or no row.
    stored_partitions = (
        "SELECT partitions FROM later_topic WHERE namespace = %(namespace)s AND topic = %(topic)s"
    )
    #: Changes one row (recorded) or none (a row of that topic exists already).
    insert_if_absent = (
        "INSERT INTO later_topic (namespace, topic, partitions, created_at) "
        "VALUES (%(namespace)s, %(topic)s, %(partitions)s, %(now)s) "
        "ON CONFLICT (namespace, topic) DO NOTHING"
    )
