// Package podrun runs one pod's containers as processes of this machine, as a kubelet and its
// container runtime would as far as the pod can tell: init containers in order (native
// sidecars kept running), then the containers, each in private mount and UTS namespaces (the
// pod's hostname) where the pod's volumes, its /etc/hosts and its termination-message file are
// bind-mounted, under the pod's and container's user and groups, in its own process group
// (killed whole when its first process ends or the pod stops); restarts by restartPolicy
// with the kubelet's crash-loop back-off; exec, tcpSocket and httpGet probes; container and
// pod status; logs in the CRI log format. It does not fetch anything from the API server: the
// caller hands it the volume directories and the listers env is resolved from.
//
// Images are not pulled: a container runs this machine's binaries named by its command.
//
// The namespaces share the host's filesystem, so a mount target the host lacks must be
// created on it: Mountpoints creates such paths for the pods' lifetime and removes them after
// the last pod that needed them. A target below a file of the host (this machine's
// /etc/shadow, the password file) is refused, as a container runtime refuses a mount below a
// file of its image.
//
// A container process starts as a re-exec of the running binary (HelperArg), which makes
// the mounts inside the new namespace, drops to the container's credentials and execs the
// command: so every binary that runs pods must call RunHelperIfRequested first thing in main
// (and TestMain).
package podrun
