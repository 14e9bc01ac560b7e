package harness

import (
	"context"
	"strings"
)

// ServiceAccountKubeconfig writes to path a kubeconfig that authenticates as the ServiceAccount
// namespace/name with a token the API server issues for it (TokenRequest, as the kubelet gets
// one for a pod), so a process runs with exactly the rights RBAC gives that ServiceAccount.
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, k Kubectl, namespace, name, path string) error {
	token, err := k.Must(ctx, "", "create", "token", name, "-n", namespace, "--duration=1h")
	if err != nil {
		return err
	}
	return writeKubeconfig(path, cp.Server, cp.Admin.CAData, "system:serviceaccount:"+namespace+":"+name, strings.TrimSpace(token))
}
