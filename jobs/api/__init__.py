"""REST API of jobs (``/api/v1/jobs/...``, ``/api/v1/rlinf/plan/``): thin views over ``jobs.services``."""
