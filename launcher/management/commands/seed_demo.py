"""Seed the embedded default: a demo admin user (password printed once) and a demo
local cluster with 3 virtual nodes. Idempotent: re-running changes nothing that exists."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from clusters.host_paths import demo_host_path_root
from clusters.models import Cluster, ImageRegistry, Node

DEMO_CLUSTER = "local"
# Labels make both the demo template (1 head + 2 rollout Workers) and the RLinf
# realworld configs (GPU header at rank 0 + robot node at rank 1) placeable.
DEMO_NODES = [
    {
        "name": "local-gpu-0",
        "labels": {
            "rlark.io/node-category": "cloud",
            "rlark.io/gpu-model": "A100",
            "pool": "head",
            "rlinf.io/node-group": "4090",
        },
        "capacity": {"nvidia.com/gpu": 8, "cpu": 16, "memory": 64 * 2**30},
    },
    {
        "name": "local-gpu-1",
        "labels": {"rlark.io/node-category": "cloud", "rlark.io/gpu-model": "A100", "pool": "rollout"},
        "capacity": {"nvidia.com/gpu": 8, "cpu": 16, "memory": 64 * 2**30},
    },
    {
        "name": "local-robot-0",
        "labels": {"rlark.io/node-category": "robot", "pool": "rollout", "rlinf.io/node-group": "franka"},
        "capacity": {"rlinf.io/device-franka": 1, "cpu": 8, "memory": 32 * 2**30},
    },
]


class Command(BaseCommand):
    help = "Create the demo admin user and the demo local cluster (idempotent)."

    def add_arguments(self, parser):  # noqa: D102
        parser.add_argument("--username", default="admin")
        parser.add_argument("--password", default=None, help="default: a random one, printed")
        parser.add_argument(
            "--host-path-root",
            action="append",
            default=[],
            help="a further host directory the demo cluster allows (repeatable; default: only each user's own"
            " directory under RLARK_LOCAL_ROOT/host-paths)",
        )

    @transaction.atomic
    def handle(self, *args, username: str, password: str | None, **options):  # noqa: D102
        from clusters.services.inventory import upsert_local_nodes

        user_model = get_user_model()
        user = user_model.objects.filter(username=username).first()
        if user is None:
            password = password or secrets.token_urlsafe(9)
            user_model.objects.create_superuser(username=username, email="", password=password)
            self.stdout.write(self.style.SUCCESS(f"Demo admin created: username={username} password={password}"))
        elif password:
            user.set_password(password)
            user.save(update_fields=["password"])
            self.stdout.write(f"Demo admin password reset: username={username} password={password}")
        else:
            self.stdout.write(f"Demo admin exists: username={username} (password unchanged)")
        roots = "\n".join([demo_host_path_root(str(settings.RLARK_LOCAL_ROOT)), *options["host_path_root"]])
        cluster, created = Cluster.objects.get_or_create(
            name=DEMO_CLUSTER,
            defaults={
                "runtime": Cluster.Runtime.LOCAL,
                "status": Cluster.Status.ONLINE,
                "allow_host_path": True,
                "host_path_roots": roots,
            },
        )
        if (
            not created
            and cluster.host_path_roots != roots
            and (options["host_path_root"] or not cluster.host_path_roots)
        ):
            cluster.host_path_roots = roots
            cluster.save(update_fields=["host_path_roots"])
        ImageRegistry.objects.get_or_create(name="docker-hub", defaults={"registry": "docker.io", "public": True})
        if created or not Node.objects.filter(cluster=cluster).exists():
            upsert_local_nodes(cluster, DEMO_NODES)
            self.stdout.write(f"Demo local cluster '{DEMO_CLUSTER}' with {len(DEMO_NODES)} nodes ready.")
