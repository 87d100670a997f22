#!/usr/bin/env bash
# Build the test control plane (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# etcd, kwok) from the Go module proxy into a cache directory keyed by version; skip what exists.
# Prints the bin directory on its last line. Exit 3 when Go is missing (callers skip on it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.sh
. "$here/versions.sh"
bin="$RLARK_K8S_BIN"
want=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)
missing=0
for b in "${want[@]}"; do [ -x "$bin/$b" ] || missing=1; done
if [ "$missing" = 0 ]; then echo "$bin"; exit 0; fi
if ! command -v go >/dev/null 2>&1; then
  echo "tools/k8s: Go is not installed; cannot build the control plane" >&2; exit 3
fi
mkdir -p "$bin.tmp"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
date_utc="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
minor="$(echo "$KUBE_VERSION" | cut -d. -f2)"
start=$(date +%s)
if ! [ -x "$bin/kube-apiserver" ] || ! [ -x "$bin/kubectl" ]; then
  v=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    v+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    v+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date_utc -X $pkg.gitCommit=module-proxy"
  done
  echo "tools/k8s: building Kubernetes $KUBE_VERSION (first build takes 20-35 min on 2 cores)" >&2
  (cd "$here/kube" && go build -trimpath -ldflags "-s -w $v" -o "$bin.tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
fi
if ! [ -x "$bin/etcd" ]; then
  echo "tools/k8s: building etcd $ETCD_VERSION" >&2
  (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$bin.tmp/etcd" go.etcd.io/etcd/server/v3)
fi
if ! [ -x "$bin/kwok" ]; then
  echo "tools/k8s: building kwok $KWOK_VERSION" >&2
  (cd "$here/kwok" && go build -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$KUBE_VERSION" \
    -o "$bin.tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
fi
mkdir -p "$bin"
for f in "$bin.tmp"/*; do [ -e "$f" ] && mv -f "$f" "$bin/"; done
rmdir "$bin.tmp" 2>/dev/null || true
echo "tools/k8s: built in $(( $(date +%s) - start )) s" >&2
echo "$bin"
