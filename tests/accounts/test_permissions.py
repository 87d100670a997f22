"""Permission matrix: for every page, API endpoint and websocket that exists, user B
gets 403/404 on user A's job (and cannot change it), sees A's job nowhere, and anonymous users get a login
redirect, 401 or 403. Routes are enumerated from the URL configuration, so new endpoints are covered
automatically."""

from __future__ import annotations

import asyncio
import contextlib
import re

import pytest
from asgiref.sync import async_to_sync
from django.contrib import admin
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from clusters.models import Cluster
from jobs.models import Job, Pod, Task

JOB = "alice-private-job-q7"
TASK = f"{JOB}-actor"
POD = f"{TASK}-0"
MARKER_SCRIPT = "echo ALICE-RUN-SCRIPT-MARKER"
ACTIONS = ["stop", "start", "restart", "delete", "clone", "edit", "log", "events", "yaml", "terminal", "status"]
JOB_KWARGS = {"job", "job_name", "jobname"}
PUBLIC_NAMES = {"login", "logout", "set_language"}
_PARAM = re.compile(r"<(?:(?P<conv>\w+):)?(?P<name>\w+)>")


def _walk(resolver, prefix: str = ""):
    for p in resolver.url_patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p.name or ""


def _routes():
    """Every non-admin route as (template, name); admin is covered through its registered models."""
    out = []
    for route, name in _walk(get_resolver()):
        if route.startswith("admin/") or route.startswith("^") or "(?P" in route:
            continue
        out.append((route, name))
    return out


def _params(route: str) -> list[str]:
    return [m.group("name") for m in _PARAM.finditer(route)]


def _is_job_route(route: str) -> bool:
    names = set(_params(route))
    if names & JOB_KWARGS:
        return True
    return "name" in names and "job" in route.split("<", 1)[0]


def _fill(route: str, job: str, action: str = "stop") -> str:
    def sub(m):
        name, conv = m.group("name"), m.group("conv") or "str"
        if name in JOB_KWARGS or (name == "name" and "job" in route[: m.start()]):
            return job
        if name in ("task", "task_name"):
            return job + "-actor"
        if name in ("pod", "pod_name", "worker"):
            return job + "-actor-0"
        if name == "action":
            return action
        if name == "container":
            return "main"
        if conv in ("int", "index") or name in ("pk", "id", "index", "ordinal"):
            return "1"
        return "x"

    return "/" + _PARAM.sub(sub, route)


def _variants(route: str, job: str) -> list[str]:
    if "action" in _params(route):
        return sorted({_fill(route, job, a) for a in ACTIONS})
    return [_fill(route, job)]


@pytest.fixture
def alice_job(alice):
    cluster = Cluster.objects.create(name="matrix-cluster")
    spec = {"tasks": [{"name": "actor", "head": True, "runScript": MARKER_SCRIPT}]}
    job = Job.objects.create(name=JOB, display_name="Alice secret run", owner=alice, spec=spec, phase="Running")
    task = Task.objects.create(job=job, template_name="actor", name=TASK, cluster=cluster, namespace="rlark-system")
    Pod.objects.create(task=task, name=POD, phase="Running")
    return job


def _job_unchanged(job: Job) -> None:
    fresh = Job.objects.get(pk=job.pk)
    assert not fresh.stopped and fresh.phase == "Running" and fresh.spec == job.spec and fresh.attempt == job.attempt
    assert Job.objects.filter(owner=job.owner).count() == 1  # B cloned nothing into A's name


@pytest.mark.django_db
def test_routes_were_enumerated():
    routes = [r for r, _n in _routes()]
    assert any(_is_job_route(r) for r in routes)
    assert "api/v1/ssh-keys/" in routes and "api/v1/domains/" in routes


@pytest.mark.django_db
def test_user_b_cannot_read_or_change_user_a_job(client, bob, alice_job):
    client.force_login(bob)
    checked = 0
    for route, _name in _routes():
        if not _is_job_route(route):
            continue
        for path in _variants(route, JOB):
            ghost = path.replace(JOB, "no-such-job-zz9")
            for method in ("get", "post", "put", "patch", "delete"):
                resp = getattr(client, method)(path, content_type="application/json")
                assert resp.status_code in (403, 404, 405), (method.upper(), path, resp.status_code)
                ghost_resp = getattr(client, method)(ghost, content_type="application/json")
                # same answer as for a job that does not exist: no existence oracle (403 vs 404 allowed to differ
                # only when both are refusals)
                assert ghost_resp.status_code in (403, 404, 405), (method.upper(), ghost, ghost_resp.status_code)
                body = resp.content.decode(errors="replace")
                assert MARKER_SCRIPT not in body and "Alice secret run" not in body, (method.upper(), path)
                checked += 1
            _job_unchanged(alice_job)
    assert checked > 0


@pytest.mark.django_db
def test_user_b_sees_user_a_job_nowhere(client, bob, alice_job):
    client.force_login(bob)
    for route, _name in _routes():
        if _is_job_route(route):
            continue
        for path in _variants(route, JOB):
            resp = client.get(path)
            body = resp.content.decode(errors="replace")
            assert JOB not in body and MARKER_SCRIPT not in body, (path, resp.status_code)
    for model in admin.site._registry:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        resp = client.get(url)
        assert resp.status_code == 302 and "/admin/login/" in resp["Location"], (url, resp.status_code)


@pytest.mark.django_db
def test_owner_and_admin_are_not_refused(client, alice, admin_user, alice_job):
    """Sanity check that the refusals above come from the policy: A and admins can open the job's pages."""
    readable = [r for r, _n in _routes() if _is_job_route(r) and "action" not in _params(r)]
    client.raise_request_exception = False  # runtime errors of a page are not this test's subject
    for user in (alice, admin_user):
        client.force_login(user)
        ok = 0
        for route in readable:
            resp = client.get(_fill(route, JOB))
            assert resp.status_code not in (401, 403), (user.username, route, resp.status_code)
            ok += resp.status_code == 200
        assert ok >= 1 or not readable


@pytest.mark.django_db
def test_anonymous_gets_redirect_401_or_403_everywhere(client, alice_job):
    for route, name in _routes():
        if name in PUBLIC_NAMES:
            continue
        for path in _variants(route, JOB):
            for method in ("get", "post", "delete"):
                resp = getattr(client, method)(path)
                if path.startswith("/api/"):
                    assert resp.status_code in (401, 403), (method.upper(), path, resp.status_code)
                else:
                    assert resp.status_code == 302, (method.upper(), path, resp.status_code)
                    assert resp["Location"].startswith(("/login/", "/admin/login/")), (path, resp["Location"])
                assert MARKER_SCRIPT not in resp.content.decode(errors="replace")
    _job_unchanged(alice_job)
    for model in admin.site._registry:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        resp = client.get(url)
        assert resp.status_code == 302 and resp["Location"].startswith(("/login/", "/admin/login/")), url


def _ws_routes():
    from launcher.routing import websocket_urlpatterns

    return [(str(p.pattern), p) for p in websocket_urlpatterns if isinstance(p, URLPattern)]


@pytest.mark.django_db(transaction=True)
def test_websockets_refuse_other_users_and_anonymous(client, alice, bob, alice_job):
    routes = [(r, p) for r, p in _ws_routes() if _is_job_route(r) or set(_params(r)) & {"name", "pod", "task"}]
    if not routes:
        pytest.skip("no job websocket routes yet")
    from channels.testing import WebsocketCommunicator

    from launcher.asgi import application

    client.force_login(bob)
    session = client.cookies["sessionid"].value

    async def attempt(path: str, cookie: str | None) -> tuple[bool, list]:
        headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
        if cookie:
            headers.append((b"cookie", f"sessionid={cookie}".encode()))
        comm = WebsocketCommunicator(application, path, headers=headers)
        connected, _sub = await comm.connect(timeout=10)
        messages = []
        if connected:
            for _i in range(3):
                try:
                    msg = await comm.receive_output(timeout=3)
                except Exception:  # noqa: BLE001 - timeout: nothing sent
                    break
                messages.append(msg)
                if msg.get("type") == "websocket.close":
                    break
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await comm.disconnect()
        return connected, messages

    client.force_login(alice)
    owner_session = client.cookies["sessionid"].value
    for route, _p in routes:
        path = _fill(route, JOB)
        refusal_codes = set()
        for cookie in (session, None):
            connected, messages = async_to_sync(attempt)(path, cookie)
            closes = [m for m in messages if m.get("type") == "websocket.close"]
            assert not connected or closes, (path, "user B" if cookie else "anonymous", messages[:2])
            # a refusal may explain itself, but carries nothing of the job (no Pods, log lines or script)
            for leak in (POD, TASK, MARKER_SCRIPT, "Alice secret run"):
                assert leak not in str(messages), (path, leak, messages[:2])
            refusal_codes |= {m.get("code") for m in closes}
        # control: the owner passes the same handshake (so the refusals above are the policy, not the harness)
        connected, messages = async_to_sync(attempt)(path, owner_session)
        first = messages[0] if messages else {}
        assert connected, path
        assert not (first.get("type") == "websocket.close" and first.get("code") in refusal_codes), (path, first)
