"""deploy/rbac.yaml grants exactly what KubernetesRuntime.ping() checks, and nothing dangerous."""

from __future__ import annotations

from pathlib import Path

import yaml

from clusters.runtime.kubernetes.access import CLUSTER_VERBS, NAMESPACED_VERBS

DOCS = [d for d in yaml.safe_load_all((Path(__file__).parents[2] / "deploy" / "rbac.yaml").read_text()) if d]


def rules(kind: str) -> list[dict]:
    return [r for d in DOCS if d["kind"] == kind for r in d["rules"]]


def grants(rule_list, verb, group, resource, sub) -> bool:
    full = f"{resource}/{sub}" if sub else resource
    return any(
        group in r.get("apiGroups", []) and full in r.get("resources", []) and verb in r.get("verbs", [])
        for r in rule_list
    )


def test_every_checked_verb_is_granted():
    for verb, group, resource, sub in NAMESPACED_VERBS:
        assert grants(rules("Role"), verb, group, resource, sub), (verb, resource, sub)
    for verb, group, resource, sub in CLUSTER_VERBS:
        assert grants(rules("ClusterRole"), verb, group, resource, sub), (verb, resource, sub)


def test_nothing_dangerous_and_bound_to_the_service_account():
    everything = rules("Role") + rules("ClusterRole")
    for r in everything:
        assert "*" not in r["verbs"] and "*" not in r["resources"] and "*" not in r["apiGroups"]
        assert not {"nodes/proxy", "pods/attach", "pods/portforward"} & set(r["resources"])
        assert not {"escalate", "bind", "impersonate"} & set(r["verbs"])
    # secrets only in the namespace, never cluster-wide
    assert not any("secrets" in r["resources"] for r in rules("ClusterRole"))
    bindings = [d for d in DOCS if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert len(bindings) == 2
    assert all(
        b["subjects"] == [{"kind": "ServiceAccount", "name": "rlark-console", "namespace": "rlark-system"}]
        for b in bindings
    )
    # both get and create on pods/exec (websocket exec used get; KEP-4006 requires create)
    assert grants(rules("Role"), "get", "", "pods", "exec") and grants(rules("Role"), "create", "", "pods", "exec")
