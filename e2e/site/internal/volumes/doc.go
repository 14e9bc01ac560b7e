// Package volumes materialises a pod's volumes in the node's state directory the way the
// kubelet's volume plugins do: ConfigMap, Secret, projected and downwardAPI volumes are written
// with the kubelet's atomic-writer scheme (a ..data symlink to a timestamped directory, one
// symlink per top-level path) so that a refresh swaps every file at once and a reader never
// sees half an update; emptyDir is a plain directory (or a tmpfs for medium Memory). fsGroup
// ownership follows the kubelet's SetVolumeOwnership: group fsGroup, group-readable (and
// group-writable for writable volumes), setgid directories. What this package does not do is
// mount anything into a container: it hands back host directories; podrun binds them.
package volumes
