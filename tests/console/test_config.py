"""One typed settings object (``rlark_config``): every setting is read from the environment in one place.

- no module of the console reads an ``RLARK_*`` variable itself (``os.environ[...]``, ``os.environ.get``,
  ``os.getenv``, ``environ.get``, ``in os.environ``), except the Worker-side files below, ``rlark_config`` and the
  ``rlark`` client;
- the README's configuration table is the one ``python -m rlark_config --markdown`` makes;
- :func:`rlark_config.load` keeps each default, reads each variable by its field's rule and names the variable of
  a bad value; :func:`rlark_config.current` reads again when the environment changed;
- Django's ``RLARK_*`` settings are the object's values; ``rlark_config`` uses the standard library only.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

import pytest

import rlark_config
from rlark_config import schema, table
from tools.arch import graph, pysource

ROOT = Path(__file__).resolve().parents[2]

# The Pod's side of the contract: these run inside a Worker (not in the console) and read what the console sets
# into the Worker's environment (jobs/jobspec/manifests.py, clusters/runtime/local/launcher.py and supervision.py).
WORKER_SIDE = {
    "clusters/scripts/ray_check.py": "the readiness check of a Worker's Ray node (RLARK_RAY_CHECK_*)",
    "clusters/scripts/local/rlark_ray_local.py": "`ray start` of a local Worker (RLARK_LOCAL_RUNTIME, _NODE_IP, ...)",
    "clusters/scripts/local/sitecustomize.py": "the Ray patch of a local Worker's Python (RLARK_LOCAL_RUNTIME)",
}
# Whole packages that read RLARK_ variables by design.
OWN_ENVIRONMENT = {
    "rlark_config": "the settings themselves",
    "rlark_cli": "the `rlark` client on users' machines: its own RLARK_URL, RLARK_TOKEN, RLARK_CONFIG, RLARK_LANG",
}


def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` or a bare ``environ``."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _rlark_literal(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("RLARK_"):
        return node.value
    return None


def environment_reads(source: str) -> list[tuple[int, str]]:
    """``(line, variable)`` of every read of an ``RLARK_*`` variable named by a literal in ``source``."""
    found = []
    for node in ast.walk(pysource.parse(source)):
        name = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            name = _rlark_literal(node.slice)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
            func = node.func
            if (func.attr == "get" and _is_environ(func.value)) or func.attr == "getenv":
                name = _rlark_literal(node.args[0])
        elif isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Name) and node.func.id == "getenv":
            name = _rlark_literal(node.args[0])
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn):
            if _is_environ(node.comparators[0]):
                name = _rlark_literal(node.left)
        if name:
            found.append((node.lineno, name))
    return found


def test_no_module_reads_an_rlark_variable_but_the_settings():
    reads = []
    for package in graph.PACKAGES:
        if package in OWN_ENVIRONMENT:
            continue
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in WORKER_SIDE:
                continue
            reads += [f"{rel}:{line} {name}" for line, name in environment_reads(path.read_text(encoding="utf-8"))]
    assert reads == [], "read these through rlark_config (a field in rlark_config/schema.py): " + ", ".join(reads)


def test_the_worker_side_files_exist_and_read_the_pods_environment():
    for rel in WORKER_SIDE:
        assert environment_reads((ROOT / rel).read_text(encoding="utf-8")), rel


@pytest.mark.parametrize(
    "line",
    [
        'os.environ["RLARK_X"]',
        'os.environ.get("RLARK_X", "1")',
        'os.getenv("RLARK_X")',
        'getenv("RLARK_X")',
        'environ.get("RLARK_X")',
        '"RLARK_X" in os.environ',
    ],
)
def test_the_scan_finds_each_way_of_reading(line):
    assert environment_reads(f"import os\nvalue = {line}\n") == [(2, "RLARK_X")]


def test_the_scan_leaves_writes_and_other_variables_alone():
    source = 'import os\nos.environ["RLARK_X"] = "1"\nenv = {**os.environ, "RLARK_Y": "2"}\nos.environ.get("PATH")\n'
    assert environment_reads(source) == []


def test_the_readme_table_is_made_from_the_settings():
    readme = table.README.read_text(encoding="utf-8")
    assert table.with_table(readme) == readme, "run: python -m rlark_config --readme"


def test_every_setting_has_its_variable_and_doc():
    envs = [f.metadata["env"] for f in schema.fields()]
    assert len(envs) == len(set(envs)) == len(rlark_config.ENV_NAMES)
    for f in schema.fields():
        assert f.metadata["doc"] and "\n" not in f.metadata["doc"], f.name
        assert callable(f.metadata["parse"]), f.name


def test_an_empty_environment_gives_the_defaults():
    config = rlark_config.load({})
    assert config == rlark_config.Config()
    assert config.var_dir == ROOT / "var" and config.local_root == ROOT / "var" / "local"
    assert (config.sync_interval, config.crashloop_limit, config.image_pull_grace, config.sync_threads) == (
        10.0,
        3,
        120.0,
        16,
    )


def test_each_variable_is_read_by_its_own_rule(tmp_path):
    config = rlark_config.load(
        {
            "RLARK_VAR_DIR": str(tmp_path),
            "ALLOWED_HOSTS": " a.example, ,b.example",
            "DEBUG": " Yes ",
            "RLARK_LOCAL_RAY_DASHBOARD": "true",  # only "1" switches it on
            "RLARK_LOCAL_JOB_NETWORKS": "no",  # only "0" switches it off
            "RLARK_SSH_DEBUG": "0",  # any value switches it on
            "RLARK_WEB_WORKERS": "99",  # pulled into 1..32
            "RLARK_DB_POOL": "",  # set but empty: no pool
            "RLARK_SSH_PUBLIC_PORT": "",
            "RLARK_LOCAL_HIDE": "/a::/b",
            "RLARK_SECRET_KEY": "",
        }
    )
    assert config.local_root == tmp_path / "local"  # follows RLARK_VAR_DIR unless set
    assert config.allowed_hosts == ("a.example", "b.example") and config.debug
    assert not config.local_ray_dashboard and config.local_job_networks and config.ssh_debug
    assert (config.web_workers, config.db_pool, config.ssh_public_port) == (32, 0, None)
    assert config.local_hide == ("/a", "/b") and config.secret_key is None


@pytest.mark.parametrize(
    ("env", "value", "reason"),
    [
        ("RLARK_SYNC_INTERVAL", "soon", "'soon' is not a number"),
        ("RLARK_SSH_PORT", "22.5", "'22.5' is not an integer"),
        ("RLARK_PORT", "70000", "'70000' is outside 0..65535"),
        ("RLARK_K8S_READ_TIMEOUT", "-1", "'-1' is less than 0"),
        ("RLARK_DOMAIN_RELAY_LISTEN", "10.0.0.1,console", "'console' is not an IPv4 address"),
    ],
)
def test_a_bad_value_is_refused_by_its_variables_name(env, value, reason):
    with pytest.raises(rlark_config.ConfigError) as err:
        rlark_config.load({env: value})
    assert str(err.value) == f"{env}: {reason}"


def test_current_reads_again_when_the_environment_changes(monkeypatch):
    monkeypatch.delenv("RLARK_SSH_KEEPALIVE", raising=False)
    first = rlark_config.current()
    assert rlark_config.current() is first and first.ssh_keepalive == 30.0
    monkeypatch.setenv("RLARK_SSH_KEEPALIVE", "1")
    assert rlark_config.current().ssh_keepalive == 1.0


def test_djangos_rlark_settings_are_the_objects_values():
    from django.conf import settings

    config = rlark_config.current()
    shared = [f for f in dataclasses.fields(config) if f.metadata["env"].startswith("RLARK_")]
    compared = 0
    for f in shared:
        env = f.metadata["env"]
        if not hasattr(settings, env):
            continue
        value = getattr(config, f.name)
        mine = list(value) if isinstance(value, tuple) else value
        if env.endswith("_KEY") and value is None:
            continue  # generated in var/ when unset
        assert getattr(settings, env) == mine, env
        compared += 1
    assert compared >= 20
    assert settings.VAR_DIR == config.var_dir and settings.DEBUG == config.debug


def test_the_settings_package_uses_the_standard_library_only():
    for path in sorted((ROOT / "rlark_config").glob("*.py")):
        for node in ast.walk(pysource.parse_file(path)):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in ("rlark_config", "__future__"), (path.name, name)
