# Versions of the test control plane, one source of truth for build.sh, the pytest fixture and CI.
# Each must match the wrapper module's go.mod (kube/, etcd/, kwok/).
KUBE_VERSION=v1.35.4
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
RLARK_K8S_CACHE="${RLARK_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlark/k8s}"
RLARK_K8S_BIN="$RLARK_K8S_CACHE/kube-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
# Real nodes (build-node.sh): the kubelet comes from the kube/ module at KUBE_VERSION; CoreDNS from coredns/.
COREDNS_VERSION=v1.14.7
RLARK_NODE_BIN="$RLARK_K8S_CACHE/node-kube-$KUBE_VERSION-coredns-$COREDNS_VERSION"
