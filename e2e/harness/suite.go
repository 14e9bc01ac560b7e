package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Suite is what a test package's TestMain sets up once for all its tests: a control plane
// and `shadowgate serve` installed from the dev overlay.
type Suite struct {
	Root    string // the repository
	Dir     string // state and logs, removed when every test passed
	Bin     string // the shadowgate binary being served
	CP      *ControlPlane
	SG      *Shadowgate
	Kubectl Kubectl
}

// RunSuite builds the tools and shadowgate of the repository at root (relative to the test
// package's directory), starts the control plane, installs shadowgate with grace as its
// --shadow-grace-period, hands the suite to use, and runs the tests. It then stops serve
// (a clean exit on SIGTERM is part of what is tested) and the control plane, whatever failed
// on the way, and returns the exit code for os.Exit. The state directory is removed when all
// passed and named when it is kept. name prefixes its messages.
func RunSuite(m *testing.M, name, root string, grace time.Duration, use func(*Suite) error) (code int) {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	start := time.Now()
	s := &Suite{}
	defer func() { code = s.tearDown(name, code) }()
	if _, err := reliabilityScale(); err != nil {
		return fail(err)
	}
	var err error
	if s.Root, err = filepath.Abs(root); err != nil {
		return fail(err)
	}
	tools, err := BuildTools(s.Root, os.Stderr)
	if err != nil {
		return fail(err)
	}
	if s.Dir, err = os.MkdirTemp("", "shadowgate-"+filepath.Base(name)+"-"); err != nil {
		return fail(err)
	}
	if s.Bin, err = BuildShadowgate(s.Root, s.Dir); err != nil {
		return fail(err)
	}
	if s.CP, err = StartControlPlane(tools, s.Dir); err != nil {
		return fail(err)
	}
	s.Kubectl = Kubectl{Path: tools.Kubectl, Kubeconfig: s.CP.AdminKubeconfig}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if s.SG, err = Install(ctx, s.Root, s.Kubectl, s.CP, ServeOptions{Bin: s.Bin, Dir: s.Dir, GracePeriod: grace}); err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "%s: control plane and shadowgate ready in %s (state and logs in %s)\n", name, time.Since(start).Round(time.Millisecond), s.Dir)
	if err := use(s); err != nil {
		return fail(err)
	}
	return m.Run()
}

// tearDown stops what RunSuite started, whichever of it was started, and removes the state
// directory if code is 0 or names it otherwise; it returns code, made 1 if serve did not stop
// cleanly.
func (s *Suite) tearDown(name string, code int) int {
	if s.SG != nil {
		if err := s.SG.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: shadowgate serve did not stop cleanly: %v\n", name, err)
			code = 1
		}
	}
	if s.CP != nil {
		if err := s.CP.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: stopping the control plane: %v\n", name, err)
		}
	}
	switch {
	case s.Dir == "":
	case code == 0:
		os.RemoveAll(s.Dir)
	default:
		fmt.Fprintf(os.Stderr, "%s: state and logs kept in %s\n", name, s.Dir)
	}
	return code
}
