package podrun

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// HelperArg is argv[1] of a re-exec'd container helper.
const HelperArg = "podrun-container-helper"

// helperSpecFD is the inherited pipe the helper reads its spec from: a pipe, not the
// environment, because a spec holds the command's scripts and may outgrow one env string.
const helperSpecFD = 3

// helperExecFD is a container helper's end of a pipe the node reads until it closes, which it
// does when the helper execs the container's command (the helper marks it close-on-exec): the
// node probes the container only then, since a probe that entered the container's namespace
// before the helper had made the mounts would find none of the volumes.
const helperExecFD = 4

// defaultPath is the PATH of a container whose env has none (what container runtimes set).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// bindMount is one mount the helper makes in the container's namespace.
type bindMount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// helperSpec is everything the helper needs to become the container's process.
type helperSpec struct {
	Mounts []bindMount `json:"mounts,omitempty"`
	UID    uint32      `json:"uid"`
	GID    uint32      `json:"gid"`
	Groups []uint32    `json:"groups,omitempty"`
	Dir    string      `json:"dir,omitempty"`
	Argv   []string    `json:"argv"`
	// Hostname is the pod's, set in the container's own UTS namespace.
	Hostname string   `json:"hostname,omitempty"`
	Env      []string `json:"env"`
}

// RunHelperIfRequested becomes the container helper and never returns when the process was
// started as one; otherwise it returns at once.
func RunHelperIfRequested() {
	if len(os.Args) < 2 || os.Args[1] != HelperArg {
		return
	}
	var spec helperSpec
	in := os.NewFile(helperSpecFD, "helper-spec")
	if err := json.NewDecoder(in).Decode(&spec); err != nil {
		fail(fmt.Errorf("helper spec: %w", err))
	}
	in.Close()
	unix.CloseOnExec(helperExecFD) // not open in an exec's or a probe's helper: no harm
	fail(spec.become(os.Getppid()))
}

// fail reports why the container could not start on its stderr (its log) and exits with the
// code a container runtime gives a container it could not start.
func fail(err error) {
	fmt.Fprintf(os.Stderr, "site processnode: cannot start container: %v\n", err)
	os.Exit(128)
}

// become makes the mounts (the namespace is already private: the parent asked for a new one),
// drops credentials and execs the command; node is the node's pid, the helper's parent. It only
// returns an error.
func (s helperSpec) become(node int) error {
	if s.Hostname != "" {
		if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
			return fmt.Errorf("sethostname %s: %w", s.Hostname, err)
		}
	}
	// Outer mounts first, so a mount inside another volume lands in that volume.
	sort.SliceStable(s.Mounts, func(i, j int) bool {
		return strings.Count(s.Mounts[i].Target, "/") < strings.Count(s.Mounts[j].Target, "/")
	})
	for _, m := range s.Mounts {
		if err := m.mount(); err != nil {
			return err
		}
	}
	if err := syscall.Setgroups(intsOf(s.Groups)); err != nil {
		return fmt.Errorf("setgroups %v: %w", s.Groups, err)
	}
	if err := syscall.Setgid(int(s.GID)); err != nil {
		return fmt.Errorf("setgid %d: %w", s.GID, err)
	}
	if err := syscall.Setuid(int(s.UID)); err != nil {
		return fmt.Errorf("setuid %d: %w", s.UID, err)
	}
	// The container dies with the node: a node killed without the chance to stop its pods
	// (a test binary killed, make dev's terminal closed) leaves no process listening on a
	// port the next site needs. Changing credentials cleared any earlier parent-death signal,
	// and the node may have died before it was set.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_PDEATHSIG: %w", err)
	}
	if os.Getppid() != node {
		return fmt.Errorf("the node (pid %d) exited before the container started", node)
	}
	if s.Dir != "" {
		if err := os.Chdir(s.Dir); err != nil {
			return fmt.Errorf("workingDir: %w", err)
		}
	}
	path := defaultPath
	for _, e := range s.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	bin, err := lookPath(s.Argv[0], path)
	if err != nil {
		return err
	}
	return fmt.Errorf("exec %s: %w", bin, syscall.Exec(bin, s.Argv, s.Env))
}

func (m bindMount) mount() error {
	src, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("mount source: %w", err)
	}
	if _, err := os.Lstat(m.Target); os.IsNotExist(err) {
		// Only inside another mount of this container (the caller created the rest on the host).
		if err := makeTarget(m.Target, src.IsDir()); err != nil {
			return fmt.Errorf("mount target %s: %w", m.Target, err)
		}
	}
	if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", m.Source, m.Target, err)
	}
	if m.ReadOnly {
		if err := unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("remount %s read-only: %w", m.Target, err)
		}
	}
	return nil
}

func makeTarget(target string, dir bool) error {
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// lookPath resolves the command as the container runtime does: a name without a slash is
// looked up in the container's PATH, not the node's.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		full := filepath.Join(dir, name)
		if fi, err := os.Stat(full); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return full, nil
		}
	}
	return "", fmt.Errorf("%q: %w in PATH %s", name, exec.ErrNotFound, path)
}

func intsOf(us []uint32) []int {
	out := make([]int, len(us))
	for i, u := range us {
		out[i] = int(u)
	}
	return out
}

// start starts the helper for spec with cmd's stdio. newNamespace asks the kernel for a
// private mount namespace (Go makes its propagation private before the helper runs); probes
// and exec run without one, already inside the container's namespace through nsenter
// (prefix). The process leads its own process group, so killing the group reaches whatever
// the command forks. A container's (newNamespace) execed is closed once the helper has made the
// mounts and exec'd the command, or died; nil for the others.
func (s helperSpec) start(exe string, prefix []string, newNamespace bool, configure func(*exec.Cmd)) (cmd *exec.Cmd, execed <-chan struct{}, err error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, nil, err
	}
	argv := append(append([]string{}, prefix...), exe, HelperArg)
	cmd = exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if newNamespace {
		// A mount namespace for the binds, a UTS one for the pod's hostname; the network is
		// the host's (the site's stand-in for a pod network).
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{r}
	var execR, execW *os.File
	if newNamespace {
		if execR, execW, err = os.Pipe(); err != nil {
			w.Close()
			return nil, nil, err
		}
		defer execW.Close() // the helper holds its copy
		cmd.ExtraFiles = append(cmd.ExtraFiles, execW)
	}
	if configure != nil {
		configure(cmd)
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		if execR != nil {
			execR.Close()
		}
		return nil, nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	go func() {
		_, _ = w.Write(raw)
		w.Close()
	}()
	if execR != nil {
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, execR)
			execR.Close()
			close(done)
		}()
		execed = done
	}
	return cmd, execed, nil
}
