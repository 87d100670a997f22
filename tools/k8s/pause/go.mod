// The sandbox ("pause") process for real-node Pods: standard library only.
module rlark.local/tools/k8s/pause

go 1.25.0
