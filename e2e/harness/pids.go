package harness

// PID is the process id of shadowgate serve, whose CPU time the benchmarks read.
func (s *Shadowgate) PID() int { return s.proc.cmd.Process.Pid }

// PIDs are the process ids of kube-apiserver and etcd, whose CPU time the benchmarks read.
func (cp *ControlPlane) PIDs() (apiserver, etcd int) {
	return cp.apiserver.cmd.Process.Pid, cp.etcd.cmd.Process.Pid
}
