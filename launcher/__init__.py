"""Starting the embedded console: ``seed_demo`` seeds its defaults, ``runconsole`` runs and supervises its processes
(``serve_web``, Celery worker and beat, the cluster watcher, the SSH bastion, the domain relay and the local-runtime
supervisor). It stands above every other app, since it starts what they serve, and nothing imports it."""
