package harness

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PID is the process id of shadowgate serve, whose CPU time the benchmarks read.
func (s *Shadowgate) PID() int { return s.proc.cmd.Process.Pid }

// PIDs are the process ids of kube-apiserver and etcd, whose CPU time the benchmarks read.
func (cp *ControlPlane) PIDs() (apiserver, etcd int) {
	return cp.apiserver.cmd.Process.Pid, cp.etcd.cmd.Process.Pid
}

// PeakRSS is the most resident memory shadowgate serve has used since it started, in bytes:
// VmHWM of /proc/<pid>/status, which the kernel keeps, so no sampling can miss a peak.
func (s *Shadowgate) PeakRSS() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.PID()))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kB, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kB << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status (%v)", s.PID(), sc.Err())
}
