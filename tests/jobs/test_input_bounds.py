"""No request can freeze the console. Every user-controlled size is bounded before a regex or
an allocation sees it; the secret detection is linear (timed as a RATIO of 1 MB to 1 KB inputs, never as an
absolute time, so a loaded CI machine does not make it flaky); the RLinf planner caps ``cluster.num_nodes``."""

from __future__ import annotations

import time

import pytest
from rest_framework.test import APIClient

from jobs.jobspec import rlinf
from jobs.jobspec.document import normalize
from jobs.jobspec.ranks import parse_rank_config
from jobs.jobspec.validator import MAX_REPLICAS, MAX_VALUE_BYTES, _looks_secret_value, _script_has_secret, validate
from tests.spec_fixtures import base_doc, container, inventory

KB = 1024
MB = 1024 * KB
# Hostile shapes for the old patterns: long scheme-like runs without "://", many "://" without userinfo, token
# prefixes repeated (each a new start), userinfo without "@".
SHAPES = {
    "letters": lambda n: "a" * n,
    "scheme_runs": lambda n: ("a" * 60 + " ") * (n // 61),
    "many_schemes": lambda n: "a://" * (n // 4),
    "digit_schemes": lambda n: "1://b:c@" * (n // 8),
    "userinfo_no_at": lambda n: "a://b:" + "c" * (n - 6),
    "token_prefixes": lambda n: "sk-" * (n // 3),
    "slack_prefixes": lambda n: "xoxb-" * (n // 5),
    "key_header": lambda n: "-----BEGIN " + "A" * (n - 11),
    "assignments": lambda n: " x='" * (n // 4),
}
# Linear work grows 1024x from 1 KB to 1 MB; quadratic work grows ~10^6x (the old pattern: 1 KB in 2.5 ms, 64 KB
# in 7.7 s). Cache misses and a loaded CI machine push a linear ratio to a few thousand, so the bound leaves room
# and still tells linear from quadratic by 50x.
LINEAR_BOUND = 20_000


def _best_time(fn, arg, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-6)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_secret_detection_is_linear(shape):
    make = SHAPES[shape]
    small, big = make(KB), make(MB)
    for fn in (_looks_secret_value, _script_has_secret):
        ratio = _best_time(fn, big, 3) / _best_time(fn, small, 50)
        assert ratio < LINEAR_BOUND, f"{fn.__name__} on {shape}: 1 MB costs {ratio:.0f}x 1 KB"


def test_secret_detection_still_finds_url_passwords_and_tokens():
    assert _looks_secret_value("postgres://rl:hunter2@db:5432/x")
    assert _looks_secret_value("x " * 5000 + "HTTPS://user:pw@host/")
    assert not _looks_secret_value("https://example.com/a://b")
    assert not _looks_secret_value("https://user@host/")  # a user without a password is fine
    assert _looks_secret_value("sk-" + "a" * 40)
    assert not _looks_secret_value("sk-short")
    assert _script_has_secret("export HF_TOKEN=abc123 && python train.py")


def _doc_with_env(value: str, script: str = "python train.py") -> dict:
    doc = base_doc()
    container(doc, 0).setdefault("env", []).append({"name": "BIG", "value": value})
    doc["spec"]["tasks"][0]["runScript"] = script
    return normalize(doc)


def test_validator_time_ratio_1mb_against_1kb():
    inv = inventory()
    small = _doc_with_env("a" * KB, "a" * KB)
    big = _doc_with_env("a" * MB, "a" * MB)
    near_cap = _doc_with_env("a" * (MAX_VALUE_BYTES - 1), "sk-" * (MAX_VALUE_BYTES // 3))
    t_small = _best_time(lambda d: validate(d, inv), small, 20)
    t_big = _best_time(lambda d: validate(d, inv), big, 3)
    t_cap = _best_time(lambda d: validate(d, inv), near_cap, 3)
    assert t_big / t_small < LINEAR_BOUND, f"1 MB document costs {t_big / t_small:.0f}x the 1 KB one"
    assert t_cap / t_small < LINEAR_BOUND, f"a document at the size cap costs {t_cap / t_small:.0f}x the 1 KB one"


def test_oversized_env_value_and_script_are_clear_errors():
    result = validate(_doc_with_env("a" * MB, "b" * (200 * KB)), inventory())
    too_long = [p for p in result.errors if p.code == "value_too_long"]
    assert {p.path.rsplit(".", 1)[-1] for p in too_long} == {"value", "runScript"}
    env_problem = next(p for p in too_long if p.path.endswith("value"))
    assert f"at most {MAX_VALUE_BYTES} bytes" in env_problem.message("en")
    assert "字节" in env_problem.message("zh-hans")


def test_replicas_are_capped():
    doc = base_doc()
    doc["spec"]["tasks"][1]["kubernetes"]["workload"]["replicas"] = 10**12
    start = time.perf_counter()
    result = validate(normalize(doc), inventory(), rlinf_config="cluster: {num_nodes: 3}")
    assert time.perf_counter() - start < 5
    problem = next(p for p in result.errors if p.code == "replicas_too_large")
    assert str(MAX_REPLICAS) in problem.message("en")


def test_rank_ranges_do_not_expand_unbounded():
    with pytest.raises(ValueError, match="spans more than"):
        parse_rank_config("0-1000000000")
    start = time.perf_counter()
    result = rlinf.plan(
        "cluster:\n  num_nodes: 2\n  component_placement:\n    actor: 0-1000000000\n"
        "    rollout: {node_group: g, placement: '0-999999999999'}\n"
        "  node_groups:\n  - {label: g, node_ranks: 0-1}\n"
    )
    assert time.perf_counter() - start < 2
    assert result.num_nodes == 2


def test_rank_budget_bounds_many_groups():
    groups = "".join(f"  - {{label: g{i}, node_ranks: all}}\n" for i in range(40))
    result = rlinf.plan(f"cluster:\n  num_nodes: {rlinf.MAX_NUM_NODES}\n  node_groups:\n{groups}")
    assert "rlinf_config_too_large" in [p.code for p in result.problems]


def test_yaml_alias_bomb_is_refused():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i, prev in zip("bcdefgh", "abcdefg", strict=True):
        bomb += f"{i}: &{i} [{', '.join(['*' + prev] * 10)}]\n"
    result = rlinf.plan(bomb + "cluster: {num_nodes: 1, node_groups: *h}\n")
    assert [p.code for p in result.problems] == ["rlinf_config_too_large"]


@pytest.mark.django_db
def test_plan_api_caps_num_nodes_quickly(alice):
    api = APIClient()
    api.force_authenticate(alice)
    start = time.perf_counter()
    r = api.post("/api/v1/rlinf/plan/", "cluster:\n  num_nodes: 1000000000\n", content_type="application/yaml")
    assert time.perf_counter() - start < 5
    assert r.status_code == 400
    assert [p["code"] for p in r.json()["problems"]] == ["rlinf_num_nodes_too_large"]
    assert "10000" in r.json()["problems"][0]["message"] and "不能超过" in r.json()["problems"][0]["message"]
    en = api.post(
        "/api/v1/rlinf/plan/", {"config": "cluster: {num_nodes: 10001}"}, format="json", HTTP_ACCEPT_LANGUAGE="en"
    )
    assert en.status_code == 400 and "cannot be more than 10000" in en.json()["problems"][0]["message"]
    ok = api.post("/api/v1/rlinf/plan/", f"cluster: {{num_nodes: {rlinf.MAX_NUM_NODES}}}", content_type="text/yaml")
    assert ok.status_code == 200 and ok.json()["workers"] == rlinf.MAX_NUM_NODES


def test_wizard_counts_are_bounded_by_the_submitted_fields():
    from django.http import QueryDict

    from jobs.control.wizard import from_post

    data = QueryDict(mutable=True)
    data.update({"role_count": "1000000000", "r0-name": "head", "r0-env_count": "1000000000", "r0-mnt_count": "99"})
    start = time.perf_counter()
    state = from_post(data)
    assert time.perf_counter() - start < 2
    assert len(state.roles) <= len(data) and all(len(r.env) <= len(data) for r in state.roles)
