// Module site holds the nodes of the local interLink site that `make dev` and the site e2e run:
// Kubernetes nodes built on the virtual-kubelet library, the way interLink's own virtual
// kubelet is. cmd/processnode is the cluster's ordinary node (it runs the pods bound to it,
// shadows among them, as processes of this machine); cmd/slurmnode is the virtual node that
// plays interLink's virtual kubelet and Slurm plugin (a pod bound to it becomes a batch job of
// the site's real Slurm, its containers run by launcher/singularity; its parts: internal/batch,
// a pod as a batch script, and internal/slurm, the Slurm commands). internal/vknode is what
// both share: registering the Node and serving the kubelet API (logs) over TLS to the API
// server alone. processnode's own parts: internal/procnode (the provider), internal/podrun (a
// pod's containers as processes), internal/volumes (volumes as the kubelet writes them) and
// internal/svcproxy (Services).
//
// The stand-ins, because they cannot exist on the machine the site runs on: no container images
// are pulled (a container runs this machine's own tools; the image name is recorded), and every
// pod shares the host's network, as a hostNetwork pod would. Services work as cluster DNS and
// kube-proxy make them work: processnode's pods find each Service's ClusterIP in their
// /etc/hosts, and an nftables table of the node's sends connections to it on to the Service's
// ready endpoints.
package site
