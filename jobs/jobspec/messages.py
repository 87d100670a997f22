"""Problems and their messages. Codes are a stable contract (docs/api-and-cli.md, "Validation codes"); messages
are not.

Messages quote upstream's wizard strings exactly where upstream-rlark 7.1-7.3 gives them; others are ours. Each is
an English msgid; its Chinese is in the zh_Hans catalog of ``jobs`` (``jobs/locale``), and :meth:`Problem.message`
renders it in the language asked for. ``Problem.key`` selects a message variant of the same code (e.g.
``job_name_empty`` for ``job_name_invalid``).
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext_noop

from rlark_console.language import translate

ERROR = "error"
WARNING = "warning"

# code or variant key -> English msgid. Placeholders: {role}, {path}, ... from Problem.params. English plurals:
# ``{replicas:plural:worker:workers}`` gives "worker" when replicas is 1, else "workers" (a count agrees with its
# noun: never "1 workers"); the Chinese, which has no plural, writes ``{replicas}``.
MESSAGES: dict[str, str] = {
    "document_invalid": gettext_noop("The job document is invalid: {detail}"),
    "yaml_invalid": gettext_noop("The YAML cannot be parsed: {detail}"),
    "api_version_invalid": gettext_noop("apiVersion must be rlinf.io/v1alpha1."),
    "kind_invalid": gettext_noop("kind must be Job."),
    "job_name_empty": gettext_noop("Enter a job name."),
    "job_name_invalid": gettext_noop(
        "Use 1-63 lowercase letters, numbers, or hyphens; do not start or end with a hyphen."
    ),
    "job_name_mismatch": gettext_noop("The document names job {name}, but job {expected} is being changed."),
    "display_name_too_long": gettext_noop("The display name cannot be longer than 128 characters."),
    "roles_empty": gettext_noop("Add at least one role."),
    "role_name_empty": gettext_noop("Role names cannot be empty."),
    "role_name_duplicate": gettext_noop("Role names must be unique."),
    "role_name_invalid": gettext_noop(
        "Template name {name} may only contain lowercase letters, numbers, dots or hyphens, "
        "starting and ending with a letter or number."
    ),
    "task_name_too_long": gettext_noop(
        "Task name {task} is too long: the head Service name {service} exceeds 63 characters on Kubernetes."
    ),
    "role_invalid": gettext_noop("The role of {role} must be Actor, Rollout or Env."),
    "agent_type_invalid": gettext_noop("The agentType of {role} must be Kubernetes."),
    "workload_kind_invalid": gettext_noop("The workload kind of {role} must be StatefulSet."),
    "header_missing": gettext_noop("Select a header role."),
    "header_multiple": gettext_noop("Exactly one role can be the header (head: true); found {count}."),
    "header_replicas_not_one": gettext_noop("The header role must have exactly 1 worker."),
    "header_not_first": gettext_noop(
        "The header role {role} is not the first template, so its RLINF_NODE_RANK will not be 0."
    ),
    "run_script_missing": gettext_noop("Enter a run command."),
    "run_script_not_on_header": gettext_noop("Only the header role may have a run script; {role} is not the header."),
    "tensorboard_not_on_header": gettext_noop(
        "The TensorBoard directory only takes effect on the header role; it is ignored on {role}."
    ),
    "unknown_key": gettext_noop(
        "Unknown key `{key}` in {where}: did you mean `{suggestion}`? "
        "The console does not read it, so it has no effect."
    ),
    "unknown_key_no_match": gettext_noop(
        "Unknown key `{key}` in {where}: the console does not read it, so it has no effect."
    ),
    "cluster_missing": gettext_noop("Select a cluster for {role}."),
    "cluster_unknown": gettext_noop("The cluster {cluster} chosen for {role} does not exist."),
    "cluster_offline": gettext_noop("The cluster {cluster} chosen for {role} is currently {status}."),
    "image_missing": gettext_noop("Enter an image for {role}."),
    "image_whitespace": gettext_noop("The image reference for {role} cannot contain spaces or other whitespace."),
    "image_mutable_tag": gettext_noop(
        "The image {image} of {role} uses latest or no tag and may change; use an explicit version or a digest."
    ),
    "image_registry_no_credentials": gettext_noop(
        "No credentials are registered for {host} (image of {role}) and it is not marked public: pulling {image} "
        "fails if the registry needs a login. Ask an administrator to add it under Image registries."
    ),
    "node_selector_empty": gettext_noop("The node selector of {role} cannot be empty."),
    "node_selector_invalid": gettext_noop("The node selector of {role} is invalid: {detail}"),
    "node_selector_multivalue": gettext_noop(
        "The node selector {label}={value} of {role} uses comma-separated values; use one value per key."
    ),
    "node_selector_no_match": gettext_noop("{role} has no matched nodes. Adjust its cluster or node selector."),
    "node_selector_cross_cluster": gettext_noop(
        "The node selector of {role} matches nodes in several clusters ({clusters}); add more precise labels."
    ),
    "node_selector_cluster_mismatch": gettext_noop(
        "The node selector of {role} only matches nodes of cluster {matched}, but the chosen cluster is {cluster}."
    ),
    "node_unschedulable": gettext_noop("Nodes {nodes} matched by {role} are offline or cordoned."),
    "header_match_not_one": gettext_noop(
        "The full node selector of header role {role} must match exactly 1 node across all clusters; "
        "it matches {count}."
    ),
    "replicas_mismatch": gettext_noop(
        "{role} has {replicas} {replicas:plural:worker:workers}, but its node selector matches {count} "
        "{count:plural:node:nodes} across all clusters; "
        "they must be equal."
    ),
    "replicas_zero": gettext_noop("{role} has no matched nodes. Adjust its cluster or node selector."),
    "replicas_too_large": gettext_noop("The replicas of {role} cannot be more than {limit}."),
    "value_too_long": gettext_noop("{what} is too long: at most {limit}, got {size}."),
    "value_too_long_bytes": gettext_noop(
        "{what} is too long: at most {limit} bytes (the Linux limit of one environment variable), got {size} bytes. "
        "Put large content into the image or a volume."
    ),
    "value_too_long_chars": gettext_noop("{what} is too long: at most {limit} characters, got {size}."),
    "replicas_invalid": gettext_noop("The replicas of {role} must be a non-negative integer."),
    "gpu_exceeds_node": gettext_noop("No node can satisfy {role}'s per-worker request of {amount}."),
    "gpu_exceeds_pool": gettext_noop("{role} requests {requested} resources, but only {available} are free."),
    "resource_exceeds_node": gettext_noop(
        "{role} requests {resource} {amount} per worker, but matched nodes have at most {available} free."
    ),
    "resource_short_nodes": gettext_noop(
        "Nodes {nodes} matched by {role} cannot satisfy its per-worker {resource} request of {amount}."
    ),
    "shared_node_overcommit": gettext_noop(
        "Node {node} is selected by {roles}; together they request {resource} {requested}, "
        "but only {available} is free."
    ),
    "quantity_invalid": gettext_noop("The {resource} quantity {value} of {role} is invalid."),
    "gpu_not_integer": gettext_noop("The {resource} quantity of {role} must be an integer."),
    "request_exceeds_limit": gettext_noop("The {resource} request {request} of {role} exceeds its limit {limit}."),
    "extended_request_limit_mismatch": gettext_noop("The {resource} request and limit of {role} must be equal."),
    "mount_path_missing": gettext_noop("{role} has a mount without a target path."),
    "mount_path_duplicate": gettext_noop("{role} has several mounts at the same path {mount}."),
    "volume_missing": gettext_noop("The mount {volume} of {role} refers to no volume."),
    "volume_name_collision": gettext_noop(
        "Several mounts of {role} map to the same volume name {volume}; change a mount path."
    ),
    "host_path_missing": gettext_noop("{role} has an empty host path."),
    "host_path_not_allowed": gettext_noop("Cluster {cluster} does not allow host directory mounts ({role})."),
    "local_cluster_single_user": gettext_noop(
        "Cluster {cluster} is single-user: the console does not run as root, so it cannot give each job a network of"
        " its own, and jobs of {users} are active on it. Wait until they end or are stopped, or ask the administrator"
        " to run the console as root."
    ),
    "sub_path_invalid": gettext_noop(
        "The mount sub-path {sub_path} of {role} is invalid: it must be a relative path inside the volume, not start"
        " with / and contain no '..'."
    ),
    "host_path_relative": gettext_noop("The host path {host_path} of {role} must be an absolute path."),
    "host_path_forbidden": gettext_noop(
        "The host path {host_path} of {role} is a system directory or the console's own files; no cluster allows it."
    ),
    "host_path_outside_roots": gettext_noop(
        "The host path {host_path} of {role} is not under a host directory cluster {cluster} allows ({roots}). Ask the"
        " platform administrator to confirm the path."
    ),
    "storage_class_missing": gettext_noop("{role} needs an object storage class."),
    "storage_class_unknown": gettext_noop("The storage class {storage_class} used by {role} does not exist."),
    "storage_class_wrong_cluster": gettext_noop(
        "The storage class {storage_class} used by {role} does not belong to cluster {cluster}."
    ),
    "pvc_shared_rwo": gettext_noop(
        "{role} has {replicas} {replicas:plural:worker:workers} sharing one ReadWriteOnce claim {claim}; "
        "they may not all mount it."
    ),
    "pvc_options_invalid": gettext_noop("The volume options of {role} are invalid: {detail}"),
    "mount_shadows_path": gettext_noop("Mounting at {mount} in {role} hides what the image has there."),
    "env_name_invalid": gettext_noop("The environment variable name {name} of {role} is invalid."),
    "env_name_duplicate": gettext_noop("The environment variable {name} of {role} is defined twice."),
    "env_reserved": gettext_noop(
        "The environment variable {name} of {role} is set by the platform and cannot be set here."
    ),
    "secret_in_spec": gettext_noop(
        "{where} looks like it contains a password, token or private key; use an approved secret store, not the job."
    ),
    "domain_unknown": gettext_noop("The network domain {domain} does not exist."),
    "checkpoint_dir_invalid": gettext_noop(
        "checkpointDir {value} is not valid: give an absolute container path (starting with /) of at most {max}"
        " characters."
    ),
    "checkpoint_dir_not_on_header": gettext_noop(
        "Role {role}: checkpointDir is read from the Header only; set it on the Header role."
    ),
    "start_timeout_invalid": gettext_noop(
        "startTimeout {value} is not valid: give whole seconds from {low} to {high}, or digits with s, m or h"
        " (900, 15m, 2h)."
    ),
    "domain_needed_across_clusters": gettext_noop(
        "The roles are in different clusters ({clusters}) but the job has no network domain: the Workers will not"
        " reach the Ray head. Choose a cross-cluster network domain."
    ),
    "ssh_key_unknown": gettext_noop("The SSH public key is not one of the keys registered in your SSH key management."),
    "tracking_invalid": gettext_noop(
        "trackingCredentials must be a list of at most {most} names of your experiment-tracking credentials."
    ),
    "tracking_unknown": gettext_noop(
        "You have no experiment-tracking credential called “{name}”. Add it under Account → Experiment tracking."
    ),
    "tracking_same_kind": gettext_noop(
        "“{name}” and “{other}” are credentials of the same service; pick at most one W&B and one SwanLab."
    ),
    "num_nodes_mismatch": gettext_noop(
        "The roles have {workers} {workers:plural:worker:workers} in total, but the RLinf config has "
        "cluster.num_nodes {num_nodes}."
    ),
    "node_ranks_mismatch": gettext_noop("Node ranks are inconsistent: {detail}"),
    "job_exists": gettext_noop("A job named {name} already exists."),
    "job_name_unavailable": gettext_noop("The name {name} is not available; choose another name."),
    # RLinf config problems (plan)
    "rlinf_config_invalid": gettext_noop("The RLinf config is invalid: {detail}"),
    "rlinf_num_nodes_invalid": gettext_noop("cluster.num_nodes must be an integer greater than 0."),
    "rlinf_num_nodes_too_large": gettext_noop("cluster.num_nodes cannot be more than {limit}; got {value}."),
    "rlinf_config_too_large": gettext_noop("The RLinf config is too large: {detail}"),
    "rlinf_node_ranks_invalid": gettext_noop("Rank expression {value} is invalid: {detail}"),
    "rlinf_placeholder": gettext_noop(
        "{field} in the RLinf config is still the placeholder {value}: the run fails at start-up until it is "
        "replaced with a value that exists on the target node."
    ),
    "rlinf_gpus_unknown": gettext_noop(
        "The RLinf config does not say how many GPUs each Worker of {role} needs (an `all` placement, or a robot "
        "node group that runs the policy model): the GPU field is left empty; fill it in for the target nodes, or "
        "set cluster.num_gpus_per_node in the config."
    ),
    "rlinf_group_invalid": gettext_noop("A node group is invalid: {detail}"),
    "rlinf_group_unknown": gettext_noop(
        "{component} in component_placement refers to node group {group}, which does not exist."
    ),
    # RLinf 0.3.0's own checks (jobs.jobspec.rlinf); {rlinf} quotes RLinf's English message in every language.
    "rlinf_hardware_rank_outside": gettext_noop(
        "{path} is {value}, outside node_ranks {ranks} of node group {group}. RLinf refuses this config at start-up: "
        '"{rlinf}"'
    ),
    "rlinf_robot_ip_invalid": gettext_noop(
        '{path} is {value}, which is not an IP address. RLinf refuses this config at start-up: "{rlinf}" Enter the '
        "robot's IP address, or leave the field out so that RLinf reads the {env} environment variable on the robot's "
        "node. If the run script sets it (a Hydra override), acknowledge this check: the wizard's checkbox, or "
        "annotation rlark.io/acknowledged-checks: rlinf_robot_ip_invalid."
    ),
    "rlinf_robot_ip_acknowledged": gettext_noop(
        '{path} is {value}, which is not an IP address; RLinf refuses the config as it is ("{rlinf}"). The job '
        "acknowledges this check: the run script must set the address."
    ),
    # A job that may drive a real robot (jobs.jobspec.robot): a warning, then the safety gate (jobs.control.safety).
    "robot_job_node": gettext_noop(
        "Role {role} may drive a real robot: its node selector matches {count:plural:robot node:robot nodes} "
        "{detail}. It needs a safety approver's approval to start."
    ),
    "robot_job_device": gettext_noop(
        "Role {role} may drive a real robot: it requests the device resource {detail}. It needs a safety "
        "approver's approval to start."
    ),
    "robot_job_hardware": gettext_noop(
        "The attached RLinf config drives robot hardware of type {detail}. The job needs a safety "
        "approver's approval to start."
    ),
    # The safety gate refuses to run a robot job (jobs.control.safety).
    "safety_approval_missing": gettext_noop(
        "Job {job} may drive a real robot ({reasons}) and has no safety approval, so it cannot start. A safety "
        "approver other than its submitter must confirm the five safety items and write a stop plan: the Safety "
        "approval section of the job page, or rlark approve {job}."
    ),
    "safety_approval_stale": gettext_noop(
        "Job {job} may drive a real robot ({reasons}). The safety approval {approver} gave at {time} no longer "
        "applies: the roles, images, selectors, scripts, env or RLinf config changed since. It cannot start until a "
        "safety approver approves it again (the job page, or rlark approve {job})."
    ),
    "safety_approval_script": gettext_noop(
        "Job {job} may drive a real robot, and this resume runs another run script than the one its safety approval "
        "covers. Resume with the approved run script, or edit the job and have it approved again."
    ),
    "rlinf_group_no_workers": gettext_noop(
        "{path}: {component} is placed on node group {group}, whose node_ranks hold no node, so no Worker runs it. "
        'RLinf leaves out a node group without nodes and refuses the placement at start-up: "{rlinf}"'
    ),
}


class _PluralFormatter(string.Formatter):
    """``str.format`` plus the spec ``plural:<one>:<other>`` (``<one>`` for a count of 1, else ``<other>``)."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec.startswith("plural:"):
            one, _, other = format_spec[len("plural:") :].partition(":")
            try:
                return one if int(value) == 1 else other
            except (TypeError, ValueError):
                return other
        return super().format_field(value, format_spec)


_FORMATTER = _PluralFormatter()


@dataclass(frozen=True)
class Problem:
    """One finding. ``path`` is a dotted/indexed field path (``spec.tasks[1].nodeSelector``)."""

    path: str
    code: str
    params: dict[str, Any] = field(default_factory=dict)
    severity: str = ERROR
    key: str = ""

    def message(self, lang: str = "zh-hans") -> str:
        """Localized message; ``lang`` starting with ``en`` -> English, else Chinese (``language.lang``)."""
        msgid = MESSAGES.get(self.key or self.code, MESSAGES.get(self.code))
        template = translate(msgid, lang) if msgid else "{code}"
        try:
            return _FORMATTER.format(template, code=self.code, **self.params)
        except (KeyError, IndexError, ValueError):
            return template

    def to_dict(self, lang: str = "zh-hans") -> dict[str, str]:
        """``{path, code, message}`` (the API and wizard shape)."""
        return {"path": self.path, "code": self.code, "message": self.message(lang)}
