"""REST API of jobs (``/api/v1/jobs/...``, ``/api/v1/rlinf/plan/``).

Thin views over ``jobs.control``, ``jobs.observe`` and ``jobs.explain``."""
