// Package slurmconf renders the slurm.conf of the one-node Slurm clusters the tests and the
// local site run (Debian's slurm-wlm, munge authentication, every file under one directory),
// so the inject tests and the e2e harness start the same Slurm.
package slurmconf

import "fmt"

// Cluster is what differs between two such clusters.
type Cluster struct {
	Name string
	// Controller is the address slurmctld is reached at (it listens on every address);
	// CtldPort and SlurmdPort are the daemons' ports.
	Controller           string
	CtldPort, SlurmdPort int
	// MungeSocket is munged's socket; Dir holds state/, spool/, the pid files and the logs.
	MungeSocket, Dir string
	// Node is the one node's name and NodeAddr where slurmctld reaches its slurmd.
	Node, NodeAddr string
}

// Render is c's slurm.conf.
func (c Cluster) Render() string {
	return fmt.Sprintf(`ClusterName=%[1]s
SlurmctldHost=localhost(%[2]s)
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=%[5]s
CredType=cred/munge
StateSaveLocation=%[6]s/state
SlurmdSpoolDir=%[6]s/spool
SlurmctldPidFile=%[6]s/slurmctld.pid
SlurmdPidFile=%[6]s/slurmd.pid
SlurmctldLogFile=%[6]s/slurmctld.log
SlurmdLogFile=%[6]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=%[7]s NodeAddr=%[8]s CPUs=2 RealMemory=256 State=UNKNOWN
PartitionName=debug Nodes=%[7]s Default=YES MaxTime=INFINITE State=UP
`, c.Name, c.Controller, c.CtldPort, c.SlurmdPort, c.MungeSocket, c.Dir, c.Node, c.NodeAddr)
}
