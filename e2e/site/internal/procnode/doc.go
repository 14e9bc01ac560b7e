// Package procnode is the virtual-kubelet provider of the site's ordinary cluster node: it
// keeps the pods bound to the node, runs each with podrun over volumes materialised by
// volumes, refreshes those volumes and every pod's /etc/hosts as their sources change, runs
// the Service proxy (svcproxy), and reports pod status to the library asynchronously
// (node.PodNotifier). It answers the kubelet API's logs and exec from podrun. The node's state
// directory holds one directory per pod (volumes, logs, hosts file), removed with the pod.
package procnode
