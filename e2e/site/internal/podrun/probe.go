package podrun

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// maxProbeOutput bounds what an exec probe's output is kept for the log.
const maxProbeOutput = 10 * 1024

func logOpts(tail, limit int) api.ContainerLogOpts {
	return api.ContainerLogOpts{Tail: tail, LimitBytes: limit}
}

// probe runs the instance's probes until ctx ends (the instance exited): the startup probe
// first, then readiness and liveness; a failed startup or liveness probe kills the instance,
// which then restarts by policy.
func (c *container) probe(ctx context.Context) {
	if sp := c.spec.StartupProbe; sp != nil {
		if !c.probeLoop(ctx, "startup", sp, true) {
			return
		}
		c.pod.mu.Lock()
		t := true
		c.status.Started = &t
		if c.spec.ReadinessProbe == nil {
			c.status.Ready = true
		}
		c.pod.mu.Unlock()
		c.pod.changed()
	}
	if rp := c.spec.ReadinessProbe; rp != nil {
		go c.probeLoop(ctx, "readiness", rp, false)
	}
	if lp := c.spec.LivenessProbe; lp != nil {
		go c.probeLoop(ctx, "liveness", lp, false)
	}
}

// probeLoop probes every period after the initial delay. Startup returns true at its first
// success; readiness flips Ready at the thresholds; startup and liveness kill the instance at
// failureThreshold and return false.
func (c *container) probeLoop(ctx context.Context, kind string, pr *corev1.Probe, untilSuccess bool) bool {
	period := seconds(pr.PeriodSeconds, 10)
	failureThreshold := int(orDefault(pr.FailureThreshold, 3))
	successThreshold := int(orDefault(pr.SuccessThreshold, 1))
	if !sleepCtx(ctx, time.Duration(pr.InitialDelaySeconds)*time.Second) {
		return false
	}
	successes, failures := 0, 0
	for {
		out, err := c.runProbe(ctx, pr)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			successes, failures = successes+1, 0
			if untilSuccess {
				return true
			}
			if kind == "readiness" && successes >= successThreshold {
				c.setReady(true)
			}
		} else {
			successes, failures = 0, failures+1
			c.pod.cfg.Logf("pod %s: container %s: %s probe failed (%d/%d): %v%s", c.pod.name, c.spec.Name, kind, failures, failureThreshold, err, quoteOutput(out))
			if failures >= failureThreshold {
				if kind == "readiness" {
					c.setReady(false)
				} else {
					c.pod.cfg.Logf("pod %s: container %s: %s probe failed %d times, killing it", c.pod.name, c.spec.Name, kind, failures)
					go c.kill(c.pod.Grace())
					return false
				}
			}
		}
		if !sleepCtx(ctx, period) {
			return false
		}
	}
}

func quoteOutput(out []byte) string {
	if len(bytes.TrimSpace(out)) == 0 {
		return ""
	}
	return fmt.Sprintf("; output: %q", strings.TrimSpace(string(out)))
}

func (c *container) setReady(ready bool) {
	c.pod.mu.Lock()
	changed := c.status.Ready != ready && c.status.State.Running != nil
	if changed {
		c.status.Ready = ready
	}
	c.pod.mu.Unlock()
	if changed {
		c.pod.cfg.Logf("pod %s: container %s: ready=%v", c.pod.name, c.spec.Name, ready)
		c.pod.changed()
	}
}

func seconds(s int32, def int32) time.Duration {
	if s <= 0 {
		s = def
	}
	return time.Duration(s) * time.Second
}

func orDefault(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// runProbe runs one probe within its timeout; the output is an exec probe's, for the log.
func (c *container) runProbe(ctx context.Context, pr *corev1.Probe) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, seconds(pr.TimeoutSeconds, 1))
	defer cancel()
	switch {
	case pr.Exec != nil:
		var out limitedBuffer
		code, err := c.execInContainer(ctx, pr.Exec.Command, nil, &out, &out)
		if err != nil {
			return out.Bytes(), err
		}
		if code != 0 {
			return out.Bytes(), fmt.Errorf("command %q exited with %d", pr.Exec.Command, code)
		}
		return out.Bytes(), nil
	case pr.TCPSocket != nil:
		port, err := c.resolvePort(pr.TCPSocket.Port)
		if err != nil {
			return nil, err
		}
		host := pr.TCPSocket.Host
		if host == "" {
			host = c.pod.cfg.Address
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return nil, err
		}
		return nil, conn.Close()
	case pr.HTTPGet != nil:
		return nil, c.httpProbe(ctx, pr.HTTPGet)
	}
	return nil, fmt.Errorf("unsupported probe (exec, tcpSocket and httpGet are)")
}

func (c *container) httpProbe(ctx context.Context, hg *corev1.HTTPGetAction) error {
	port, err := c.resolvePort(hg.Port)
	if err != nil {
		return err
	}
	host := hg.Host
	if host == "" {
		host = c.pod.cfg.Address
	}
	scheme := strings.ToLower(string(hg.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := hg.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+path, nil)
	if err != nil {
		return err
	}
	for _, h := range hg.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeOutput))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// resolvePort turns a named port into the container's port of that name.
func (c *container) resolvePort(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container has no port named %q", p.StrVal)
}

// execInContainer runs argv inside the running instance's mount namespace (nsenter), as its
// user with its env and working dir, as `kubectl exec` and exec probes do. It returns the
// exit code; ctx ending kills the command's process group.
func (c *container) execInContainer(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c.pod.mu.Lock()
	proc := c.proc
	spec := c.cred
	spec.Env = c.envCache
	c.pod.mu.Unlock()
	if proc == nil {
		return -1, fmt.Errorf("container %s is not running", c.spec.Name)
	}
	if len(argv) == 0 {
		return -1, fmt.Errorf("empty command")
	}
	spec.Argv = argv
	ns := "/proc/" + strconv.Itoa(proc.Process.Pid) + "/ns/"
	nsenter := []string{"nsenter", "--mount=" + ns + "mnt", "--uts=" + ns + "uts", "--"}
	cmd, err := spec.start(c.pod.cfg.Exe, nsenter, false, func(cmd *exec.Cmd) {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	})
	if err != nil {
		return -1, err
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		return -1, fmt.Errorf("command %q: %w", argv, ctx.Err())
	}
	if cmd.ProcessState != nil {
		return cmd.ProcessState.ExitCode(), nil
	}
	return -1, err
}

// limitedBuffer keeps the first maxProbeOutput bytes written to it.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxProbeOutput - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
