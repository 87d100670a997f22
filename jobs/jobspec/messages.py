"""Problems and their zh-hans/en messages. Codes are a stable contract (issue 3); messages are not.

Messages quote upstream's wizard strings exactly where upstream-rlark 7.1-7.3 gives them; others are ours.
``Problem.key`` selects a message variant of the same code (e.g. ``job_name_empty`` for ``job_name_invalid``).
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

ERROR = "error"
WARNING = "warning"

# code or variant key -> (zh-hans, en). Placeholders: {role}, {path}, ... from Problem.params. English plurals:
# ``{replicas:plural:worker:workers}`` gives "worker" when replicas is 1, else "workers" (issue 14.7: no "1 workers").
MESSAGES: dict[str, tuple[str, str]] = {
    "document_invalid": ("Job 文档格式无效：{detail}", "The job document is invalid: {detail}"),
    "yaml_invalid": ("YAML 无法解析：{detail}", "The YAML cannot be parsed: {detail}"),
    "api_version_invalid": ("apiVersion 必须是 rlinf.io/v1alpha1。", "apiVersion must be rlinf.io/v1alpha1."),
    "kind_invalid": ("kind 必须是 Job。", "kind must be Job."),
    "job_name_empty": ("请输入任务名称。", "Enter a job name."),
    "job_name_invalid": (
        "任务名称需为 1-63 位小写字母、数字或连字符，且不能以连字符开头或结尾。",
        "Use 1-63 lowercase letters, numbers, or hyphens; do not start or end with a hyphen.",
    ),
    "job_name_mismatch": (
        "文档中的任务名称 {name} 与要修改的任务 {expected} 不一致。",
        "The document names job {name}, but job {expected} is being changed.",
    ),
    "display_name_too_long": (
        "显示名称不能超过 128 个字符。",
        "The display name cannot be longer than 128 characters.",
    ),
    "roles_empty": ("至少添加一个角色。", "Add at least one role."),
    "role_name_empty": ("角色名称不能为空。", "Role names cannot be empty."),
    "role_name_duplicate": ("角色名称不能重复。", "Role names must be unique."),
    "role_name_invalid": (
        "任务模板名称 {name} 只能包含小写字母、数字、点或连字符，并以字母或数字开头和结尾。",
        "Template name {name} may only contain lowercase letters, numbers, dots or hyphens, "
        "starting and ending with a letter or number.",
    ),
    "task_name_too_long": (
        "Task 名称 {task} 过长：Head Service 名称 {service} 超过 63 个字符，在 Kubernetes 集群中无法创建。",
        "Task name {task} is too long: the head Service name {service} exceeds 63 characters on Kubernetes.",
    ),
    "role_invalid": (
        "{role} 的 role 必须是 Actor、Rollout 或 Env。",
        "The role of {role} must be Actor, Rollout or Env.",
    ),
    "agent_type_invalid": (
        "{role} 的 agentType 只能是 Kubernetes。",
        "The agentType of {role} must be Kubernetes.",
    ),
    "workload_kind_invalid": (
        "{role} 的工作负载类型只能是 StatefulSet。",
        "The workload kind of {role} must be StatefulSet.",
    ),
    "header_missing": ("请选择 Header 角色。", "Select a header role."),
    "header_multiple": (
        "只能有一个 Header 角色（head: true），当前有 {count} 个。",
        "Exactly one role can be the header (head: true); found {count}.",
    ),
    "header_replicas_not_one": ("Header 角色只能有 1 个 Worker。", "The header role must have exactly 1 worker."),
    "header_not_first": (
        "Header 角色 {role} 不是第一个任务模板，它的 RLINF_NODE_RANK 不会是 0。",
        "The header role {role} is not the first template, so its RLINF_NODE_RANK will not be 0.",
    ),
    "run_script_missing": ("请输入运行命令。", "Enter a run command."),
    "run_script_not_on_header": (
        "运行脚本只能写在 Header 角色上，{role} 不是 Header。",
        "Only the header role may have a run script; {role} is not the header.",
    ),
    "tensorboard_not_on_header": (
        "TensorBoard 目录只在 Header 角色上生效，{role} 上的设置会被忽略。",
        "The TensorBoard directory only takes effect on the header role; it is ignored on {role}.",
    ),
    "cluster_missing": ("请为 {role} 选择集群。", "Select a cluster for {role}."),
    "cluster_unknown": (
        "{role} 选择的集群 {cluster} 不存在。",
        "The cluster {cluster} chosen for {role} does not exist.",
    ),
    "cluster_offline": (
        "{role} 选择的集群 {cluster} 当前状态为 {status}。",
        "The cluster {cluster} chosen for {role} is currently {status}.",
    ),
    "image_missing": ("请为 {role} 输入镜像。", "Enter an image for {role}."),
    "image_whitespace": (
        "{role} 的镜像地址不能包含空格或其他空白字符。",
        "The image reference for {role} cannot contain spaces or other whitespace.",
    ),
    "image_mutable_tag": (
        "{role} 的镜像 {image} 使用 latest 或没有 tag，可能被覆盖；请使用明确版本或 digest。",
        "The image {image} of {role} uses latest or no tag and may change; use an explicit version or a digest.",
    ),
    "image_registry_no_credentials": (
        "{role} 的镜像仓库 {host} 没有登记凭据，也未标记为公开；如果仓库需要登录，拉取 {image} 会失败。"
        "请联系管理员在镜像仓库凭据中添加。",
        "No credentials are registered for {host} (image of {role}) and it is not marked public: pulling {image} "
        "fails if the registry needs a login. Ask an administrator to add it under Image registries.",
    ),
    "node_selector_empty": (
        "{role} 的节点选择器不能为空。",
        "The node selector of {role} cannot be empty.",
    ),
    "node_selector_invalid": (
        "{role} 的节点选择器无效：{detail}",
        "The node selector of {role} is invalid: {detail}",
    ),
    "node_selector_multivalue": (
        "{role} 的节点选择器 {label}={value} 使用了逗号分隔的多值；每个键只能使用一个值。",
        "The node selector {label}={value} of {role} uses comma-separated values; use one value per key.",
    ),
    "node_selector_no_match": (
        "{role} 当前没有匹配到可用节点，请调整集群或节点选择条件。",
        "{role} has no matched nodes. Adjust its cluster or node selector.",
    ),
    "node_selector_cross_cluster": (
        "{role} 的节点选择器同时匹配了多个集群的节点（{clusters}），请补充更精确的节点标签。",
        "The node selector of {role} matches nodes in several clusters ({clusters}); add more precise labels.",
    ),
    "node_selector_cluster_mismatch": (
        "{role} 的节点选择器只匹配集群 {matched} 的节点，但选择的集群是 {cluster}。",
        "The node selector of {role} only matches nodes of cluster {matched}, but the chosen cluster is {cluster}.",
    ),
    "node_unschedulable": (
        "{role} 匹配的节点 {nodes} 已离线或暂停调度。",
        "Nodes {nodes} matched by {role} are offline or cordoned.",
    ),
    "header_match_not_one": (
        "Header 角色 {role} 的完整节点选择器需要在全部集群中恰好匹配 1 个节点，当前匹配 {count} 个。",
        "The full node selector of header role {role} must match exactly 1 node across all clusters; "
        "it matches {count}.",
    ),
    "replicas_mismatch": (
        "{role} 的 Worker 数为 {replicas}，但节点选择器在全部集群中匹配 {count} 个节点；两者必须一致。",
        "{role} has {replicas} {replicas:plural:worker:workers}, but its node selector matches {count} "
        "{count:plural:node:nodes} across all clusters; "
        "they must be equal.",
    ),
    "replicas_zero": (
        "{role} 当前没有匹配到可用节点，请调整集群或节点选择条件。",
        "{role} has no matched nodes. Adjust its cluster or node selector.",
    ),
    "replicas_too_large": (
        "{role} 的副本数不能超过 {limit}。",
        "The replicas of {role} cannot be more than {limit}.",
    ),
    "value_too_long": ("{what} 过长：最多 {limit}，当前 {size}。", "{what} is too long: at most {limit}, got {size}."),
    "value_too_long_bytes": (
        "{what} 过长：最多 {limit} 字节（Linux 单个环境变量的上限），当前 {size} 字节。请把大段内容放进镜像或存储卷。",
        "{what} is too long: at most {limit} bytes (the Linux limit of one environment variable), got {size} bytes. "
        "Put large content into the image or a volume.",
    ),
    "value_too_long_chars": (
        "{what} 过长：最多 {limit} 个字符，当前 {size} 个。",
        "{what} is too long: at most {limit} characters, got {size}.",
    ),
    "replicas_invalid": ("{role} 的副本数必须是非负整数。", "The replicas of {role} must be a non-negative integer."),
    "gpu_exceeds_node": (
        "{role} 每个 Worker 申请 {amount} 个资源，但没有单个节点能够满足。",
        "No node can satisfy {role}'s per-worker request of {amount}.",
    ),
    "gpu_exceeds_pool": (
        "{role} 申请 {requested} 个资源，但所选资源池当前仅可用 {available} 个。",
        "{role} requests {requested} resources, but only {available} are free.",
    ),
    "resource_exceeds_node": (
        "{role} 每个 Worker 申请 {resource} {amount}，但匹配节点中最多只有 {available} 可用。",
        "{role} requests {resource} {amount} per worker, but matched nodes have at most {available} free.",
    ),
    "resource_short_nodes": (
        "{role} 匹配的节点 {nodes} 无法满足每个 Worker 的 {resource} 申请 {amount}。",
        "Nodes {nodes} matched by {role} cannot satisfy its per-worker {resource} request of {amount}.",
    ),
    "shared_node_overcommit": (
        "节点 {node} 被 {roles} 同时选中，合计申请 {resource} {requested}，但该节点仅可用 {available}。",
        "Node {node} is selected by {roles}; together they request {resource} {requested}, "
        "but only {available} is free.",
    ),
    "quantity_invalid": (
        "{role} 的 {resource} 数量 {value} 格式无效。",
        "The {resource} quantity {value} of {role} is invalid.",
    ),
    "gpu_not_integer": (
        "{role} 的 {resource} 数量必须是整数。",
        "The {resource} quantity of {role} must be an integer.",
    ),
    "request_exceeds_limit": (
        "{role} 的 {resource} 申请量 {request} 大于上限 {limit}。",
        "The {resource} request {request} of {role} exceeds its limit {limit}.",
    ),
    "extended_request_limit_mismatch": (
        "{role} 的 {resource} 申请量与上限必须相同。",
        "The {resource} request and limit of {role} must be equal.",
    ),
    "mount_path_missing": ("{role} 的挂载目录不能为空。", "{role} has a mount without a target path."),
    "mount_path_duplicate": (
        "{role} 有多个挂载使用了同一目录 {mount}。",
        "{role} has several mounts at the same path {mount}.",
    ),
    "volume_missing": (
        "{role} 的挂载 {volume} 没有对应的卷。",
        "The mount {volume} of {role} refers to no volume.",
    ),
    "volume_name_collision": (
        "{role} 的多个挂载生成了相同的卷名 {volume}，请修改挂载目录。",
        "Several mounts of {role} map to the same volume name {volume}; change a mount path.",
    ),
    "host_path_missing": ("{role} 的主机目录不能为空。", "{role} has an empty host path."),
    "host_path_not_allowed": (
        "集群 {cluster} 未允许主机目录挂载（{role}）。",
        "Cluster {cluster} does not allow host directory mounts ({role}).",
    ),
    "local_cluster_single_user": (
        "集群 {cluster} 是单用户集群：控制台不以 root 运行，无法为每个任务创建独立的网络，"
        "而 {users} 的任务正在其上运行。请等待这些任务结束或停止，或请管理员以 root 运行控制台。",
        "Cluster {cluster} is single-user: the console does not run as root, so it cannot give each job a network of"
        " its own, and jobs of {users} are active on it. Wait until they end or are stopped, or ask the administrator"
        " to run the console as root.",
    ),
    "sub_path_invalid": (
        "{role} 的挂载子路径 {sub_path} 无效：必须是卷内的相对路径，不能以 / 开头，也不能包含“..”。",
        "The mount sub-path {sub_path} of {role} is invalid: it must be a relative path inside the volume, not start"
        " with / and contain no '..'.",
    ),
    "host_path_relative": (
        "{role} 的主机目录 {host_path} 必须是绝对路径。",
        "The host path {host_path} of {role} must be an absolute path.",
    ),
    "host_path_forbidden": (
        "{role} 的主机目录 {host_path} 是系统目录或控制台自身的文件，任何集群都不允许挂载。",
        "The host path {host_path} of {role} is a system directory or the console's own files; no cluster allows it.",
    ),
    "host_path_outside_roots": (
        "{role} 的主机目录 {host_path} 不在集群 {cluster} 允许的主机目录下（{roots}）。请联系平台管理员确认路径。",
        "The host path {host_path} of {role} is not under a host directory cluster {cluster} allows ({roots}). Ask the"
        " platform administrator to confirm the path.",
    ),
    "storage_class_missing": ("{role} 需要选择对象存储。", "{role} needs an object storage class."),
    "storage_class_unknown": (
        "{role} 使用的存储类 {storage_class} 不存在。",
        "The storage class {storage_class} used by {role} does not exist.",
    ),
    "storage_class_wrong_cluster": (
        "{role} 使用的存储类 {storage_class} 不属于集群 {cluster}。",
        "The storage class {storage_class} used by {role} does not belong to cluster {cluster}.",
    ),
    "pvc_shared_rwo": (
        "{role} 有 {replicas} 个 Worker，共享同一个 ReadWriteOnce 存储卷 {claim}，可能无法同时挂载。",
        "{role} has {replicas} {replicas:plural:worker:workers} sharing one ReadWriteOnce claim {claim}; "
        "they may not all mount it.",
    ),
    "pvc_options_invalid": ("{role} 的存储卷选项无效：{detail}", "The volume options of {role} are invalid: {detail}"),
    "mount_shadows_path": (
        "{role} 挂载到 {mount} 会遮蔽镜像中的已有目录。",
        "Mounting at {mount} in {role} hides what the image has there.",
    ),
    "env_name_invalid": (
        "{role} 的环境变量名 {name} 无效。",
        "The environment variable name {name} of {role} is invalid.",
    ),
    "env_name_duplicate": (
        "{role} 的环境变量 {name} 重复。",
        "The environment variable {name} of {role} is defined twice.",
    ),
    "env_reserved": (
        "{role} 的环境变量 {name} 由平台设置，不能自行填写。",
        "The environment variable {name} of {role} is set by the platform and cannot be set here.",
    ),
    "secret_in_spec": (
        "{where} 看起来包含密码、令牌或私钥；请使用组织批准的 Secret 管理方式，不要写入 Job。",
        "{where} looks like it contains a password, token or private key; use an approved secret store, not the job.",
    ),
    "domain_unknown": ("网络域 {domain} 不存在。", "The network domain {domain} does not exist."),
    "domain_needed_across_clusters": (
        "角色分布在不同集群（{clusters}），但任务没有网络域：Worker 将无法连接 Ray Head。请选择一个跨集群网络域。",
        "The roles are in different clusters ({clusters}) but the job has no network domain: the Workers will not"
        " reach the Ray head. Choose a cross-cluster network domain.",
    ),
    "ssh_key_unknown": (
        "SSH 公钥不是你在 SSH 公钥管理中登记的公钥。",
        "The SSH public key is not one of the keys registered in your SSH key management.",
    ),
    "num_nodes_mismatch": (
        "各角色 Worker 总数为 {workers}，但 RLinf 配置的 cluster.num_nodes 为 {num_nodes}。",
        "The roles have {workers} {workers:plural:worker:workers} in total, but the RLinf config has "
        "cluster.num_nodes {num_nodes}.",
    ),
    "node_ranks_mismatch": ("节点编号不一致：{detail}", "Node ranks are inconsistent: {detail}"),
    "job_exists": ("任务 {name} 已存在。", "A job named {name} already exists."),
    "job_name_unavailable": (
        "名称 {name} 不可用，请换一个名称。",
        "The name {name} is not available; choose another name.",
    ),
    # RLinf config problems (plan)
    "rlinf_config_invalid": ("RLinf 配置无效：{detail}", "The RLinf config is invalid: {detail}"),
    "rlinf_num_nodes_invalid": (
        "cluster.num_nodes 必须是大于 0 的整数。",
        "cluster.num_nodes must be an integer greater than 0.",
    ),
    "rlinf_num_nodes_too_large": (
        "cluster.num_nodes 不能超过 {limit}，当前为 {value}。",
        "cluster.num_nodes cannot be more than {limit}; got {value}.",
    ),
    "rlinf_config_too_large": (
        "RLinf 配置过大：{detail}",
        "The RLinf config is too large: {detail}",
    ),
    "rlinf_node_ranks_invalid": (
        "节点编号表达式 {value} 无效：{detail}",
        "Rank expression {value} is invalid: {detail}",
    ),
    "rlinf_placeholder": (
        "RLinf 配置中的 {field} 仍是占位值 {value}：启动时会失败，请替换为目标节点上真实存在的值。",
        "{field} in the RLinf config is still the placeholder {value}: the run fails at start-up until it is "
        "replaced with a value that exists on the target node.",
    ),
    "rlinf_gpus_unknown": (
        "RLinf 配置没有给出 {role} 每个 Worker 的 GPU 数（placement 为 all，或机器人节点组运行策略模型）：GPU 数留空，"
        "请按目标节点填写，或在配置中写 cluster.num_gpus_per_node。",
        "The RLinf config does not say how many GPUs each Worker of {role} needs (an `all` placement, or a robot "
        "node group that runs the policy model): the GPU field is left empty; fill it in for the target nodes, or "
        "set cluster.num_gpus_per_node in the config.",
    ),
    "rlinf_group_invalid": ("node_groups 配置无效：{detail}", "A node group is invalid: {detail}"),
    "rlinf_group_unknown": (
        "component_placement 中的 {component} 引用了不存在的节点组 {group}。",
        "{component} in component_placement refers to node group {group}, which does not exist.",
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
        """Localized message; ``lang`` starting with ``en`` -> English, else Chinese."""
        zh, en = MESSAGES.get(self.key or self.code, MESSAGES.get(self.code, ("{code}", "{code}")))
        template = en if str(lang).lower().startswith("en") else zh
        try:
            return _FORMATTER.format(template, code=self.code, **self.params)
        except (KeyError, IndexError, ValueError):
            return template

    def to_dict(self, lang: str = "zh-hans") -> dict[str, str]:
        """``{path, code, message}`` (the API and wizard shape)."""
        return {"path": self.path, "code": self.code, "message": self.message(lang)}
