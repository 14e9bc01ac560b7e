// Command slurmnode is the local site's virtual node that plays interLink's virtual kubelet
// together with its Slurm plugin: a pod bound to it becomes a batch job of the site's real
// Slurm, submitted as the site's HPC account, and the pod's status, logs and deletion follow
// the job. This package holds the flags and the wiring (main.go), the pod lifecycle
// (provider.go), the pod status a job gives (status.go), logs (logs.go) and the optional
// publication of the compute node into the shadow's node ConfigMap (publish.go); rendering is
// internal/batch's, the Slurm commands internal/slurm's, the Node and kubelet API
// internal/vknode's, and the container runtime the launcher's (launcher/singularity).
package main
