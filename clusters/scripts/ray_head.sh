#!/usr/bin/env bash
# RLark Ray head wrapper (upstream-rlark 5.1). Replaces the `main` container command on
# Kubernetes and is run unchanged by the local runtime. Every echoed marker is byte-identical
# to upstream; "goes further": the run script's exit code is recorded as
# `Run script exited with code <n>` and the container then idles instead of exiting, so a
# StatefulSet does not restart it and re-run training (the controller ends the Job).
set -e
# One stream: the kubelet copies stdout and stderr through separate pipes, and under load a script's error
# could land before the stage marker echoed just ahead of it; the log keeps the order the lines were written in.
exec 2>&1

RLARK_RAY_PORT="${RLARK_RAY_PORT:-6379}"
ordinal="${POD_NAME##*-}"
RLINF_NODE_RANK=$((${RLARK_NODE_RANK_START:-0} + ordinal))
export RLINF_NODE_RANK
echo "RLINF_NODE_RANK: ${RLINF_NODE_RANK}"

# Experiment-tracking credentials the local runtime gives as one file per variable
# (clusters/runtime/local/tracking.py); on Kubernetes they come from the Task's Secret as env.
if [ -d /rlark/tracking ]; then
    for f in /rlark/tracking/*; do
        case "${f##*/}" in
            WANDB_API_KEY | WANDB_BASE_URL | WANDB_ENTITY | SWANLAB_API_KEY | SWANLAB_WEB_HOST) export "${f##*/}=$(cat "$f")" ;;
        esac
    done
fi

if [ -n "${WAIT_NETWORK_SCRIPT:-}" ]; then
    bash "$WAIT_NETWORK_SCRIPT" "network"
fi

# SSH keys: RLARK_SSH_PUBLIC_KEYS (newline-separated, several keys) and the upstream single
# RLARK_SSH_PUBLIC_KEY are both accepted.
ssh_keys="${RLARK_SSH_PUBLIC_KEYS:-}"
if [ -n "${RLARK_SSH_PUBLIC_KEY:-}" ]; then
    ssh_keys="${ssh_keys:+${ssh_keys}
}${RLARK_SSH_PUBLIC_KEY}"
fi
inject_ssh_keys() {
    mkdir -p "$HOME/.ssh"
    chmod 700 "$HOME/.ssh"
    touch "$HOME/.ssh/authorized_keys"
    chmod 600 "$HOME/.ssh/authorized_keys"
    while IFS= read -r key; do
        key="${key%$'\r'}"
        [ -z "$key" ] && continue
        grep -qxF -- "$key" "$HOME/.ssh/authorized_keys" || printf '%s\n' "$key" >> "$HOME/.ssh/authorized_keys"
    done <<< "$ssh_keys"
}
if [ -n "$ssh_keys" ]; then
    if [ -x /sshd/rlark-sshd ]; then
        nohup /sshd/rlark-sshd -port 22 > /tmp/rlark-sshd.log 2>&1 &
        echo "rlark-sshd started on port 22"
    else
        inject_ssh_keys
        echo "SSH public key injected into authorized_keys (fallback: no rlark-sshd binary)"
    fi
fi

if [ -n "${RLARK_PREPARE_SCRIPT:-}" ]; then
    echo "Executing prepare script..."
    eval "$RLARK_PREPARE_SCRIPT"
fi

if ! command -v ray > /dev/null 2>&1; then
    echo "Error: Ray CLI is not found. Please ensure Ray is installed." >&2
    exit 1
fi

timeout "${RLARK_RAY_STOP_TIMEOUT:-60}" ray stop > /dev/null 2>&1 || true
RAY_TEMP_DIR="${RAY_TEMP_DIR:-/tmp/ray}"
NODE_IP="${RLARK_NODE_IP:-}"
if [ -z "$NODE_IP" ]; then
    NODE_IP="$(hostname -I | awk '{print $1}')"
fi

if [ -n "${RLARK_DOMAIN:-}" ]; then
    domain_host="$(hostname).rlark-domain"
    for i in $(seq 1 "${RLARK_DOMAIN_WAIT_ATTEMPTS:-120}"); do
        domain_ip="$(timeout 5 getent hosts "$domain_host" | awk '{print $1; exit}' || true)"
        if [ -n "$domain_ip" ]; then
            NODE_IP="$domain_ip"
            echo "Resolved domain IP: ${domain_ip} (${domain_host})"
            break
        fi
        echo "Waiting for domain IP from /etc/hosts... (attempt ${i})"
        sleep 1
    done
    # RLark goes further: upstream keeps the Pod IP silently; say so, since the domain's members cannot reach it
    if [ -z "${domain_ip:-}" ]; then
        echo "Domain IP of ${domain_host} not found; Ray uses the Pod IP ${NODE_IP}"
    fi
fi

run_pid=""
idle_pid=""
stop_ray() {
    status=$?
    trap - EXIT INT TERM
    echo "Stopping Ray cluster..."
    if [ -n "$idle_pid" ]; then kill "$idle_pid" 2> /dev/null || true; fi
    if [ -n "$run_pid" ]; then kill -TERM "$run_pid" 2> /dev/null || true; fi
    timeout "${RLARK_RAY_STOP_TIMEOUT:-60}" ray stop --force > /dev/null 2>&1 || true
    # bounded wait for the run script to finish after SIGTERM
    for _ in $(seq 1 60); do
        if [ -z "$run_pid" ] || ! kill -0 "$run_pid" 2> /dev/null; then
            break
        fi
        sleep 0.5
    done
    exit "$status"
}

start_head() {
    timeout "${RLARK_RAY_START_TIMEOUT:-300}" ray start --head --dashboard-host=0.0.0.0 --disable-usage-stats \
        --node-ip-address="$NODE_IP" --port="$RLARK_RAY_PORT" --temp-dir "$RAY_TEMP_DIR"
}
start_head &
ray_start_pid=$!
trap stop_ray EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

TOTAL_NODES="${RLARK_TOTAL_NODES:-1}"
echo "Waiting for ${TOTAL_NODES} nodes to join the Ray cluster..."
# RLark goes further: a head whose `ray start` failed (a slow start on a loaded machine: its raylet missed Ray's
# registration window) is started again, up to RLARK_RAY_START_ATTEMPTS times; a TERM (a stop on purpose) exits
# through the traps above and is never retried. Every attempt keeps its Ray logs.
attempts="${RLARK_RAY_START_ATTEMPTS:-3}"
attempt=1
while :; do
    start_status=0
    wait "$ray_start_pid" || start_status=$?
    [ "$start_status" = 0 ] && break
    echo "ray start exited with code ${start_status}" >&2
    [ "$attempt" -ge "$attempts" ] && break
    attempt=$((attempt + 1))
    echo "Ray head did not start; starting it again (attempt ${attempt} of ${attempts})..."
    timeout "${RLARK_RAY_STOP_TIMEOUT:-60}" ray stop --force > /dev/null 2>&1 || true
    sleep $((attempt * 5))
    start_head &
    ray_start_pid=$!
done
if ! timeout "$(( ${RLARK_RAY_CHECK_TIMEOUT:-900} + 60 ))" python -u /rlark/scripts/ray_check.py \
    "${NODE_IP}:${RLARK_RAY_PORT}" "$TOTAL_NODES"; then
    echo "Warning: Ray cluster check failed, proceeding anyway."
fi

echo "Ray cluster is ready. Printing cluster information:"
echo "=========================================="
timeout "${RLARK_RAY_STATUS_TIMEOUT:-60}" ray status || true
echo "=========================================="

idle_forever() {
    while true; do
        sleep 3600 &
        idle_pid=$!
        wait "$idle_pid" || true
    done
}

if [ -n "${RLARK_RUN_SCRIPT:-}" ]; then
    echo "Executing run script..."
    # In the background so that TERM reaches the trap at once; `set -e` stays active in it.
    ( eval "$RLARK_RUN_SCRIPT" ) &
    run_pid=$!
    run_status=0
    wait "$run_pid" || run_status=$?
    run_pid=""
    echo "Run script exited with code ${run_status}"
    # RLark goes further: keep the container alive so Kubernetes does not restart it and
    # re-run training; the controller reads the marker above and ends the Job.
    idle_forever
else
    echo "No run script provided, keeping cluster alive."
    idle_forever
fi
