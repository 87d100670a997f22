"""Selectors, generated names and rank layout (upstream-rlark 3, 4.2, 4.6)."""

from __future__ import annotations

import pytest

from clusters.selectors import SelectorError, format_selector, matches, parse_selector
from jobs.jobspec.layout import task_layout
from jobs.jobspec.naming import head_service_name, pvc_name, task_name, to_resource_name, volume_name


@pytest.mark.parametrize(
    ("raw", "slug"),
    [
        ("Actor", "actor"),
        ("New Role", "new-20-role"),
        ("Rollout Worker", "rollout-20-worker"),
        ("Env Worker", "env-20-worker"),
        ("-Ab_c-", "ab-5f-c"),
        ("my.job", "my.job"),
        ("训练", "8bad-7ec3"),
    ],
)
def test_to_resource_name_table(raw, slug):
    assert to_resource_name(raw) == slug


def test_names():
    assert task_name("j", "a") == "j-a"
    assert volume_name("/mnt/ckpt") == "mnt-ckpt"
    assert volume_name("/mnt/data/") == "mnt-data"
    assert volume_name("/") == "vol"
    assert pvc_name("ppo-job", "actor", "mnt-data") == "pvc-ppo-job-actor-mnt-data"
    assert head_service_name("demo-actor") == "demo-actor-ray-head"


def test_parse_selector_comma_alternatives():
    assert parse_selector("kubernetes.io/hostname=a,b,c,rlark.io/x=1") == {
        "kubernetes.io/hostname": "a,b,c",
        "rlark.io/x": "1",
    }
    assert parse_selector(" pool = head ") == {"pool": "head"}
    assert parse_selector("") == {}
    assert parse_selector({"a": 1}) == {"a": "1"}


@pytest.mark.parametrize("bad", ["a=b=c", "novalue", {"a": "x=y"}, "=v"])
def test_parse_selector_rejects(bad):
    with pytest.raises(SelectorError):
        parse_selector(bad)


def test_matches_upstream_cases():
    labels = {"disktype": "ssd", "arch": "arm64", "zone": "z1"}
    assert matches(None, labels)
    assert matches({"disktype": "ssd"}, labels)
    assert not matches({"disktype": "hdd"}, labels)
    assert matches({"disktype": "hdd, ssd ,nvme"}, labels)
    assert matches({"disktype": "ssd", "arch": "arm64"}, labels)
    assert not matches({"gpu": "true"}, labels)
    assert not matches({"disktype": "ssd", "arch": "amd64"}, labels)


def test_format_selector_roundtrip():
    sel = {"kubernetes.io/hostname": "a,b", "pool": "x"}
    assert format_selector(sel) == "kubernetes.io/hostname=a,b,pool=x"
    assert parse_selector(format_selector(sel)) == sel


def test_task_layout_worked_example():
    doc = {
        "metadata": {"name": "demo"},
        "spec": {
            "tasks": [
                {"name": "actor", "head": True, "role": "Actor", "kubernetes": {"workload": {"replicas": 2}}},
                {"name": "rollout", "role": "Rollout", "cluster": "c1", "kubernetes": {"workload": {"replicas": 3}}},
                {
                    "name": "env",
                    "role": "Env",
                    "kubernetes": {
                        "workload": {
                            "template": {
                                "spec": {
                                    "containers": [
                                        {"name": "main", "env": [{"name": "RLARK_TASK_ROLE", "value": "Env W"}]}
                                    ]
                                }
                            }
                        }
                    },
                },
            ]
        },
    }
    layout = task_layout(doc)
    assert [t.rank_start for t in layout] == [0, 2, 5]
    assert [t.replicas for t in layout] == [2, 3, 1]
    assert {t.total_nodes for t in layout} == {6}
    assert {t.head_task_name for t in layout} == {"demo-actor"}
    assert [t.task_name for t in layout] == ["demo-actor", "demo-rollout", "demo-env"]
    assert layout[0].head and not layout[1].head
    assert layout[1].cluster == "c1"
    assert layout[2].display_role == "Env W" and layout[0].display_role == "actor"
    assert [t.order for t in layout] == [0, 1, 2]


def test_task_layout_explicit_zero():
    doc = {"metadata": {"name": "j"}, "spec": {"tasks": [{"name": "a", "kubernetes": {"workload": {"replicas": 0}}}]}}
    assert task_layout(doc)[0].replicas == 0
    assert task_layout(doc)[0].total_nodes == 0
