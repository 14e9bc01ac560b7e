// Module site holds the parts of the local interLink site that `make dev` and the site e2e run
// that are not real Kubernetes or HPC parts. cmd/slurmnode is the virtual node that plays
// interLink's virtual kubelet and Slurm plugin, built on the virtual-kubelet library as
// interLink's own virtual kubelet is (a pod bound to it becomes a batch job of the site's real
// Slurm, its containers run by launcher/singularity; its parts: internal/batch, a pod as a batch
// script, internal/slurm, the Slurm commands, and internal/vknode, registering the Node and
// serving the kubelet API (logs) over TLS to the API server alone). cmd/pageserver is the
// in-cluster server the site's tests reach through the reverse tunnel, a static binary alone in
// its image on the real cluster node.
//
// The cluster node itself is real (e2e/harness StartNode: kubelet, containerd, CNI, kube-proxy,
// CoreDNS); docs/local-site.md names every stand-in left.
package site
