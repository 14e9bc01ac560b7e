package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on every Linux port.
const clockTicks = 100

// NumCPU is the number of CPUs this process may run on.
func NumCPU() int { return runtime.NumCPU() }

// ProcessCPU returns the CPU time (user and system) process pid has used. Dividing work by
// it gives work per core-second, which other load on a shared machine inflates far less than
// work per wall-clock second.
func ProcessCPU(pid int) (time.Duration, error) {
	p, err := ReadProcess(pid)
	return p.CPU, err
}

// Process is what ReadProcess reads of a process's /proc/<pid>/stat.
type Process struct {
	PID, PPID, PGRP int
	Comm            string        // the command name, at most 15 bytes
	CPU             time.Duration // user and system time so far
}

// ReadProcess reads /proc/<pid>/stat.
func ReadProcess(pid int) (Process, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Process{}, err
	}
	p, err := parseStat(string(b))
	if err != nil {
		return Process{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return p, nil
}

// Processes reads every process's stat; a process that ends meanwhile is left out.
func Processes() ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		p, err := ReadProcess(pid)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // ended
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Descendants is the set of procs that descend from any of roots, roots included.
func Descendants(procs []Process, roots ...int) map[int]bool {
	children := map[int][]int{}
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	out := map[int]bool{}
	for next := slices.Clone(roots); len(next) > 0; {
		p := next[len(next)-1]
		next = next[:len(next)-1]
		if !out[p] {
			out[p] = true
			next = append(next, children[p]...)
		}
	}
	return out
}

// parseStat reads a stat line: "pid (comm) state ppid pgrp ... utime stime ...". The command
// name may hold spaces and parentheses, so the fields are counted after its last ')'.
func parseStat(s string) (Process, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return Process{}, fmt.Errorf("no command name")
	}
	fields := strings.Fields(s[end+1:])
	// After the name: state is field 3 of stat(5), ppid 4, pgrp 5, utime and stime 14 and 15.
	if len(fields) < 13 {
		return Process{}, fmt.Errorf("%d fields", len(fields))
	}
	var n [5]int64
	for i, f := range []string{strings.TrimSpace(s[:open]), fields[1], fields[2], fields[11], fields[12]} {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return Process{}, err
		}
		n[i] = v
	}
	return Process{PID: int(n[0]), PPID: int(n[1]), PGRP: int(n[2]), Comm: s[open+1 : end],
		CPU: time.Duration(n[3]+n[4]) * time.Second / clockTicks}, nil
}

// CPUPerOp starts measuring the CPU time (user and system, all threads: the garbage
// collector's too) this process spends; the function it returns reports it per iteration as
// the benchmark metric cpu-ns/op. A loaded machine stretches ns/op, the wall-clock time, by
// the time the benchmark waited for a CPU; it stretches this far less.
func CPUPerOp(b *testing.B) func() {
	start, err := selfCPU()
	if err != nil {
		b.Fatal(err)
	}
	return func() {
		end, err := selfCPU()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
}

func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
