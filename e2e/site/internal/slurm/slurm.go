package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Account is the site's HPC Unix account, which every job runs as.
type Account struct {
	Name     string
	UID, GID uint32
	Groups   []uint32
	Home     string
}

// LookupAccount finds the account and its groups in the system's user database.
func LookupAccount(name string) (Account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return Account{}, err
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return Account{}, fmt.Errorf("account %s: %w", name, err)
	}
	a := Account{Name: name, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	groups, err := u.GroupIds()
	if err != nil {
		return Account{}, fmt.Errorf("groups of account %s: %w", name, err)
	}
	for _, g := range groups {
		id, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return Account{}, fmt.Errorf("group %q of account %s: %w", g, name, err)
		}
		a.Groups = append(a.Groups, uint32(id))
	}
	return a, nil
}

// Client runs the commands against one cluster.
type Client struct {
	Conf    string // SLURM_CONF
	Account Account
}

// commandTimeout bounds each command: slurmctld answers in milliseconds, or it is down.
const commandTimeout = 30 * time.Second

// maxOutput bounds what the node reads of a command's answer.
const maxOutput = 64 << 10

// ErrNoJob is a job Slurm no longer knows (or never did): its record has been purged.
var ErrNoJob = errors.New("slurm has no record of the job")

var jobID = regexp.MustCompile(`^([0-9]+)(;\S+)?$`)

// Submit submits script (a file in dir) with sbatch as the account, from dir, and returns the
// job ID. The error holds sbatch's own message.
func (c Client) Submit(ctx context.Context, dir, script string) (string, error) {
	out, err := c.run(ctx, true, dir, "sbatch", "--parsable", script)
	if err != nil {
		return "", err
	}
	m := jobID.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("sbatch answered %q, not a job ID", out)
	}
	return m[1], nil
}

// Cancel cancels the job; a job that has ended already is not an error.
func (c Client) Cancel(ctx context.Context, id string) error {
	_, err := c.run(ctx, false, "", "scancel", id)
	return err
}

// Job is what scontrol says of a job.
type Job struct {
	State     string // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
	Reason    string // why it is pending, or None
	BatchHost string // the node the batch script runs on, once it runs
	Start     time.Time
	End       time.Time
	ExitCode  int // the batch script's, valid once the job has ended
}

// Job asks scontrol for the job, which it knows while the job is queued or running and for
// MinJobAge after it ended; then it answers ErrNoJob. No accounting storage is needed.
func (c Client) Job(ctx context.Context, id string) (Job, error) {
	out, err := c.run(ctx, false, "", "scontrol", "--oneliner", "show", "job", id)
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return Job{}, ErrNoJob
		}
		return Job{}, err
	}
	return ParseJob(out)
}

// NodeAddr is the address Slurm reaches the node at: what the shadow dials.
func (c Client) NodeAddr(ctx context.Context, node string) (string, error) {
	out, err := c.run(ctx, false, "", "scontrol", "--oneliner", "show", "node", node)
	if err != nil {
		return "", err
	}
	fields := parseFields(out)
	if fields["NodeName"] != node || fields["NodeAddr"] == "" {
		return "", fmt.Errorf("scontrol show node %s answered no NodeAddr for it: %q", node, cut(out))
	}
	return fields["NodeAddr"], nil
}

// ParseJob reads one job of `scontrol --oneliner show job`.
func ParseJob(out string) (Job, error) {
	if strings.Count(strings.TrimSpace(out), "\n") > 0 {
		return Job{}, fmt.Errorf("scontrol answered more than one job: %q", cut(out))
	}
	f := parseFields(out)
	if f["JobState"] == "" {
		return Job{}, fmt.Errorf("scontrol answered no JobState: %q", cut(out))
	}
	j := Job{State: f["JobState"], Reason: f["Reason"], Start: parseTime(f["StartTime"]), End: parseTime(f["EndTime"])}
	if host := f["BatchHost"]; host != "(null)" {
		j.BatchHost = host
	}
	if code, _, ok := strings.Cut(f["ExitCode"], ":"); ok {
		n, err := strconv.Atoi(code)
		if err != nil {
			return Job{}, fmt.Errorf("scontrol's ExitCode %q: %w", f["ExitCode"], err)
		}
		j.ExitCode = n
	}
	return j, nil
}

// parseFields splits scontrol's one-line Key=Value answer. A value may hold spaces (Reason,
// Comment): a word without '=' belongs to the value before it.
func parseFields(out string) map[string]string {
	fields := map[string]string{}
	last := ""
	for _, word := range strings.Fields(out) {
		key, value, ok := strings.Cut(word, "=")
		if !ok || key == "" {
			if last != "" {
				fields[last] += " " + word
			}
			continue
		}
		fields[key], last = value, key
	}
	return fields
}

// parseTime reads scontrol's local times; Unknown and None are the zero time.
func parseTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

// run runs a command against the cluster, as the account from dir when asAccount, else as the
// node, and returns its trimmed output, bounded; a failure carries the output.
func (c Client) run(ctx context.Context, asAccount bool, dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = []string{"SLURM_CONF=" + c.Conf, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}
	if asAccount {
		a := c.Account
		cmd.Dir = dir
		cmd.Env = append(cmd.Env, "HOME="+a.Home, "USER="+a.Name, "LOGNAME="+a.Name)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: a.Groups}}
	}
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if err != nil {
		return "", fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, cut(text))
	}
	return text, nil
}

// limitedBuffer keeps the first maxOutput bytes and drops the rest.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// cut shortens a command's answer for a message.
func cut(s string) string {
	if len(s) > 500 {
		return s[:500] + "..."
	}
	return s
}
