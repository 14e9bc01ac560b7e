package podrun

import (
	"bytes"
	"context"
	"errors"
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

// maxProbeOutput is what the kubelet keeps of an exec probe's output (its exec prober's
// maxReadLength): stdout then stderr, cut there, otherwise as the command wrote it.
const maxProbeOutput = 10 * 1024

// maxProbeRetries is how often the kubelet tries a probe that errored (could not run at all)
// before it gives up on that period.
const maxProbeRetries = 3

func logOpts(tail, limit int) api.ContainerLogOpts {
	return api.ContainerLogOpts{Tail: tail, LimitBytes: limit}
}

// probeType is a probe's kind as the kubelet's prober names it in its Events.
type probeType string

const (
	startupProbe   probeType = "Startup"
	readinessProbe probeType = "Readiness"
	livenessProbe  probeType = "Liveness"
)

// probeResult is a probe's outcome, as the kubelet's probers return it.
type probeResult int

const (
	probeSuccess probeResult = iota
	probeFailure
	// probeUnknown is a probe that could not be run (no such port, the container gone); it
	// comes with an error.
	probeUnknown
)

// probe runs the instance's probes until ctx ends (the instance exited): the startup probe
// first, then readiness and liveness; a failed startup or liveness probe kills the instance,
// which then restarts by policy.
func (c *container) probe(ctx context.Context) {
	if sp := c.spec.StartupProbe; sp != nil {
		if !c.probeLoop(ctx, startupProbe, sp, true) {
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
		go c.probeLoop(ctx, readinessProbe, rp, false)
	}
	if lp := c.spec.LivenessProbe; lp != nil {
		go c.probeLoop(ctx, livenessProbe, lp, false)
	}
}

// probeLoop probes every period after the initial delay. Startup returns true at its first
// success; readiness flips Ready at the thresholds; startup and liveness kill the instance at
// failureThreshold and return false. Every failed probe is an Unhealthy Event, as the
// kubelet's prober records one per failed run; one that errored is too, and counts neither
// way, as the kubelet throws such a result away.
func (c *container) probeLoop(ctx context.Context, kind probeType, pr *corev1.Probe, untilSuccess bool) bool {
	period := seconds(pr.PeriodSeconds, 10)
	failureThreshold := int(orDefault(pr.FailureThreshold, 3))
	successThreshold := int(orDefault(pr.SuccessThreshold, 1))
	if !sleepCtx(ctx, time.Duration(pr.InitialDelaySeconds)*time.Second) {
		return false
	}
	name := strings.ToLower(string(kind))
	successes, failures := 0, 0
	for {
		result, out, err := c.runProbeWithRetries(ctx, pr)
		if ctx.Err() != nil {
			return false
		}
		switch {
		case err != nil:
			c.pod.cfg.Logf("pod %s: container %s: %s probe errored: %v", c.pod.name, c.spec.Name, name, err)
			c.warn(reasonUnhealthy, fmt.Sprintf("%s probe errored and resulted in unknown state: %s", kind, err))
		case result == probeSuccess:
			successes, failures = successes+1, 0
			if untilSuccess {
				return true
			}
			if kind == readinessProbe && successes >= successThreshold {
				c.setReady(true)
			}
		default:
			successes, failures = 0, failures+1
			c.pod.cfg.Logf("pod %s: container %s: %s probe failed (%d/%d)%s", c.pod.name, c.spec.Name, name, failures, failureThreshold, quoteOutput(out))
			c.warn(reasonUnhealthy, fmt.Sprintf("%s probe failed: %s", kind, out))
			if failures >= failureThreshold {
				if kind == readinessProbe {
					c.setReady(false)
				} else {
					c.pod.cfg.Logf("pod %s: container %s: %s probe failed %d times, killing it", c.pod.name, c.spec.Name, name, failures)
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

func quoteOutput(out string) string {
	if strings.TrimSpace(out) == "" {
		return ""
	}
	return fmt.Sprintf(": %q", strings.TrimSpace(out))
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

// runProbeWithRetries runs the probe again, up to maxProbeRetries times, while it errors.
func (c *container) runProbeWithRetries(ctx context.Context, pr *corev1.Probe) (result probeResult, out string, err error) {
	for range maxProbeRetries {
		if result, out, err = c.runProbe(ctx, pr); err == nil || ctx.Err() != nil {
			break
		}
	}
	return result, out, err
}

// runProbe runs one probe within its timeout. The output is what the kubelet's probers
// report for it: an exec probe's own output (success or failure), the connection's error,
// "HTTP probe failed with statuscode: N", `command "..." timed out`.
func (c *container) runProbe(ctx context.Context, pr *corev1.Probe) (probeResult, string, error) {
	ctx, cancel := context.WithTimeout(ctx, seconds(pr.TimeoutSeconds, 1))
	defer cancel()
	switch {
	case pr.Exec != nil:
		var out limitedBuffer
		code, err := c.execInContainer(ctx, pr.Exec.Command, nil, &out, &out)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return probeFailure, fmt.Sprintf("command %q timed out", strings.Join(pr.Exec.Command, " ")), nil
		case err != nil:
			return probeUnknown, "", err
		case code != 0:
			return probeFailure, out.String(), nil
		}
		return probeSuccess, out.String(), nil
	case pr.TCPSocket != nil:
		port, err := c.resolvePort(pr.TCPSocket.Port)
		if err != nil {
			return probeUnknown, "", err
		}
		host := pr.TCPSocket.Host
		if host == "" {
			host = c.pod.cfg.Address
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return probeFailure, err.Error(), nil
		}
		_ = conn.Close()
		return probeSuccess, "", nil
	case pr.HTTPGet != nil:
		return c.httpProbe(ctx, pr.HTTPGet)
	}
	return probeUnknown, "", fmt.Errorf("unsupported probe (exec, tcpSocket and httpGet are)")
}

func (c *container) httpProbe(ctx context.Context, hg *corev1.HTTPGetAction) (probeResult, string, error) {
	port, err := c.resolvePort(hg.Port)
	if err != nil {
		return probeUnknown, "", err
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
		return probeUnknown, "", err
	}
	for _, h := range hg.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return probeFailure, err.Error(), nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProbeOutput))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return probeFailure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
	}
	return probeSuccess, string(body), nil
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
	cmd, _, err := spec.start(c.pod.cfg.Exe, nsenter, false, func(cmd *exec.Cmd) {
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
