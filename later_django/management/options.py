"""The types of later_django's command line options: each one of
:mod:`later_django.inputs`' parsers, bound to its option's name and bounds.

A refused value becomes ``argparse.ArgumentTypeError``, which Django's
``CommandParser`` reports as ``error: argument --x: '<value>' <rule>`` with exit
status 2 on the command line, and as ``CommandError`` under ``call_command`` (the
options given as arguments: ``call_command`` passes keyword options by without
their type). argparse would print its own generic message for a ``ValueError``,
hiding the rule, hence the one adapter here.

Every option refuses an empty value (``--task ''``): on the command line an empty
value is a mistake (a variable that was not set), never "no filter".
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from later_django import inputs
from later_django.inputs import InputError

#: The most job threads one worker process runs (``--concurrency``).
MAX_CONCURRENCY = 10_000
#: The most worker processes one supervisor forks (``--processes``).
MAX_PROCESSES = 1_000
#: The most jobs one ``later_jobs`` transaction takes (``--batch-size``).
MAX_BATCH_SIZE = 10_000
#: The shortest lease (``--lease-seconds``): the heartbeat renews leases every few
#: seconds, and a lease of a millisecond would let a second worker claim a running job.
MIN_LEASE_SECONDS = 1.0
#: The longest lease and the longest shutdown wait (a day).
MAX_WAIT_SECONDS = 24 * 3600.0
#: The oldest a ready job may be for ``later_status --check`` (a year).
MAX_AGE_SECONDS = 365 * 24 * 3600.0
#: The most live workers ``later_status --check --min-workers`` may ask for.
MAX_WORKERS = 1_000_000
#: The longest path ``--health-file`` takes (Linux's ``PATH_MAX``).
PATH_LENGTH = 4_096


def option_type[T](parse: Callable[..., T], option: str, **rule: Any) -> Callable[[str], T]:
    """An argparse ``type=`` for ``option``: ``parse(option, value, **rule)``, its
    ``InputError`` turned into ``ArgumentTypeError`` saying the value and the rule
    (argparse puts the option's name in front)."""

    def parse_option(value: str) -> T:
        try:
            return parse(option, value, **rule)
        except InputError as error:
            raise argparse.ArgumentTypeError(f"{inputs.shown(error.value)} {error.rule}") from None

    parse_option.__name__ = parse.__name__
    return parse_option


def name_of(option: str) -> Callable[[str], str]:
    """A queue, stage, pass, database alias or host name (:func:`inputs.name`)."""
    return option_type(inputs.name, option)


def count_of(option: str, low: int, high: int) -> Callable[[str], int]:
    """A whole number from ``low`` to ``high`` (:func:`inputs.integer`)."""
    return option_type(inputs.integer, option, low=low, high=high)


def seconds_of(option: str, low: float, high: float) -> Callable[[str], float]:
    """A finite number of seconds from ``low`` to ``high`` (:func:`inputs.seconds`)."""
    return option_type(inputs.seconds, option, low=low, high=high)
