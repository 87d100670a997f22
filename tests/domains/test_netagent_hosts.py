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


def _block(entries: str) -> str:
    return f"{netagent.BEGIN}\n{entries}{netagent.END}\n"


def test_a_half_written_block_is_replaced_without_duplicates_or_stale_entries(tmp_path):
    """The agent was killed while it wrote the block: ``BEGIN`` and one stale entry, no ``END``, then the kubelet's
    lines that followed it. The next write leaves one whole block with the current members and the kubelet's lines."""
    hosts_file = tmp_path / "hosts"
    stale = f"{netagent.BEGIN}\n10.100.0.9\txd-gone-0.rlark-domain\n10.100.0.1\txd-header-0.rlark-domain\n"
    hosts_file.write_text(KUBELET_HOSTS + stale + "10.219.64.21\txd-rollout-0\n")

    netagent.write_hosts_block(str(hosts_file), {"xd-header-0": "10.100.0.1", "xd-rollout-0": "10.100.0.2"})

    text = hosts_file.read_text()
    assert text.count(netagent.BEGIN) == 1 and text.count(netagent.END) == 1
    assert "xd-gone-0" not in text  # the stale member of the half-written block is gone
    assert text.count("xd-header-0.rlark-domain") == 1  # not duplicated
    assert "10.100.0.2\txd-rollout-0.rlark-domain" in text
    assert text.startswith(KUBELET_HOSTS)
    assert "10.219.64.21\txd-rollout-0\n" in text  # the kubelet's line after the broken block stays
    block = text[text.index(netagent.BEGIN) : text.index(netagent.END)]
    assert "10.219.64.21" not in block

    netagent.write_hosts_block(str(hosts_file), {"xd-header-0": "10.100.0.1", "xd-rollout-0": "10.100.0.2"})
    assert hosts_file.read_text() == text  # a second write changes nothing


def test_a_half_written_block_at_the_end_of_the_file_and_a_duplicate_block_collapse_into_one(tmp_path):
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text(
        KUBELET_HOSTS
        + _block("10.100.0.1\txd-header-0.rlark-domain\n")
        + _block("10.100.0.7\txd-old-0.rlark-domain\n")
        + f"{netagent.BEGIN}\n10.100.0.8\txd-old-1.rlark-d"  # cut mid-line: the disk filled
    )

    netagent.write_hosts_block(str(hosts_file), {"xd-header-0": "10.100.0.1"})

    assert hosts_file.read_text() == KUBELET_HOSTS + _block("10.100.0.1\txd-header-0.rlark-domain\n")
