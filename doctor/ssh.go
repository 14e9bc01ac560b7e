package doctor

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"time"

	"github.com/interlink-hq/shadowgate/internal/printable"
	"github.com/interlink-hq/shadowgate/internal/syncbuf"
	"github.com/interlink-hq/shadowgate/internal/tunnelstate"
)

const (
	dialTimeout = 10 * time.Second
	// commandTimeout bounds one ssh: above the options' ConnectTimeout=30, so ssh says why.
	commandTimeout = 60 * time.Second
	// channelWait is how long a forward channel may take to open once asked for.
	channelWait = 20 * time.Second
	// halfCloseWait is how long the connect command may take to end once its input has:
	// a login and a "-q 1" second, with room.
	halfCloseWait = 10 * time.Second
)

// result is what one command printed, stdout and stderr together, and how it ended: code is
// its exit status, -1 when it did not start or was stopped.
type result struct {
	out  string
	code int
}

// sshArgs are the arguments of an ssh to the login node: no ssh_config file (the shadow has
// none; a user's could add a ProxyJump or a ControlMaster), the shadow's options, extra (which
// come before the options where they must win, as ssh keeps the first value), "--", the login
// host and the remote command, a line for the login node's shell.
func (s *session) sshArgs(extra []string, remote string) []string {
	args := append([]string{"-F", "/dev/null"}, extra...)
	for _, o := range s.opts {
		args = append(args, "-o", o)
	}
	args = append(args, "--", s.ssh.LoginHost)
	if remote != "" {
		args = append(args, remote)
	}
	return args
}

// run runs a program to its end, within commandTimeout, with no input.
func (s *session) run(ctx context.Context, name string, args ...string) result {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return result{out: string(out), code: 0}
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return result{out: string(out), code: exit.ExitCode()}
	default:
		return result{out: string(out) + "\n" + err.Error(), code: -1}
	}
}

// remote runs a command line on the login node over a login of its own.
func (s *session) remote(ctx context.Context, command string) result {
	return s.run(ctx, "ssh", s.sshArgs([]string{"-T"}, command)...)
}

// channel asks the login node for one TCP channel to target (host:port, an IPv6 host in
// brackets), as a forward of the shadow does, and reports whether the login node confirmed it
// (ssh -vv says "open confirm"), with what ssh printed. ssh -W would hold the channel open;
// it is stopped once confirmed, refused, or after channelWait.
func (s *session) channel(ctx context.Context, target string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", s.sshArgs([]string{"-vv", "-W", target}, "")...)
	cmd.Env = s.env
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// An open stdin, so ssh does not end the channel at once for want of input.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return false, err.Error()
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		return false, err.Error()
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	opened := false
	deadline := time.After(channelWait)
wait:
	for {
		if strings.Contains(out.String(), ": open confirm") {
			opened = true
			break
		}
		select {
		case <-done:
			break wait
		case <-deadline:
			break wait
		case <-time.After(50 * time.Millisecond):
		}
	}
	_ = cmd.Process.Kill()
	<-done
	return opened, out.String()
}

// classify reads what ssh (and the command it ran) printed and returns the reason the first
// recognised line names, with that line; "" and the last lines when none is. The first
// recognised line wins, as in the scripts' classify (common.sh), whose patterns these are:
// ssh names the failure first and what follows is its fallout.
func classify(out string) (tunnelstate.Reason, string) {
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "debug") {
			continue
		}
		r := lineReason(line)
		if r == "" {
			continue
		}
		if strings.HasPrefix(line, "@") {
			// The banner of a changed key: the line that names the host follows it.
			for _, next := range lines[i+1:] {
				if next = strings.TrimSpace(next); strings.HasPrefix(next, "Host key for ") {
					return r, printable.Cut(next, maxSaid)
				}
			}
		}
		return r, printable.Cut(line, maxSaid)
	}
	return "", lastLines(out)
}

func lineReason(line string) tunnelstate.Reason {
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(line, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case has("REMOTE HOST IDENTIFICATION HAS CHANGED") || strings.HasPrefix(line, "Host key for ") && has(" has changed"):
		return tunnelstate.ReasonHostKeyMismatch
	case strings.HasPrefix(line, "No ") && has(" host key is known for "):
		return tunnelstate.ReasonHostKeyUnknown
	case has("Host key verification failed"):
		return tunnelstate.ReasonHostKeyMismatch
	case has("Permission denied ("):
		return tunnelstate.ReasonLoginRefused
	case strings.HasPrefix(line, "ssh: connect to host "), strings.HasPrefix(line, "ssh: Could not resolve hostname "),
		strings.HasPrefix(line, "kex_exchange_identification: "), strings.HasPrefix(line, "Connection closed by "),
		strings.HasPrefix(line, "Connection reset by "), has("during banner exchange"), strings.HasPrefix(line, "banner exchange: "):
		return tunnelstate.ReasonLoginUnreachable
	case has("open failed: administratively prohibited"):
		return tunnelstate.ReasonForwardingProhibited
	case has("open failed: connect failed: Connection refused"), has("nc: connect to ") && has("Connection refused"),
		has("Ncat: Connection refused."), has(") : Connection refused"):
		return tunnelstate.ReasonNodeConnectionRefused
	case has("open failed: connect failed: "), has("nc: connect to ") && has(" failed: "), has("nc: getaddrinfo for host "), strings.HasPrefix(line, "Ncat: "):
		return tunnelstate.ReasonNodeUnreachable
	}
	return ""
}

// lastLines are the last three lines of out that are not ssh's debug output, printable.
func lastLines(out string) string {
	var kept []string
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "debug") {
			kept = append(kept, line)
		}
	}
	if len(kept) > 3 {
		kept = kept[len(kept)-3:]
	}
	return printable.Cut(strings.Join(kept, " / "), maxSaid)
}

// maxSaid bounds what a detail quotes of a command's output: what a site prints reaches a
// terminal, made printable (printable.Cut).
const maxSaid = 512

// quote single-quotes a word for the remote shell. Every word given is one a syntax rule
// accepted, which holds no quote; the quoting keeps it one word.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// said is the detail's tail: what the command printed that names the failure.
func said(out string) string {
	_, line := classify(out)
	if line == "" {
		return ""
	}
	return ": " + line
}
