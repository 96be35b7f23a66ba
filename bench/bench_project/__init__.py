"""Settings and tasks of ``bench/bench.py``'s throw-away Django project."""
