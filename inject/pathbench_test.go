package inject

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/bench"
)

// The tunnel benchmarks (forward_bench_test.go, reverse_bench_test.go) measure a TCP path,
// a shadow's tunnel or the plain ssh it is compared with, by what users of a notebook feel:
// bulk throughput each way, the latency of small round trips, how fast new connections are
// set up, and how many of a crowd of connections opened at once complete. Every path ends in
// a benchServer, which speaks the little protocol below on each connection it accepts.

// The first byte a client sends names what the connection is for.
const (
	opUpload   = 'U' // then 8 bytes of length and that many bytes; the server answers one byte
	opDownload = 'D' // then 8 bytes of length; the server sends that many bytes
	opEcho     = 'E' // then any traffic, echoed back as it arrives
	opPing     = 'P' // the server answers one byte and closes: one connection's set-up
	// opRequest: then requests of a 2-byte header and a 2-byte body, each written on its
	// own, answered with one reply written at once: a client that writes twice before it
	// reads, which Nagle's algorithm holds up until the peer's delayed ACK.
	opRequest = 'R'
	// opSplitReply: requests as opRequest, each answered in two writes of 2 bytes, as a
	// server writes a header and then a body: the relay passes each on as it comes, and
	// without TCP_NODELAY its second waits for the client's ACK of the first.
	opSplitReply = 'S'
	// opLateAnswer: then any traffic until the client's end of data; the server answers
	// lateAnswerDelay later with 8 bytes, the number of bytes it got, and closes: an answer
	// that follows the client's end, as a batch query's does.
	opLateAnswer = 'A'
)

const lateAnswerDelay = time.Second

const (
	bulkBytes     = 200 << 20 // each way, as the issue asks
	roundTrips    = 1000
	roundTripSize = 64
	setups        = 50 // sequential new connections per measurement
	requests      = 50 // write-write-read requests per measurement
)

// benchServer is the far end of a path: it speaks the protocol above on every connection.
type benchServer struct {
	ln net.Listener
	wg sync.WaitGroup
}

// startBenchServer listens on addr:port (port 0: a free one) until the benchmark ends.
func startBenchServer(tb testing.TB, addr string, port int) *benchServer {
	tb.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		tb.Fatalf("bench server: %v", err)
	}
	s := &benchServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() { defer s.wg.Done(); serveBench(c) }()
		}
	}()
	tb.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

// Port is the port the server listens on.
func (s *benchServer) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func serveBench(c net.Conn) {
	defer c.Close()
	var op [1]byte
	if _, err := io.ReadFull(c, op[:]); err != nil {
		return
	}
	switch op[0] {
	case opUpload:
		n, ok := readLength(c)
		if ok {
			if _, err := io.CopyN(io.Discard, c, n); err == nil {
				_, _ = c.Write([]byte{1})
			}
		}
	case opDownload:
		if n, ok := readLength(c); ok {
			_, _ = io.CopyN(c, zeros{}, n)
		}
	case opEcho:
		_, _ = io.Copy(c, c)
	case opPing:
		_, _ = c.Write([]byte{1})
	case opLateAnswer:
		n, err := io.Copy(io.Discard, c)
		if err == nil {
			time.Sleep(lateAnswerDelay)
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], uint64(n))
			_, _ = c.Write(b[:])
		}
	case opRequest, opSplitReply:
		var req [4]byte
		for {
			if _, err := io.ReadFull(c, req[:]); err != nil {
				return
			}
			if op[0] == opSplitReply {
				if _, err := c.Write(req[:2]); err != nil {
					return
				}
				time.Sleep(time.Millisecond) // the two parts travel apart, as a slow server's do
				if _, err := c.Write(req[2:]); err != nil {
					return
				}
				continue
			}
			if _, err := c.Write(req[:]); err != nil {
				return
			}
		}
	}
}

func readLength(r io.Reader) (int64, bool) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b[:])), true
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// pathUsers holds the paths whose entrance lets in only one user's connections, address to
// uid: a reverse tunnel's relay passes on only those of its job's user (dialPath connects
// as that user).
var pathUsers sync.Map

// connectAs makes every connection the measurements open to addr one of uid's, until the
// benchmark ends.
func connectAs(tb testing.TB, addr string, uid uint32) {
	pathUsers.Store(addr, uid)
	tb.Cleanup(func() { pathUsers.Delete(addr) })
}

// dialTCPAs opens a TCP connection to addr whose socket belongs to uid, for a process running as
// root. A socket belongs to the filesystem uid of the thread that creates it (the uid that
// /proc/net/tcp and sock_diag show), and setfsuid changes only the calling thread's: so the
// goroutine holds its thread, creates the socket there as uid, and gives the thread back as
// root.
func dialTCPAs(network string, uid uint32, addr string, timeout time.Duration) (net.Conn, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
	defer syscall.RawSyscall(syscall.SYS_SETFSUID, 0, 0, 0)
	return net.DialTimeout(network, addr, timeout)
}

// dialPath opens a connection to a path's entrance, as its user when pathUsers names one,
// and says what it is for.
func dialPath(addr string, op byte) (net.Conn, error) {
	var c net.Conn
	var err error
	if uid, ok := pathUsers.Load(addr); ok {
		c, err = dialTCPAs("tcp", uid.(uint32), addr, 30*time.Second)
	} else {
		c, err = net.DialTimeout("tcp", addr, 30*time.Second)
	}
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{op}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// pathFigures is one measurement of a path.
type pathFigures struct {
	upMiBps, downMiBps float64
	rttP50, rttP99     time.Duration
	setupPerSec        float64       // at the median set-up time, measureSetups
	requestP50         time.Duration // write-write-read, measureRequests
	splitReplyP50      time.Duration // the same answered in two writes
}

// measureBulk sends bulkBytes through the path and back, returning MiB/s each way.
func measureBulk(addr string) (up, down float64, err error) {
	length := make([]byte, 8)
	binary.BigEndian.PutUint64(length, bulkBytes)
	c, err := dialPath(addr, opUpload)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if _, err := c.Write(length); err != nil {
		c.Close()
		return 0, 0, err
	}
	if _, err := io.CopyN(c, zeros{}, bulkBytes); err != nil {
		c.Close()
		return 0, 0, fmt.Errorf("upload: %w", err)
	}
	var ack [1]byte
	_, err = io.ReadFull(c, ack[:])
	up = mibps(bulkBytes, time.Since(start))
	c.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("upload's answer: %w", err)
	}

	if c, err = dialPath(addr, opDownload); err != nil {
		return 0, 0, err
	}
	defer c.Close()
	start = time.Now()
	if _, err := c.Write(length); err != nil {
		return 0, 0, err
	}
	if _, err := io.CopyN(io.Discard, c, bulkBytes); err != nil {
		return 0, 0, fmt.Errorf("download: %w", err)
	}
	return up, mibps(bulkBytes, time.Since(start)), nil
}

func mibps(n int64, d time.Duration) float64 { return float64(n) / (1 << 20) / d.Seconds() }

// measureRoundTrips times roundTrips round trips of roundTripSize bytes over one connection.
func measureRoundTrips(addr string) (p50, p99 time.Duration, err error) {
	c, err := dialPath(addr, opEcho)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	buf := make([]byte, roundTripSize)
	times := make([]time.Duration, 0, roundTrips)
	for range roundTrips {
		start := time.Now()
		if _, err := c.Write(buf); err != nil {
			return 0, 0, err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return 0, 0, err
		}
		times = append(times, time.Since(start))
	}
	return quantile(times, 0.5), quantile(times, 0.99), nil
}

// measureSetups opens setups connections through each of addrs, one at a time and taking
// turns, so a drift of the machine's load touches every path alike; each waits for the far
// end's answer. It returns each path's set-ups per second at its median set-up time, which
// one slow connection (a scheduling delay on a loaded machine) does not move.
func measureSetups(addrs ...string) ([]float64, error) {
	times := make([][]time.Duration, len(addrs))
	for range setups {
		for i, addr := range addrs {
			start := time.Now()
			if err := ping(addr); err != nil {
				return nil, fmt.Errorf("through %s: %w", addr, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	rates := make([]float64, len(addrs))
	for i, t := range times {
		rates[i] = 1 / medianDuration(t).Seconds()
	}
	return rates, nil
}

// ping is one connection's set-up: connect, and wait for the far end's byte.
func ping(addr string) error {
	c, err := dialPath(addr, opPing)
	if err != nil {
		return err
	}
	defer c.Close()
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err = io.ReadFull(c, b[:])
	return err
}

// measureRequests times requests write-write-read requests over one connection: the small
// writes Nagle's algorithm holds back unless TCP_NODELAY is set on every hop.
func measureRequests(addr string) (time.Duration, error) { return measureRequestsOp(addr, opRequest) }

// measureRequestsOp is measureRequests with the server's answer of op: opRequest or
// opSplitReply.
func measureRequestsOp(addr string, op byte) (time.Duration, error) {
	c, err := dialPath(addr, op)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true) // the client's own writes go out at once; the path's hops are measured
	}
	var reply [4]byte
	times := make([]time.Duration, 0, requests)
	for range requests {
		start := time.Now()
		if _, err := c.Write([]byte("hd")); err != nil {
			return 0, err
		}
		if _, err := c.Write([]byte("by")); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, reply[:]); err != nil {
			return 0, err
		}
		times = append(times, time.Since(start))
	}
	return quantile(times, 0.5), nil
}

// measurePath takes every figure of pathFigures through addr.
func measurePath(addr string) (pathFigures, error) {
	var f pathFigures
	var err error
	if f.upMiBps, f.downMiBps, err = measureBulk(addr); err != nil {
		return f, fmt.Errorf("bulk: %w", err)
	}
	if f.rttP50, f.rttP99, err = measureRoundTrips(addr); err != nil {
		return f, fmt.Errorf("round trips: %w", err)
	}
	if f.requestP50, err = measureRequests(addr); err != nil {
		return f, fmt.Errorf("write-write-read: %w", err)
	}
	if f.splitReplyP50, err = measureRequestsOp(addr, opSplitReply); err != nil {
		return f, fmt.Errorf("split reply: %w", err)
	}
	return f, nil
}

// crowdResult is what became of connections opened all at once.
type crowdResult struct {
	completed int
	errs      []error
	wall      time.Duration
}

// measureCrowd opens n connections at once, each doing one round trip of 1 KiB and closing,
// as a notebook's page opens its requests: every one must complete, queued when the path
// cannot carry them all at the same time, never reset.
func measureCrowd(addr string, n int) crowdResult {
	var (
		mu      sync.Mutex
		res     crowdResult
		started = time.Now()
		done    sync.WaitGroup
	)
	for range n {
		done.Add(1)
		go func() {
			defer done.Done()
			err := func() error {
				c, err := dialPath(addr, opEcho)
				if err != nil {
					return err
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
				buf := make([]byte, 1024)
				if _, err := c.Write(buf); err != nil {
					return err
				}
				_, err = io.ReadFull(c, buf)
				return err
			}()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errs = append(res.errs, err)
			} else {
				res.completed++
			}
		}()
	}
	done.Wait()
	res.wall = time.Since(started)
	return res
}

// summary is the first few distinct errors of a crowd, for a failure message.
func (r crowdResult) summary() string {
	seen := map[string]int{}
	for _, err := range r.errs {
		seen[err.Error()]++
	}
	var lines []string
	for msg, n := range seen {
		lines = append(lines, fmt.Sprintf("%dx %s", n, msg))
	}
	slices.Sort(lines)
	if len(lines) > 5 {
		lines = append(lines[:5], "...")
	}
	return strings.Join(lines, "; ")
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianDuration(d []time.Duration) time.Duration {
	v := make([]float64, len(d))
	for i, x := range d {
		v[i] = float64(x)
	}
	return time.Duration(median(v))
}

// pairedFigures collects the rounds of a path and its baseline, measured alternately.
type pairedFigures struct {
	path, base []pathFigures
}

// report gives the medians over the rounds as benchmark metrics: "<what>-<figure>" for the
// path and for the baseline, and the ratios the targets are written in.
func (p pairedFigures) report(b *testing.B) {
	b.Helper()
	reportFigures(b, "tunnel-", p.path)
	reportFigures(b, "plain-", p.base)
}

// reportFigures gives the medians of a path's rounds as benchmark metrics, each named prefix
// and the figure.
func reportFigures(b *testing.B, prefix string, rounds []pathFigures) {
	b.Helper()
	get := func(f func(pathFigures) float64) float64 {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = f(r)
		}
		return median(v)
	}
	figures := []struct {
		name string
		f    func(pathFigures) float64
	}{
		{"up-MiB/s", func(r pathFigures) float64 { return r.upMiBps }},
		{"down-MiB/s", func(r pathFigures) float64 { return r.downMiBps }},
		{"rtt-p50-us", func(r pathFigures) float64 { return float64(r.rttP50) / 1e3 }},
		{"rtt-p99-us", func(r pathFigures) float64 { return float64(r.rttP99) / 1e3 }},
		{"setup/s", func(r pathFigures) float64 { return r.setupPerSec }},
		{"wwr-p50-us", func(r pathFigures) float64 { return float64(r.requestP50) / 1e3 }},
		{"split-reply-p50-us", func(r pathFigures) float64 { return float64(r.splitReplyP50) / 1e3 }},
	}
	for _, fig := range figures {
		b.ReportMetric(get(fig.f), prefix+fig.name)
	}
}

// tunnelRounds multiplies the rounds of a tunnel benchmark. go test runs a benchmark once
// with b.N = 1 before it runs it with -test.benchtime's count, so with 3x each site would be
// built twice and measured four times; make bench runs 1x with this flag instead.
var tunnelRounds = flag.Int("tunnel.rounds", 1, "interleaved rounds of each tunnel benchmark for each b.N")

// benchRounds is how many interleaved rounds a tunnel benchmark measures.
func benchRounds(b *testing.B) int { return b.N * *tunnelRounds }

// measurePaired measures path and base alternately for benchRounds rounds, the baseline first in
// every other round, so a drift of the machine's load touches both alike.
func measurePaired(b *testing.B, path, base string) pairedFigures {
	b.Helper()
	rounds := measureInterleaved(b, path, base)
	return pairedFigures{path: rounds[0], base: rounds[1]}
}

// measureInterleaved measures every path of addrs once a round for benchRounds rounds, each round
// starting one path further along, their set-ups taking turns (measureSetups), and returns each
// path's rounds in the order of addrs.
func measureInterleaved(b *testing.B, addrs ...string) [][]pathFigures {
	b.Helper()
	rounds := make([][]pathFigures, len(addrs))
	for round := range benchRounds(b) {
		order := make([]string, len(addrs)) // this round's, one path further along than the last
		for k := range addrs {
			order[k] = addrs[(round+k)%len(addrs)]
		}
		figures := make([]pathFigures, len(addrs))
		for k, addr := range order {
			f, err := measurePath(addr)
			if err != nil {
				b.Fatalf("through %s: %v", addr, err)
			}
			figures[k] = f
		}
		rates, err := measureSetups(order...)
		if err != nil {
			b.Fatalf("set-up: %v", err)
		}
		for k, rate := range rates {
			figures[k].setupPerSec = rate
			i := (round + k) % len(addrs)
			rounds[i] = append(rounds[i], figures[k])
		}
	}
	return rounds
}

// groupMemory is the memory of every process of a process group, as the kernel charges a
// container for it (the sum of proportional set sizes: a page shared by n processes counts
// 1/n to each), in bytes.
func groupMemory(pgid int) (int64, error) {
	procs, err := bench.Processes()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, p := range procs {
		if p.PGRP == pgid {
			total += pss(filepath.Join("/proc", strconv.Itoa(p.PID), "smaps_rollup"))
		}
	}
	return total, nil
}

// carrierCommands are the programs a tunnel's bytes pass through, whose CPU measureBulkCPU
// counts: OpenSSH's client and server, Slurm's srun and step daemon, the relay (python3),
// socat and netcat. The bench's own client and server are counted apart ("bench").
var carrierCommands = []string{"ssh", "sshd", "srun", "slurmstepd", "python3", "socat", "nc"}

// measureBulkCPU sends bulkBytes through the path and back, as measureBulk does, and returns
// the CPU each of carrierCommands spent per MiB carried (both ways counted), with "total"
// their sum and "bench" this process's. Only this process's descendants are counted (every
// server and client of the site and Slurm's daemons), and Slurm's steps', and only those alive
// before and after: a tunnel's sessions outlive the transfer.
func measureBulkCPU(addr string) (map[string]float64, error) {
	before, err := bench.Processes()
	if err != nil {
		return nil, err
	}
	if _, _, err := measureBulk(addr); err != nil {
		return nil, err
	}
	after, err := bench.Processes()
	if err != nil {
		return nil, err
	}
	was := map[int]bench.Process{}
	for _, p := range before {
		was[p.PID] = p
	}
	// slurmd starts each slurmstepd detached, a child of init: the steps' processes (the
	// relay's connect among them) are counted from there. This machine's Slurm is the tests'.
	roots := []int{os.Getpid()}
	for _, p := range after {
		if p.Comm == "slurmstepd" {
			roots = append(roots, p.PID)
		}
	}
	ours := bench.Descendants(after, roots...)
	mib := float64(2*bulkBytes) / (1 << 20)
	perMiB := map[string]float64{}
	for _, p := range after {
		old, ok := was[p.PID]
		if !ok || old.Comm != p.Comm || !ours[p.PID] {
			continue
		}
		ms := float64(p.CPU-old.CPU) / float64(time.Millisecond) / mib
		switch {
		case p.PID == os.Getpid():
			perMiB["bench"] += ms
		case slices.Contains(carrierCommands, p.Comm):
			perMiB[p.Comm] += ms
			perMiB["total"] += ms
		}
	}
	return perMiB, nil
}

// reportBulkCPU measures measureBulkCPU through each of addrs, after the rounds, and reports
// it as "<prefix>cpu-<command>-ms/MiB" for the commands that spent any.
func reportBulkCPU(b *testing.B, prefixes []string, addrs ...string) {
	b.Helper()
	for i, addr := range addrs {
		perMiB, err := measureBulkCPU(addr)
		if err != nil {
			b.Fatalf("CPU per MiB through %s: %v", addr, err)
		}
		for command, ms := range perMiB {
			if ms > 0 {
				b.ReportMetric(ms, prefixes[i]+"cpu-"+command+"-ms/MiB")
			}
		}
	}
}

// pss reads a process's Pss line from smaps_rollup, 0 when it is gone.
func pss(rollup string) int64 {
	data, err := os.ReadFile(rollup)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// peakMemory samples groupMemory of pgid until stop is closed and returns the highest.
func peakMemory(pgid int, stop <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if m, err := groupMemory(pgid); err == nil && m > peak {
				peak = m
			}
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}
