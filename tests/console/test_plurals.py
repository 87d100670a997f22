"""Counts read as a person would write them in en ("1 node", "2 nodes"; never "1 workers"), and in zh without
plural forms (ngettext where counts appear): back-office cordon messages and the wizard's summary."""

from __future__ import annotations

import re

import pytest

from clusters.models import Cluster, Node

pytestmark = pytest.mark.django_db


def _cordon(client, nodes, lang: str) -> list[str]:
    resp = client.post(
        "/admin/clusters/node/",
        {"action": "cordon", "_selected_action": [n.pk for n in nodes]},
        follow=True,
        HTTP_ACCEPT_LANGUAGE=lang,
    )
    return [str(m) for m in resp.context["messages"]]


def test_cordon_message_counts_in_both_languages(client, admin_user):
    cluster = Cluster.objects.create(name="c", runtime="local", status="online")
    nodes = [Node.objects.create(cluster=cluster, name=f"n{i}") for i in range(2)]
    client.force_login(admin_user)
    assert _cordon(client, nodes[:1], "en") == ["Cordoned 1 node."]
    assert _cordon(client, nodes, "en") == ["Cordoned 2 nodes."]
    assert _cordon(client, nodes[:1], "zh-hans") == ["已封锁 1 个节点。"]


def test_wizard_summary_counts_workers(client, admin_user):
    Cluster.objects.create(name="local", runtime="local", status="online")
    client.force_login(admin_user)
    page = client.get("/jobs/new/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    summaries = re.findall(r'data-testid="summary-\d+">([^<]+)<', page)
    assert summaries and all(not re.search(r"\b1 workers\b", s) for s in summaries), summaries
    assert any(re.search(r"\b1 worker configured\b", s) for s in summaries), summaries


def test_validator_messages_use_english_plurals():
    """No "1 workers" / "1 nodes" in the validator's English messages (jobs/jobspec/messages.py)."""
    from jobs.jobspec.messages import Problem

    one = Problem("spec.tasks[0]", "replicas_mismatch", params={"role": "rollout", "replicas": 1, "count": 1})
    many = Problem("spec.tasks[0]", "replicas_mismatch", params={"role": "rollout", "replicas": 3, "count": 2})
    assert "has 1 worker, but its node selector matches 1 node across" in one.message("en")
    assert "has 3 workers, but its node selector matches 2 nodes across" in many.message("en")
    assert "Worker 数为 1" in one.message("zh-hans")
    total = Problem("spec", "num_nodes_mismatch", params={"workers": 1, "num_nodes": 2})
    assert "have 1 worker in total" in total.message("en")
