package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
	// Site is the local site, for a suite from RunSiteSuite.
	Site *LocalSite
}

// RunSuite builds the tools and shadowgate of the repository at root (relative to the test
// package's directory), starts the control plane, installs shadowgate with grace as its
// --shadow-grace-period, hands the suite to use, and runs the tests. It then stops serve
// (a clean exit on SIGTERM is part of what is tested) and the control plane, whatever failed
// on the way, and returns the exit code for os.Exit. The state directory is removed when all
// passed and named when it is kept. name prefixes its messages.
func RunSuite(m *testing.M, name, root string, grace time.Duration, use func(*Suite) error) int {
	return runSuite(m, name, root, grace, false, use)
}

// RunSiteSuite is RunSuite on the whole local site: the control plane runs its controllers
// (StartCluster) and StartLocalSite adds the HPC side, the nodes, the credentials and the
// site's policy. It needs root.
func RunSiteSuite(m *testing.M, name, root string, grace time.Duration, use func(*Suite) error) int {
	return runSuite(m, name, root, grace, true, use)
}

// SiteMaxRollingShadows is serve's --max-rolling-shadows on the local site: one, so a test
// with two shadows sees the second wait for the first's roll.
const SiteMaxRollingShadows = 1

func runSuite(m *testing.M, name, root string, grace time.Duration, site bool, use func(*Suite) error) (code int) {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	began := time.Now()
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
	var siteTools SiteTools
	if site {
		if siteTools, err = BuildSiteTools(s.Root, os.Stderr); err != nil {
			return fail(err)
		}
	}
	if s.Dir, err = os.MkdirTemp("", "shadowgate-"+filepath.Base(name)+"-"); err != nil {
		return fail(err)
	}
	if s.Bin, err = BuildShadowgate(s.Root, s.Dir); err != nil {
		return fail(err)
	}
	start := StartControlPlane
	if site {
		start = StartCluster
	}
	if s.CP, err = start(tools, s.Dir); err != nil {
		return fail(err)
	}
	s.Kubectl = Kubectl{Path: tools.Kubectl, Kubeconfig: s.CP.AdminKubeconfig}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := ServeOptions{Bin: s.Bin, Dir: s.Dir, GracePeriod: grace}
	if site {
		opts.Args = []string{"--max-rolling-shadows=" + strconv.Itoa(SiteMaxRollingShadows)}
		// A site serves the Gateway API, as a front door of kind HTTPRoute needs.
		if err := InstallGatewayAPI(ctx, s.Root, s.Kubectl); err != nil {
			return fail(err)
		}
	}
	if s.SG, err = Install(ctx, s.Root, s.Kubectl, s.CP, opts); err != nil {
		return fail(err)
	}
	if site {
		if err := os.Chmod(s.Dir, 0o755); err != nil { // the site's accounts read their keys and jobs under it
			return fail(err)
		}
		if s.Site, err = StartLocalSite(ctx, s.Root, s.Dir, s.Kubectl, s.CP, siteTools); err != nil {
			return fail(err)
		}
		if err := s.Site.ApplyPolicy(ctx, s.Kubectl); err != nil {
			return fail(err)
		}
	}
	fmt.Fprintf(os.Stderr, "%s: control plane and shadowgate ready in %s (state and logs in %s)\n", name, time.Since(began).Round(time.Millisecond), s.Dir)
	if err := use(s); err != nil {
		return fail(err)
	}
	return m.Run()
}

// tearDown stops what RunSuite started, whichever of it was started, and removes the state
// directory if code is 0 or names it otherwise; it returns code, made 1 if serve did not stop
// cleanly.
func (s *Suite) tearDown(name string, code int) int {
	if s.Site != nil {
		if err := s.Site.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: stopping the site: %v\n", name, err)
		}
	}
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
