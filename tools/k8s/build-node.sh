#!/usr/bin/env bash
# Build what a real node needs beside Debian's containerd/runc/CNI plugins: the kubelet (from the kube/ wrapper
# module at the pinned KUBE_VERSION, same Go cache as build.sh), CoreDNS (coredns/ wrapper module) and the static
# pause binary (pause/), into a cache directory keyed by version; skip what exists.
# Prints the bin directory on its last line. Exit 3 when Go is missing (callers skip on it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.sh
. "$here/versions.sh"
bin="$RLARK_NODE_BIN"
want=(kubelet coredns pause)
missing=0
for b in "${want[@]}"; do [ -x "$bin/$b" ] || missing=1; done
if [ "$missing" = 0 ]; then echo "$bin"; exit 0; fi
if ! command -v go >/dev/null 2>&1; then
  echo "tools/k8s: Go is not installed; cannot build the node binaries" >&2; exit 3
fi
mkdir -p "$bin.tmp"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
date_utc="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
minor="$(echo "$KUBE_VERSION" | cut -d. -f2)"
if ! [ -x "$bin/pause" ]; then
  (cd "$here/pause" && go build -trimpath -ldflags "-s -w" -o "$bin.tmp/pause" .)
fi
if ! [ -x "$bin/kubelet" ]; then
  start=$(date +%s)
  v=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    v+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    v+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date_utc -X $pkg.gitCommit=module-proxy"
  done
  echo "tools/k8s: building the kubelet $KUBE_VERSION (about 2 min with a warm Go cache)" >&2
  (cd "$here/kube" && go build -trimpath -ldflags "-s -w $v" -o "$bin.tmp/kubelet" k8s.io/kubernetes/cmd/kubelet)
  echo "tools/k8s: kubelet built in $(( $(date +%s) - start )) s" >&2
fi
if ! [ -x "$bin/coredns" ]; then
  start=$(date +%s)
  echo "tools/k8s: building CoreDNS $COREDNS_VERSION (about 5 min)" >&2
  (cd "$here/coredns" && go build -trimpath -ldflags "-s -w" -o "$bin.tmp/coredns" .)
  echo "tools/k8s: CoreDNS built in $(( $(date +%s) - start )) s" >&2
fi
mkdir -p "$bin"
for f in "$bin.tmp"/*; do [ -e "$f" ] && mv -f "$f" "$bin/"; done
rmdir "$bin.tmp" 2>/dev/null || true
echo "$bin"
