"""W&B and SwanLab run links, as a run's log first shows them.

RLinf's ``MetricLogger`` (``rlinf/utils/metric_logger.py``) calls ``wandb.init`` / ``swanlab.init`` when
``runner.logger.logger_backends`` lists ``wandb`` / ``swanlab``; both clients then print the run's address, e.g.
``wandb: 🚀 View run ppo at: https://wandb.ai/team/rlinf/runs/abc123`` and
``swanlab: 🚀 View run at https://swanlab.cn/@alice/rlinf/runs/xyz789``. :func:`collect` keeps the first
:data:`PER_SERVICE` distinct such ``https`` addresses per service while the per-Pod log scan
(``jobs.observe.log_scans``) reads the Header's and the Workers' logs, so a link appears within one refresh of
its line. :func:`job_links` gives the page the links whose host is allowed: ``wandb.ai``, ``swanlab.cn`` and the
hosts of the job owner's self-hosted credentials (``accounts.tracking.link_hosts``); any other address is dropped.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from accounts.tracking import link_hosts

SERVICES = {"wandb": "W&B", "swanlab": "SwanLab"}
MAX_URL = 300  # characters kept of one address; a longer one is not a run link
PER_SERVICE = 4  # addresses kept per service and log: the first allowed one is shown
MAX_LOOKS = 64  # "View " lines looked at per chunk: a log full of them costs no more than this
_LINE = re.compile(r"(wandb|swanlab): .{0,80}?View (?:run|project)\b.{0,200}?(https://[^\s\"'<>`]{1,300})")


def _full(links: dict[str, list[str]]) -> bool:
    return all(len(links.get(s) or []) >= PER_SERVICE for s in SERVICES)


def collect(links: dict[str, list[str]], hay: str) -> None:
    """Add to ``links`` (service -> addresses, in log order) the ``https`` run addresses of ``hay`` (lines joined
    by ``\\n``), at most :data:`PER_SERVICE` distinct ones per service. Linear in ``hay``; at most
    :data:`MAX_LOOKS` candidate lines are matched per call."""
    if _full(links) or "View " not in hay:
        return
    at = 0
    for _ in range(MAX_LOOKS):
        at = hay.find("View ", at)
        if at == -1:
            return
        start = hay.rfind("\n", 0, at) + 1
        end = hay.find("\n", at)
        end = len(hay) if end == -1 else end
        match = _LINE.search(hay[start : min(end, start + 1000)])
        if match:
            kept = links.setdefault(match.group(1), [])
            url = match.group(2).rstrip(".,;)")
            if url not in kept and len(kept) < PER_SERVICE:
                kept.append(url)
                if _full(links):
                    return
        at = end


def allowed(url: str, hosts: set[str]) -> bool:
    """True for an ``https`` address without user info whose host is one of ``hosts`` (lower case)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme == "https" and "@" not in parts.netloc and (parts.hostname or "") in hosts


def job_links(job, scans) -> list[dict[str, str]]:
    """``[{service, label, url}]`` for ``job``: per service, the Header's first link, else the first Worker's
    (``scans``: ``log_scans.Scans`` of the job, in task order, whose ``links`` are Pod name -> service ->
    addresses); only addresses :func:`allowed` for the job's owner."""
    hosts = link_hosts(job.owner)
    found: dict[str, str] = {}
    for links in scans.links.values():
        for service, urls in links.items():
            for url in urls if isinstance(urls, list) else []:
                if service in SERVICES and service not in found and isinstance(url, str) and allowed(url, hosts):
                    found[service] = url
    return [{"service": s, "label": SERVICES[s], "url": found[s]} for s in SERVICES if s in found]
