"""RLark demo workload: an RLinf-style multi-node Ray run at toy scale.

Run on the Ray head after the wrapper reports ``Ray cluster is ready`` (the job's ``runScript``)::

    python /rlark/examples/demo/train.py --config /rlark/examples/demo/demo.yaml --output /output

What it does, in RLinf's order (see reference/rlinf.md 3 and 7):

1. Reads the RLinf config's ``cluster:`` section (``num_nodes``, ``node_groups``, ``component_placement``);
   any RLinf YAML works (e.g. ``emb_realworld_charger_sac_cnn_async.yaml``).
2. ``ray.init(address="auto", namespace="RLinf")`` and waits for ``num_nodes`` alive Ray nodes, logging
   ``Waiting for N nodes to be ready, currently k nodes available.`` every second.
3. Runs one Ray task pinned to every node that reads the node's ``RLINF_NODE_RANK`` (set by the RLark
   wrapper before ``ray start``), logs one line per node with its confirmed rank and node groups, and checks
   that the ranks are exactly ``0..num_nodes-1``.
4. Logs ``RLinf is running on a cluster with N nodes and M accelerators.``
5. Places a learner actor on rank 0 (the head) and rollout actors on the other nodes (on the head when
   ``num_nodes`` is 1), then trains a linear softmax policy on Gymnasium ``CartPole-v1`` with REINFORCE
   (numpy only): each global step the rollouts collect episodes with the current weights, the learner
   takes a gradient step. Prints ``Global Step: k/N | ...`` with metrics (about one per ``--step-interval``),
   writes TensorBoard event files (tensorboardX) to ``<output>/<run>/tensorboard/`` and checkpoints to
   ``<output>/<run>/checkpoints/global_step_<k>/actor/`` (``policy.npz`` + ``meta.json``).

Exit code 0 on success; 1 when the cluster does not form within ``--wait-timeout`` s or ranks are invalid.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import yaml


def log(level: str, msg: str) -> None:
    print(f"[{level} {datetime.now():%H:%M:%S} RLinf] {msg}", flush=True)


def parse_ranks(value, available: list[int]) -> list[int]:
    """RLinf rank expression (``0``, ``"0-1"``, ``"0,2"``, ``"all"``) -> sorted rank list."""
    text = str(value).strip()
    if text.lower() == "all":
        return sorted(available)
    out: set[int] = set()
    for piece in text.split(","):
        piece = piece.strip()
        if not piece:
            continue
        ends = [int(p) for p in piece.split("-")]
        if len(ends) == 1:
            out.add(ends[0])
        else:
            if ends[0] > ends[1]:
                raise ValueError(f"invalid rank range {piece!r}")
            out.update(range(ends[0], ends[1] + 1))
    return sorted(out)


def node_groups(cluster: dict, num_nodes: int) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for g in cluster.get("node_groups") or []:
        groups[str(g["label"])] = parse_ranks(g.get("node_ranks", "all"), list(range(num_nodes)))
    return groups


def placement_summary(cluster: dict, groups: dict[str, list[int]]) -> list[str]:
    lines = []
    for comp, spec in (cluster.get("component_placement") or {}).items():
        if isinstance(spec, dict):
            group = spec.get("node_group")
            labels = group if isinstance(group, list) else [s.strip() for s in str(group).split(",")]
            ranks = sorted({r for lbl in labels for r in groups.get(str(lbl), [])})
            lines.append(f"Component {comp}: node group {','.join(map(str, labels))} (node ranks {ranks})")
        else:
            lines.append(f"Component {comp}: accelerator ranks {spec}")
    return lines


# ---- the policy (numpy REINFORCE) ------------------------------------------------------------------------


def softmax_policy(weights: np.ndarray, obs: np.ndarray) -> np.ndarray:
    logits = obs @ weights
    logits -= logits.max()
    p = np.exp(logits)
    return p / p.sum()


def make_actors(ray):
    @ray.remote(num_cpus=0)
    class Rollout:
        """Collects CartPole episodes with the learner's current weights on its own node."""

        def __init__(self, seed: int):
            import gymnasium as gym

            self.env = gym.make("CartPole-v1")
            self.rng = np.random.default_rng(seed)
            self.seed = seed

        def where(self) -> dict:
            return {"rank": os.environ.get("RLINF_NODE_RANK"), "host": socket.gethostname()}

        def collect(self, weights: np.ndarray, episodes: int, gamma: float) -> dict:
            obs_l, act_l, ret_l, lengths = [], [], [], []
            for _ in range(episodes):
                obs, _ = self.env.reset(seed=int(self.rng.integers(1 << 30)))
                traj_obs, traj_act, rewards = [], [], []
                done = False
                while not done:
                    x = np.append(obs, 1.0)
                    p = softmax_policy(weights, x)
                    a = int(self.rng.choice(2, p=p))
                    traj_obs.append(x)
                    traj_act.append(a)
                    obs, r, term, trunc, _ = self.env.step(a)
                    rewards.append(r)
                    done = term or trunc
                g, returns = 0.0, []
                for r in reversed(rewards):
                    g = r + gamma * g
                    returns.append(g)
                returns.reverse()
                obs_l += traj_obs
                act_l += traj_act
                ret_l += returns
                lengths.append(len(rewards))
            return {
                "obs": np.array(obs_l),
                "actions": np.array(act_l),
                "returns": np.array(ret_l),
                "lengths": lengths,
            }

    @ray.remote(num_cpus=0)
    class Learner:
        """Holds the policy weights on the head node and applies REINFORCE updates."""

        def __init__(self, lr: float, seed: int):
            self.w = np.random.default_rng(seed).normal(0, 0.01, size=(5, 2))
            self.lr = lr

        def where(self) -> dict:
            return {"rank": os.environ.get("RLINF_NODE_RANK"), "host": socket.gethostname()}

        def weights(self) -> np.ndarray:
            return self.w

        def update(self, batches: list[dict]) -> dict:
            obs = np.concatenate([b["obs"] for b in batches])
            acts = np.concatenate([b["actions"] for b in batches])
            rets = np.concatenate([b["returns"] for b in batches])
            adv = (rets - rets.mean()) / (rets.std() + 1e-8)
            grad = np.zeros_like(self.w)
            loss = 0.0
            for x, a, A in zip(obs, acts, adv, strict=True):
                p = softmax_policy(self.w, x)
                onehot = np.eye(2)[a]
                grad += np.outer(x, (onehot - p)) * A
                loss -= np.log(p[a] + 1e-8) * A
            grad /= len(obs)
            self.w += self.lr * grad
            return {"loss": float(loss / len(obs)), "grad_norm": float(np.linalg.norm(grad))}

    return Rollout, Learner


# ---- main -------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_config = str(Path(__file__).with_name("demo.yaml"))
    parser.add_argument("--config", default=os.environ.get("RLARK_DEMO_CONFIG", default_config))
    parser.add_argument("--output", default=os.environ.get("RLARK_DEMO_OUTPUT", "/output"))
    parser.add_argument("--run-name", default=os.environ.get("RLARK_DEMO_RUN", ""))
    parser.add_argument("--steps", type=int, default=int(os.environ.get("RLARK_DEMO_STEPS", "0")) or None)
    parser.add_argument("--save-interval", type=int, default=None)
    parser.add_argument("--episodes", type=int, default=4, help="episodes per rollout actor per step")
    parser.add_argument("--step-interval", type=float, default=float(os.environ.get("RLARK_DEMO_STEP_INTERVAL", "1")))
    parser.add_argument("--wait-timeout", type=float, default=600.0)
    parser.add_argument("--address", default="auto")
    return parser.parse_args(argv)


def wait_for_nodes(ray, num_nodes: int, timeout: float) -> list[dict] | None:
    """The alive Ray nodes once there are ``num_nodes`` (logging every second while waiting); None after
    ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        if len(alive) >= num_nodes:
            return alive
        log("WARNING", f"Waiting for {num_nodes} nodes to be ready, currently {len(alive)} nodes available.")
        if time.monotonic() > deadline:
            log("ERROR", f"Cluster did not reach {num_nodes} nodes within {timeout:.0f}s.")
            return None
        time.sleep(1)


def confirm_ranks(ray, alive: list[dict], cluster: dict, num_nodes: int) -> list[dict] | None:
    """Each alive node's ``RLINF_NODE_RANK`` (a Ray task pinned to it), logged with its node groups: the nodes of
    ranks ``0..num_nodes-1`` in rank order (node info + ``rank``, ``host``, ``python``); None (logged) when a rank
    is missing, repeated or not continuous."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    def probe() -> dict:
        return {
            "rank": os.environ.get("RLINF_NODE_RANK"),
            "host": socket.gethostname(),
            "python": sys.executable,
        }

    refs = {
        n["NodeID"]: probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
        for n in alive
    }
    infos = {node_id: ray.get(ref, timeout=120) for node_id, ref in refs.items()}
    groups = node_groups(cluster, num_nodes)
    by_rank: dict[int, dict] = {}
    for n in alive:
        info = infos[n["NodeID"]]
        if info["rank"] is None:
            log("ERROR", f"Node {n['NodeManagerAddress']} ({info['host']}) has no RLINF_NODE_RANK set.")
            return None
        rank = int(info["rank"])
        member = [g for g, ranks in groups.items() if rank in ranks]
        log(
            "INFO",
            f"Node {n['NodeID'][:12]} ({info['host']}, {n['NodeManagerAddress']}) confirmed RLINF_NODE_RANK={rank}"
            + (f", node groups: {','.join(member)}" if member else ""),
        )
        if rank in by_rank:
            log("ERROR", f"Node ranks should be unique and continuous: rank {rank} appears twice.")
            return None
        by_rank[rank] = {**n, **info}
    if len(by_rank) > num_nodes:
        log("WARNING", f"{len(by_rank)} nodes are alive but num_nodes is {num_nodes}; only the first are used.")
    used = [by_rank[r] for r in sorted(by_rank)[:num_nodes]]
    if [int(u["rank"]) for u in used] != list(range(num_nodes)):
        log("ERROR", f"Node ranks {sorted(by_rank)} should be unique and continuous from 0 to {num_nodes - 1}.")
        return None
    accelerators = int(sum(u.get("Resources", {}).get("GPU", 0) for u in used))
    log("INFO", f"RLinf is running on a cluster with {num_nodes} nodes and {accelerators} accelerators.")
    for line in placement_summary(cluster, groups):
        log("INFO", line)
    return used


def place_actors(ray, used: list[dict]):
    """The learner on rank 0 (the head), a rollout actor on each other node (on the head when there is none)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    Rollout, Learner = make_actors(ray)

    def pinned(node):
        return NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)

    head = used[0]
    workers = used[1:] or [head]
    learner = Learner.options(scheduling_strategy=pinned(head)).remote(lr=0.05, seed=0)
    rollouts = [Rollout.options(scheduling_strategy=pinned(n)).remote(seed=i + 1) for i, n in enumerate(workers)]
    where = ray.get([learner.where.remote(), *[r.where.remote() for r in rollouts]], timeout=120)
    log("INFO", f"Learner on node rank {where[0]['rank']} ({where[0]['host']})")
    for w in where[1:]:
        log("INFO", f"Rollout actor on node rank {w['rank']} ({w['host']})")
    return learner, rollouts


def train(ray, args: argparse.Namespace, cfg: dict, learner, rollouts, steps: int, save_interval: int) -> None:
    """``steps`` global steps: metrics printed and written to TensorBoard, checkpoints every ``save_interval``
    steps and at the last, under ``<output>/<run>/``."""
    run = args.run_name or f"run-{datetime.now():%Y%m%d-%H%M%S}"
    out = Path(args.output) / run
    (out / "tensorboard").mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(out / "tensorboard"))
    log("INFO", f"Output directory: {out}")

    started = time.monotonic()
    for step in range(1, steps + 1):
        t0 = time.monotonic()
        weights = learner.weights.remote()
        batches = ray.get([r.collect.remote(weights, args.episodes, 0.99) for r in rollouts], timeout=300)
        stats = ray.get(learner.update.remote(batches), timeout=300)
        lengths = [n for b in batches for n in b["lengths"]]
        metrics = {
            "env/episode_return": float(np.mean(lengths)),
            "env/success_once": float(np.mean([n >= 195 for n in lengths])),
            "actor/loss": stats["loss"],
            "actor/grad_norm": stats["grad_norm"],
            "rollout/episodes": len(lengths),
        }
        for key, value in metrics.items():
            writer.add_scalar(key, value, step)
        elapsed = time.monotonic() - started
        step_time = time.monotonic() - t0
        print(
            f"Global Step: {step}/{steps} | Progress: {100 * step / steps:5.1f}% | "
            f"episode_return: {metrics['env/episode_return']:.1f} | success_once: {metrics['env/success_once']:.2f} | "
            f"loss: {metrics['actor/loss']:.4f} | Step Time: {step_time:.2f}s | Elapsed: {elapsed:.0f}s",
            flush=True,
        )
        if step % save_interval == 0 or step == steps:
            log("INFO", f"Saving checkpoint at step {step}.")
            ckpt = out / "checkpoints" / f"global_step_{step}" / "actor"
            ckpt.mkdir(parents=True, exist_ok=True)
            np.savez(ckpt / "policy.npz", weights=ray.get(learner.weights.remote()))
            (ckpt / "meta.json").write_text(json.dumps({"global_step": step, **metrics}, indent=1))
            writer.flush()
        time.sleep(max(0.0, args.step_interval - (time.monotonic() - t0)))
    writer.close()
    log("INFO", f"Training finished: {steps} steps in {time.monotonic() - started:.0f}s.")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = yaml.safe_load(Path(args.config).read_text()) or {}
    cluster = cfg.get("cluster") or {}
    num_nodes = int(cluster.get("num_nodes") or 1)
    demo = cfg.get("demo") or {}
    steps = args.steps or int(demo.get("steps") or 100)
    save_interval = args.save_interval or int(demo.get("save_interval") or max(1, min(steps, 5)))
    print(json.dumps({"config": str(args.config), "cluster": cluster, "steps": steps}, default=str), flush=True)

    import ray

    ray.init(address=args.address, namespace="RLinf", logging_level="WARNING")
    alive = wait_for_nodes(ray, num_nodes, args.wait_timeout)
    if alive is None:
        return 1
    used = confirm_ranks(ray, alive, cluster, num_nodes)
    if used is None:
        return 1
    learner, rollouts = place_actors(ray, used)
    train(ray, args, cfg, learner, rollouts, steps, save_interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
