#!/usr/bin/env bash
# Runs as PID 1 of a local Worker's private user+mount+PID namespace (started by
# clusters.runtime.local.launcher with `unshare`). Realises the Pod's mounts at their mountPath
# from "$RLARK_POD_MOUNTS" (lines: kind<TAB>source<TAB>target<TAB>readonly<TAB>options; kind is
# bind or tmpfs), changes to the working directory and execs the container command.
set -e
if [ -n "${RLARK_POD_MOUNTS:-}" ] && [ -f "$RLARK_POD_MOUNTS" ]; then
    while IFS=$'\t' read -r kind src dst ro opts; do
        [ -z "$kind" ] && continue
        if [ ! -d "$dst" ]; then
            mkdir -p "$dst" 2> /dev/null || { echo "rlark: cannot create mount point $dst" >&2; continue; }
        fi
        case "$kind" in
            bind) mount --bind "$src" "$dst" ;;
            tmpfs) mount -t tmpfs -o "${opts:-size=64m}" tmpfs "$dst" ;;
        esac
        if [ "$ro" = "1" ]; then
            mount -o remount,bind,ro "$dst" || true
        fi
    done < "$RLARK_POD_MOUNTS"
fi
if [ -n "${POD_NAME:-}" ]; then hostname "$POD_NAME" 2> /dev/null || true; fi
workdir="${RLARK_POD_WORKDIR:-/}"
unset RLARK_POD_MOUNTS RLARK_POD_WORKDIR
cd "$workdir"
exec "$@"
