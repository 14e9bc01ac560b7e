package main

import (
	"strings"
	"testing"
)

// check, render and policy check take serve's two credential flags with its defaults, and
// judge as a serve run with them: the guide's notebook with shadow-same-ns on a node that
// replicates its key, as a Pod and as a Deployment's template, refused unless the unsafe
// --credentials-in-pod-namespaces=true is given; the example notebook, whose shadow lives in
// user-shadow; and the example policy, which replicates.
func TestOfflineCommandsJudgeUnderServesCredentialFlags(t *testing.T) {
	const sameNSNotebook = `apiVersion: v1
kind: Pod
metadata:
  name: notebook
  namespace: user
  annotations: {interlink.eu/shadow-same-ns: "true"}
spec:
  nodeSelector: {kubernetes.io/hostname: hpc-vk}
  containers: [{name: jupyter, image: jupyter, ports: [{containerPort: 8888}]}]
`
	const notebookDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: notebooks, namespace: user}
spec:
  selector: {matchLabels: {app: nb}}
  template:
    metadata:
      labels: {app: nb}
      annotations: {interlink.eu/shadow-same-ns: "true"}
    spec:
      nodeSelector: {kubernetes.io/hostname: hpc-vk}
      containers: [{name: jupyter, image: jupyter, ports: [{containerPort: 8888}]}]
`
	const sameNS = "the shadow would live in namespace user and the site's credentials (Secret hpc-ssh-key of virtual node hpc-vk) would be copied there"
	const noReplication = "data[policy.yaml].virtualNodes[hpc-vk].Network.SSH.ReplicateCredentials: Invalid value: true: shadowgate runs with --credential-replication=false"
	const noReplicationDoc = "virtualNodes[hpc-vk].Network.SSH.ReplicateCredentials: Invalid value: true: shadowgate runs with --credential-replication=false"
	for name, c := range map[string]struct {
		stdin    string
		args     []string
		code     int
		contains string
	}{
		"check admits the example notebook with serve's defaults": {"", []string{"check", "--policy", examplePolicy, "-f", notebook}, 0, "Pod user/notebook: admitted"},
		"check refuses the same-ns notebook with serve's defaults": {sameNSNotebook,
			[]string{"check", "--policy", examplePolicy, "-f", "-"}, 1,
			"Pod user/notebook: metadata.annotations[interlink.eu/shadow-same-ns]: Forbidden: " + sameNS},
		"check admits the same-ns notebook with --credentials-in-pod-namespaces=true": {sameNSNotebook,
			[]string{"check", "--policy", examplePolicy, "-f", "-", "--credentials-in-pod-namespaces=true"}, 0, "Pod user/notebook: admitted"},
		"check refuses a Deployment of notebooks under its template's path": {notebookDeployment,
			[]string{"check", "--policy", examplePolicy, "-f", "-"}, 1,
			"Deployment user/notebooks: spec.template.metadata.annotations[interlink.eu/shadow-same-ns]: Forbidden: " + sameNS},
		"render refuses the same-ns notebook with serve's defaults": {sameNSNotebook,
			[]string{"render", "--policy", examplePolicy, "-f", "-"}, 1, sameNS},
		"policy check refuses a replicating policy with --credential-replication=false": {"",
			[]string{"policy", "check", "--policy", examplePolicy, "--credential-replication=false"}, 1, noReplicationDoc},
		"check refuses to judge under a policy serve would not start with": {"",
			[]string{"check", "--policy", examplePolicy, "-f", notebook, "--credential-replication=false"}, 2, noReplicationDoc},
		"check judges the policy ConfigMap as /validate-configmaps does": {"",
			[]string{"check", "--policy", "testdata/policy-without-replication.yaml", "-f", examplePolicy, "--credential-replication=false"}, 1, noReplication},
	} {
		code, out, errOut := runCLI(t, c.stdin, c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.contains) {
			t.Errorf("%s: exit %d, want %d with %q:\n%s%s", name, code, c.code, c.contains, out, errOut)
		}
	}
}
