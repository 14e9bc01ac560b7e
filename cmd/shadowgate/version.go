package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/interlink-hq/shadowgate/certs"
	"github.com/interlink-hq/shadowgate/internal/metrics"
)

// version is set at build time: -ldflags "-X main.version=v0.1.0".
var version = "dev"

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "shadowgate %s (commit %s, %s, %s/%s)\n", version, commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// commit is the revision the binary was built from, "unknown" when the build recorded none.
func commit() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// registerProcessMetrics registers serve's metrics of the process itself: shadowgate_build_info
// and the serving certificate's expiry.
func registerProcessMetrics(serving *certs.Serving) error {
	for _, c := range []prometheus.Collector{metrics.BuildInfo(version, commit()), metrics.ServingCertificate(serving.NotAfter)} {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}
