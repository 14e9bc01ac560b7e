package slurmconf

import (
	"strings"
	"testing"
)

func TestRenderNamesTheClustersOwnDaemonsFilesAndNode(t *testing.T) {
	conf := Cluster{Name: "site", Controller: "10.213.0.1", CtldPort: 16817, SlurmdPort: 16818,
		MungeSocket: "/run/s/munge.sock", Dir: "/run/s", Node: "sgcompute", NodeAddr: "10.213.0.2"}.Render()
	for name, line := range map[string]string{
		"the cluster":                  "ClusterName=site\n",
		"where slurmctld is reached":   "SlurmctldHost=localhost(10.213.0.1)\n",
		"slurmctld's port":             "SlurmctldPort=16817\n",
		"slurmd's port":                "SlurmdPort=16818\n",
		"munge's socket":               "AuthInfo=socket=/run/s/munge.sock\n",
		"the state under the dir":      "StateSaveLocation=/run/s/state\n",
		"the node at its address":      "NodeName=sgcompute NodeAddr=10.213.0.2 ",
		"the partition of that node":   "PartitionName=debug Nodes=sgcompute Default=YES",
		"no cgroups, which may be off": "ProctrackType=proctrack/linuxproc\n",
	} {
		if !strings.Contains(conf, line) {
			t.Errorf("%s: no %q in\n%s", name, line, conf)
		}
	}
}
