"""The network agent keeps its ``/etc/hosts`` block (docs/network-domains.md; upstream-rlark 12.1).

On Kubernetes the kubelet writes a Pod's hosts file anew whenever one of the Pod's containers starts, so the block
the native sidecar wrote before ``main`` started is gone when the Ray head looks up ``<pod>.rlark-domain``; and the
Secret that carries the agent's config is updated in place when members join. The agent must put the block back
and follow the config's ``hosts``.
"""

from __future__ import annotations

import asyncio
import json

from domains import netagent

KUBELET_HOSTS = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n10.219.64.20\txd-header-0\n"


def _run_keeper(agent: netagent.Agent, steps) -> None:
    async def scenario():
        keeper = asyncio.ensure_future(agent.keep_hosts())
        try:
            for step in steps:
                await step()
        finally:
            keeper.cancel()

    asyncio.run(asyncio.wait_for(scenario(), 30))


async def _until(predicate, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.1)):
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_block_comes_back_after_the_kubelet_rewrites_the_file_and_follows_new_members(tmp_path, monkeypatch):
    monkeypatch.setattr(netagent, "HOSTS_EVERY", 0.2)
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text(KUBELET_HOSTS)
    config_path = tmp_path / "xd-header-0.json"
    config = {"hosts_file": str(hosts_file), "hosts": {"xd-header-0": "10.100.0.1"}}
    config_path.write_text(json.dumps(config))
    agent = netagent.Agent(dict(config), str(config_path))
    inode = hosts_file.stat().st_ino

    async def written():
        await _until(lambda: "10.100.0.1\txd-header-0.rlark-domain" in hosts_file.read_text())

    async def kubelet_rewrites():  # a container of the Pod started: ensureHostsFile writes the file anew
        hosts_file.write_text(KUBELET_HOSTS)
        await _until(lambda: "xd-header-0.rlark-domain" in hosts_file.read_text())

    async def member_joins():
        config["hosts"]["xd-rollout-0"] = "10.100.0.2"
        config_path.write_text(json.dumps(config))
        await _until(lambda: "10.100.0.2\txd-rollout-0.rlark-domain" in hosts_file.read_text())

    _run_keeper(agent, [written, kubelet_rewrites, member_joins])
    text = hosts_file.read_text()
    assert text.startswith(KUBELET_HOSTS)  # the kubelet's lines stay
    assert text.count(netagent.BEGIN) == 1 and text.count(netagent.END) == 1
    assert hosts_file.stat().st_ino == inode  # in place: the Pod's containers share this file by a bind mount


def test_an_unreadable_config_keeps_the_hosts_it_had(tmp_path, monkeypatch):
    monkeypatch.setattr(netagent, "HOSTS_EVERY", 0.2)
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text(KUBELET_HOSTS)
    config_path = tmp_path / "xd-header-0.json"
    config_path.write_text("{not json")  # a Secret caught mid-update
    agent = netagent.Agent({"hosts_file": str(hosts_file), "hosts": {"xd-header-0": "10.100.0.1"}}, str(config_path))

    async def written():
        await _until(lambda: "10.100.0.1\txd-header-0.rlark-domain" in hosts_file.read_text())

    _run_keeper(agent, [written])
