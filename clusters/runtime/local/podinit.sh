#!/usr/bin/env bash
# Runs as PID 1 of a local Worker's private user+mount+PID+UTS namespace (started by
# clusters.runtime.local.launcher with `unshare`). Gives the Worker a private /tmp ("$RLARK_POD_TMP",
# like a container's), realises the Pod's mounts at their mountPath from "$RLARK_POD_MOUNTS" (lines:
# kind<TAB>source<TAB>target<TAB>readonly<TAB>options; kind is bind or tmpfs), sets the hostname,
# changes to the working directory and execs the container command. Nothing here is visible outside.
set -e
stage=/rlark/.host-tmp
if [ -n "${RLARK_POD_TMP:-}" ]; then
    # Keep the host's /tmp reachable while binding (sources may live under it), then hide it.
    mkdir -p "$stage" 2> /dev/null || true
    mount --bind /tmp "$stage"
fi
host_path() {
    case "$1" in
        /tmp) [ -n "${RLARK_POD_TMP:-}" ] && echo "$stage" || echo "$1" ;;
        /tmp/*) [ -n "${RLARK_POD_TMP:-}" ] && echo "$stage/${1#/tmp/}" || echo "$1" ;;
        *) echo "$1" ;;
    esac
}
if [ -n "${RLARK_POD_TMP:-}" ]; then
    mount --bind "$(host_path "$RLARK_POD_TMP")" /tmp
    chmod 1777 /tmp 2> /dev/null || true
fi
if [ -n "${RLARK_POD_MOUNTS:-}" ]; then
    mounts_file="$(host_path "$RLARK_POD_MOUNTS")"
    while IFS=$'\t' read -r kind src dst ro opts; do
        [ -z "$kind" ] && continue
        if [ ! -d "$dst" ]; then
            mkdir -p "$dst" 2> /dev/null || { echo "rlark: cannot create mount point $dst" >&2; continue; }
        fi
        case "$kind" in
            bind) mount --bind "$(host_path "$src")" "$dst" ;;
            tmpfs) mount -t tmpfs -o "${opts:-size=64m}" tmpfs "$dst" ;;
        esac
        if [ "$ro" = "1" ]; then
            mount -o remount,bind,ro "$dst" || true
        fi
    done < "$mounts_file"
fi
if [ -n "${RLARK_POD_TMP:-}" ]; then
    umount -l "$stage"
fi
if [ -n "${POD_NAME:-}" ]; then hostname "$POD_NAME" 2> /dev/null || true; fi
workdir="${RLARK_POD_WORKDIR:-/}"
unset RLARK_POD_MOUNTS RLARK_POD_WORKDIR RLARK_POD_TMP
cd "$workdir"
exec "$@"
