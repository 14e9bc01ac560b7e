package bench

import (
	"fmt"
	"os"
	"runtime"
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
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields are counted after it.
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[end+1:])
	// After the name: state is field 3 of stat(5); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
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
