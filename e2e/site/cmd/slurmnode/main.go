package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/batch"
	"github.com/interlink-hq/shadowgate/e2e/site/internal/slurm"
	"github.com/interlink-hq/shadowgate/e2e/site/internal/vknode"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
)

// options are the node's flags beyond vknode.Config's.
type options struct {
	slurmConf, account   string
	workDir, launcherDir string
	publishNodeConfigMap bool
	poll                 time.Duration
	// As interLink's Slurm plugin: its CommandPrefix and SingularityDefaultOptions, and how long
	// after Slurm a job's end reaches the pod.
	commandPrefix      string
	singularityOptions string
	endDelay           time.Duration
	// As interLink's virtual kubelet: every statusInterval each pod's status is written with the
	// pod as the node stored it at creation.
	writeBackCreationCopy bool
	statusInterval        time.Duration
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	var cfg vknode.Config
	var opts options
	cfg.RegisterFlags(flag.CommandLine)
	flag.StringVar(&opts.slurmConf, "slurm-conf", "", "slurm.conf of the site's Slurm (SLURM_CONF of every Slurm command)")
	flag.StringVar(&opts.account, "account", "", "the site's HPC Unix account, which submits and runs every job")
	flag.StringVar(&opts.workDir, "work-dir", "", "parent of the per-pod job directories; created owned by the account, mode 0700")
	flag.StringVar(&opts.commandPrefix, "command-prefix", "", "shell every job runs before the pod's pre-exec, as the plugin's CommandPrefix (e.g. export INTERLINK_SOCKET_DIR_ROOT=/scratch/il); the plugin's default is none")
	flag.StringVar(&opts.singularityOptions, "singularity-default-options", batch.DefaultSingularityOptions, "options after `singularity exec` or `run` on every container's line, as the plugin's SingularityDefaultOptions")
	flag.DurationVar(&opts.endDelay, "job-end-delay", 30*time.Second, "how long after Slurm a job's end reaches its pod: the plugin answers the virtual kubelet's status requests (one pod each, every 5s) from one cache refreshed at most every 10s, so a site sees the end 24-39s late")
	flag.BoolVar(&opts.writeBackCreationCopy, "write-back-creation-copy", true, "write each pod's status with the pod as stored at creation, annotations included, every -status-interval, as interLink's virtual kubelet does (what others wrote into the pod's metadata since is reverted); false: with the pod's current metadata, on a change of status only")
	flag.DurationVar(&opts.statusInterval, "status-interval", 5*time.Second, "how often, with -write-back-creation-copy, the node writes back each pod not yet Succeeded or Failed (the virtual kubelet's status loop)")
	flag.StringVar(&opts.launcherDir, "launcher-dir", "", "directory put first on the job's PATH, holding singularity and apptainer")
	flag.BoolVar(&opts.publishNodeConfigMap, "publish-node-configmap", false, "write the running job's compute node (NodeAddr) into key compute-node of the pod's node ConfigMaps")
	flag.DurationVar(&opts.poll, "poll", 2*time.Second, "how often the node asks Slurm for its jobs' state")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, opts); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// nodePath is what the node's directories may be: they reach #SBATCH lines and bind lists.
var nodePath = regexp.MustCompile(`^/[A-Za-z0-9._/+-]*$`)

func run(ctx context.Context, cfg vknode.Config, opts options) error {
	if err := cfg.CheckFlags(); err != nil {
		return err
	}
	for flagName, v := range map[string]string{"-slurm-conf": opts.slurmConf, "-account": opts.account} {
		if v == "" {
			return fmt.Errorf("%s is required", flagName)
		}
	}
	for flagName, dir := range map[string]*string{"-work-dir": &opts.workDir, "-launcher-dir": &opts.launcherDir} {
		*dir = filepath.Clean(*dir)
		if !nodePath.MatchString(*dir) {
			return fmt.Errorf("%s %q must be an absolute path of letters, digits and ._/+-", flagName, *dir)
		}
	}
	for flagName, d := range map[string]time.Duration{"-poll": opts.poll, "-status-interval": opts.statusInterval} {
		if d <= 0 {
			return fmt.Errorf("%s %s must be positive", flagName, d)
		}
	}
	if opts.endDelay < 0 {
		return fmt.Errorf("-job-end-delay %s must not be negative", opts.endDelay)
	}
	for _, o := range strings.Fields(opts.singularityOptions) {
		if !strings.HasPrefix(o, "-") {
			return fmt.Errorf("-singularity-default-options: %q is not an option (options start with '-')", o)
		}
	}
	if strings.ContainsRune(opts.commandPrefix, 0) || !utf8.ValidString(opts.commandPrefix) {
		return fmt.Errorf("-command-prefix %q must be valid UTF-8 without NUL: it goes into every job script", opts.commandPrefix)
	}
	account, err := slurm.LookupAccount(opts.account)
	if err != nil {
		return fmt.Errorf("-account: %w", err)
	}
	if err := accountDir(opts.workDir, account); err != nil {
		return err
	}
	for _, name := range []string{"singularity", "apptainer"} {
		if _, err := os.Stat(filepath.Join(opts.launcherDir, name)); err != nil {
			log.Printf("warning: -launcher-dir holds no %s yet (%v); jobs will fail until the harness installs it", name, err)
		}
	}
	work, err := os.OpenRoot(opts.workDir)
	if err != nil {
		return err
	}
	defer work.Close()
	cfg.Labels = map[string]string{
		// interLink's virtual kubelet's node labels; type= is the older form its docs select by.
		"type":                        "virtual-kubelet",
		"virtual-node.interlink/type": "virtual-kubelet",
		"kubernetes.io/role":          "agent",
		"kubernetes.io/hostname":      cfg.NodeName,
		"alpha.service-controller.kubernetes.io/exclude-balancer": "true",
		"node.kubernetes.io/exclude-from-external-load-balancers": "true",
	}
	cfg.Taints = []corev1.Taint{{Key: "virtual-node.interlink/no-schedule", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	log.Printf("node %s: jobs as %s (uid %d) in %s, Slurm %s, polling every %s, a job's end reported %s late, CommandPrefix %q, singularity options %q, writing back the creation copy: %t",
		cfg.NodeName, account.Name, account.UID, opts.workDir, opts.slurmConf, opts.poll, opts.endDelay, opts.commandPrefix, opts.singularityOptions, opts.writeBackCreationCopy)
	// The pods run as Slurm jobs, not here: this node runs no probes and no restarts, so it has
	// none of the kubelet's Events to record.
	return vknode.Run(ctx, cfg, func(pc nodeutil.ProviderConfig, client kubernetes.Interface, _ record.EventRecorder) (nodeutil.Provider, error) {
		return &provider{
			cfg:    opts,
			slurm:  slurm.Client{Conf: opts.slurmConf, Account: account},
			lister: pc,
			client: client,
			work:   work,
			pods:   map[string]*podJob{},
		}, nil
	})
}

// accountDir creates dir, if missing, owned by the account and private to it.
func accountDir(dir string, a slurm.Account) error {
	if err := os.Mkdir(dir, 0o700); errors.Is(err, os.ErrExist) {
		return nil
	} else if err != nil {
		return err
	}
	return os.Chown(dir, int(a.UID), int(a.GID))
}
