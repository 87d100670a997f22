#!/usr/bin/env bash
# RLark Ray worker wrapper (upstream-rlark 5.3). Every echoed marker is byte-identical to
# upstream; "goes further": the wrapper exits with the Ray worker process's exit code.
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

ssh_keys="${RLARK_SSH_PUBLIC_KEYS:-}"
if [ -n "${RLARK_SSH_PUBLIC_KEY:-}" ]; then
    ssh_keys="${ssh_keys:+${ssh_keys}
}${RLARK_SSH_PUBLIC_KEY}"
fi
if [ -n "$ssh_keys" ]; then
    mkdir -p "$HOME/.ssh"
    chmod 700 "$HOME/.ssh"
    touch "$HOME/.ssh/authorized_keys"
    chmod 600 "$HOME/.ssh/authorized_keys"
    while IFS= read -r key; do
        key="${key%$'\r'}"
        [ -z "$key" ] && continue
        grep -qxF -- "$key" "$HOME/.ssh/authorized_keys" || printf '%s\n' "$key" >> "$HOME/.ssh/authorized_keys"
    done <<< "$ssh_keys"
    echo "SSH public key injected into authorized_keys"
fi

if [ -n "${RLARK_PREPARE_SCRIPT:-}" ]; then
    echo "Executing prepare script..."
    eval "$RLARK_PREPARE_SCRIPT"
fi

if ! command -v ray > /dev/null 2>&1; then
    echo "Error: Ray CLI is not found. Please ensure Ray is installed." >&2
    exit 1
fi

RAY_TEMP_DIR="${RAY_TEMP_DIR:-/tmp/ray}"
HEAD_ADDRESS="${RLARK_HEAD_ADDRESS}"
echo "Connecting to Ray head at ${HEAD_ADDRESS}:${RLARK_RAY_PORT}..."

head_target="$HEAD_ADDRESS"
head_reachable=""
if command -v getent > /dev/null 2>&1; then
    for k in $(seq 1 "${RLARK_HEAD_WAIT_ATTEMPTS:-120}"); do
        head_ip="$(timeout 5 getent hosts "$HEAD_ADDRESS" | awk '{print $1; exit}' || true)"
        if [ -n "$head_ip" ]; then
            echo "HEAD IP: ${head_ip}"
            if timeout 1 bash -c "exec 3<>/dev/tcp/${head_ip}/${RLARK_RAY_PORT}" 2> /dev/null; then
                echo "Head is reachable at ${head_ip}:${RLARK_RAY_PORT}"
                head_target="$head_ip"
                head_reachable=1
                break
            fi
        fi
        echo "Waiting for head to be reachable at ${HEAD_ADDRESS}:${RLARK_RAY_PORT}... (attempt ${k})"
        sleep 1
    done
fi

ray_pid=""
stopping=""
stop_worker() {
    trap - INT TERM
    stopping=1
    echo "Stopping Ray worker..."
    timeout "${RLARK_RAY_STOP_TIMEOUT:-60}" ray stop --force > /dev/null 2>&1 || true
    if [ -n "$ray_pid" ]; then
        kill -TERM "$ray_pid" 2> /dev/null || true
    fi
}
trap 'stop_worker; exit 143' TERM
trap 'stop_worker; exit 130' INT

# RLark goes further: a node that never started although its head was reachable (its raylet missed Ray's
# registration window on a loaded machine: "The current node timed out during startup ... the GCS has become
# overloaded") is started again, up to RLARK_RAY_START_ATTEMPTS times. Told apart by Ray's own "Ray runtime
# started." line: a node that did start and then ended, one whose head was never reachable (a network fault that
# a retry does not mend), or one stopped on purpose (TERM), is never retried. Every attempt keeps its Ray logs.
start_log="$(mktemp "${TMPDIR:-/tmp}/rlark-ray-start.XXXXXX")"
attempts="${RLARK_RAY_START_ATTEMPTS:-3}"
attempt=1
while :; do
    : > "$start_log"
    ray start --address="${head_target}:${RLARK_RAY_PORT}" --temp-dir "$RAY_TEMP_DIR" --block \
        > >(tee -a "$start_log") 2>&1 &
    ray_pid=$!
    ray_status=0
    wait "$ray_pid" || ray_status=$?
    ray_pid=""
    if [ "$ray_status" = 0 ] || [ -n "$stopping" ] || [ -z "$head_reachable" ] \
        || grep -q "Ray runtime started" "$start_log" || [ "$attempt" -ge "$attempts" ]; then
        break
    fi
    attempt=$((attempt + 1))
    echo "Ray worker did not start (exit code ${ray_status}); starting it again (attempt ${attempt} of ${attempts})..."
    timeout "${RLARK_RAY_STOP_TIMEOUT:-60}" ray stop --force > /dev/null 2>&1 || true
    sleep $((attempt * 5))
done
rm -f "$start_log"
echo "Ray worker process exited with code ${ray_status}"
stop_worker
# RLark goes further: exit with the Ray process's code (upstream always exits 0).
exit "$ray_status"
