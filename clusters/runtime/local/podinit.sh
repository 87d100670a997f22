#!/usr/bin/env bash
# Runs as PID 1 of a local Worker's private mount+PID+UTS namespace (started by
# clusters.runtime.local.launcher with `unshare`). Gives the Worker a private /tmp ("$RLARK_POD_TMP",
# like a container's), realises the Pod's mounts at their mountPath from "$RLARK_POD_MOUNTS" (lines:
# kind<TAB>source<TAB>target<TAB>readonly<TAB>options; kind is bind or tmpfs), hides the console's files
# as "$RLARK_POD_HIDE" says (see launcher.hide_plan), sets the hostname, changes to the working directory
# and execs the container command. Nothing here is visible outside.
#
# With "$RLARK_POD_IDMAP" (outer,inner,count; the supervisor is root) everything above runs as root in
# namespaces owned by the host, and the command is exec'd in a new user namespace whose root is the
# unprivileged host uid/gid "outer" (newuidmap/newgidmap, /etc/subuid), with no_new_privs: it can use the
# mounts but neither change nor undo them.
#
# This script runs with the launcher's fixed environment only (launcher.CLEAN_ENV and the RLARK_POD_*
# values it sets): the Worker's own environment stays in the memfd "$RLARK_POD_ENVFD" and is applied by
# envexec.py ("$RLARK_POD_ENVEXEC", run with "$RLARK_POD_PYTHON") after the switch to the job's uid.
set -e
# Both plans are read before anything is mounted: the hide tmpfs below covers the directory they live in
# when the console's state directory is inside a hidden root (its checkout, or any RLARK_VAR_DIR).
mount_rows=""
hide_rows=""
[ -n "${RLARK_POD_MOUNTS:-}" ] && mount_rows="$(cat -- "$RLARK_POD_MOUNTS")"
[ -n "${RLARK_POD_HIDE:-}" ] && hide_rows="$(cat -- "$RLARK_POD_HIDE")"
stage=/rlark/.host-tmp
if [ -n "${RLARK_POD_TMP:-}" ]; then
    # Keep the host's /tmp reachable while binding (sources may live under it, also on file systems mounted
    # below /tmp: hence --rbind), then hide it.
    mkdir -p "$stage" 2> /dev/null || true
    mount --rbind /tmp "$stage"
fi
host_path() {
    case "$1" in
        /tmp) [ -n "${RLARK_POD_TMP:-}" ] && echo "$stage" || echo "$1" ;;
        /tmp/*) [ -n "${RLARK_POD_TMP:-}" ] && echo "$stage/${1#/tmp/}" || echo "$1" ;;
        *) echo "$1" ;;
    esac
}
# A mount point must be the path it names: a symlink on the way (e.g. left in the Worker's own work
# directory by an earlier instance) could otherwise point the mount, or the mkdir, anywhere.
plain_path() {
    [ "$(realpath -m -- "$1")" = "$1" ]
}
if [ -n "${RLARK_POD_TMP:-}" ]; then
    mount --bind "$(host_path "$RLARK_POD_TMP")" /tmp
    chmod 1777 /tmp 2> /dev/null || true
fi
if [ -n "$mount_rows" ]; then
    while IFS=$'\t' read -r kind src dst ro opts; do
        [ -z "$kind" ] && continue
        if ! plain_path "$dst"; then
            echo "rlark: mount point $dst goes through a symlink; not mounted" >&2
            continue
        fi
        if [ ! -d "$dst" ] && ! { [ "$kind" = bind ] && [ -f "$dst" ] && [ -f "$(host_path "$src")" ]; }; then
            mkdir -p "$dst" 2> /dev/null || { echo "rlark: cannot create mount point $dst" >&2; continue; }
        fi
        case "$kind" in
            bind) mount --bind "$(host_path "$src")" "$dst" ;;
            tmpfs) mount -t tmpfs -o "${opts:-size=64m}" tmpfs "$dst" ;;
        esac
        if [ "$ro" = "1" ]; then
            mount -o remount,bind,ro "$dst" || true
        fi
    done <<< "$mount_rows"
fi
deny=/rlark/.deny
keeps=/rlark/.keep
hide=""
if [ -n "$hide_rows" ]; then
    if mkdir -p "$deny" "$keeps" 2> /dev/null; then
        hide=1
    elif [ -n "${RLARK_POD_IDMAP:-}" ]; then
        echo "rlark: cannot create $deny to hide the console's files; not starting" >&2
        exit 1
    else # an unprivileged supervisor whose Workers share its uid anyway
        echo "rlark: cannot create $deny; the console's files are not hidden" >&2
    fi
fi
if [ -n "$hide" ]; then
    # Placeholders owned by the host's root: inside an id-mapped Worker they belong to nobody it knows.
    mount -t tmpfs -o mode=0700,size=16k tmpfs "$deny"
    mkdir -m 0700 "$deny/d"
    install -m 0600 /dev/null "$deny/f"
    mount -t tmpfs -o mode=0700,size=16k tmpfs "$keeps"
    n=0
    current=""
    close_root() {
        [ -n "$current" ] && mount -o remount,ro "$current"
        current=""
    }
    while IFS=$'\t' read -r kind path target; do
        case "$kind" in
            root)
                close_root
                # keep rows of this root: bind them aside before the root is covered
                while IFS=$'\t' read -r k2 p2 _; do
                    if [ "$k2" = keep ] && case "$p2" in "$path"/*) true ;; *) false ;; esac; then
                        n=$((n + 1))
                        mkdir "$keeps/$n"
                        mount --bind "$(host_path "$p2")" "$keeps/$n"
                        echo "$p2" > "$keeps/$n.path"
                    fi
                done <<< "$hide_rows"
                mkdir -p "$path"
                mount -t tmpfs -o mode=0755,size=1m tmpfs "$path"
                current="$path"
                ;;
            deny-dir) mkdir -p "$path" && mount --bind "$deny/d" "$path" ;;
            deny-file) touch "$path" && mount --bind "$deny/f" "$path" ;;
            link) ln -sfn "$target" "$path" ;;
            keep)
                for f in "$keeps"/*.path; do
                    if [ "$(cat "$f")" = "$path" ]; then
                        mkdir -p "$path"
                        mount --move "${f%.path}" "$path"
                        mount -o remount,bind,ro "$path" || true
                    fi
                done
                ;;
        esac
    done <<< "$hide_rows"
    close_root
    umount -l "$keeps"
    umount -l "$deny"
fi
if [ -n "${RLARK_POD_TMP:-}" ]; then
    umount -l "$stage"
fi
if [ -n "${RLARK_POD_HOSTNAME:-}" ]; then hostname "$RLARK_POD_HOSTNAME" 2> /dev/null || true; fi
workdir="${RLARK_POD_WORKDIR:-/}"
idmap="${RLARK_POD_IDMAP:-}"
envexec=("$RLARK_POD_PYTHON" -I -S -c "$RLARK_POD_ENVEXEC" "$RLARK_POD_ENVFD" "$workdir" create)
unset RLARK_POD_MOUNTS RLARK_POD_HIDE RLARK_POD_WORKDIR RLARK_POD_TMP RLARK_POD_IDMAP RLARK_POD_HOSTNAME \
    RLARK_POD_ENVFD RLARK_POD_PYTHON RLARK_POD_ENVEXEC
cd /
if [ -n "$idmap" ]; then
    exec setpriv --no-new-privs unshare --user --map-users="$idmap" --map-groups="$idmap" \
        --setuid 0 --setgid 0 -- "${envexec[@]}" "$@"
fi
exec "${envexec[@]}" "$@"
