package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/interlink-hq/shadowgate/internal/printable"
	"github.com/interlink-hq/shadowgate/validate"
)

// installCheckInterval is how often --wait sends the probe again.
const installCheckInterval = 2 * time.Second

type installCheckOptions struct {
	kubeconfig, context, namespace string
	wait                           time.Duration
}

func newCheckInstallCommand() *cobra.Command {
	var o installCheckOptions
	cmd := &cobra.Command{
		Use:   "install [-n NAMESPACE] [--wait=DURATION]",
		Short: "Prove the API server reaches the installed webhook: a dry-run pod, judged by shadowgate",
		Long: `Create, as a server-side dry run, a pod asking for the reverse tunnel on no virtual node in
NAMESPACE, and expect shadowgate's judgement of it: the warning only shadowgate gives such a
pod. That proves the webhook configurations send offloaded pods from NAMESPACE to shadowgate,
the API server reaches it (through the Service, the node's network or webhooks.url) and trusts
its certificate, and a replica serves. Nothing is stored and no shadow is made. NAMESPACE must
be one the pod webhooks select: not shadowgate's own, kube-system or another exempt one.
--wait sends the probe again every 2s until shadowgate judges it or the time is up, as after
an install whose replicas are still starting.
Exit 0: shadowgate judged the pod. Exit 1: it did not, by the end of --wait (the API server's
error, or the pod admitted unjudged, is printed). Exit 2: bad flags, an unreadable
kubeconfig, a namespace that does not exist, or no right to create pods there.`,
		Example: "  shadowgate check install -n default\n  shadowgate check install -n user --wait=2m",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.wait < 0 {
				return usageError("--wait must not be negative, not %s", o.wait)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return o.run(ctx, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the pod's own account in a cluster)")
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the dry-run pod, one the pod webhooks select (default: the context's)")
	f.DurationVar(&o.wait, "wait", 0, "how long to send the probe again while shadowgate does not judge it (0: once)")
	return cmd
}

// warnings collects the warnings of the API server's answers.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// take returns the warnings seen since the last take.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.seen
	w.seen = nil
	return seen
}

func (o *installCheckOptions) run(ctx context.Context, out io.Writer) error {
	cfg, cc, err := loadKubeconfig(o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	ns := o.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return usageError("kubeconfig: %v", err)
		}
	}
	seen := &warnings{}
	cfg.WarningHandler = seen
	cfg.UserAgent = "shadowgate-check-install/" + version
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return usageError("kubeconfig: %v", err)
	}
	if err := mayCreatePods(ctx, cs, ns); err != nil {
		return err
	}
	deadline := time.Now().Add(o.wait)
	for {
		judged, err := probe(ctx, cs, seen, ns)
		if err == nil {
			fmt.Fprintf(out, "shadowgate judged a dry-run pod in namespace %s: %s\n", printable.String(ns), printable.String(judged))
			return nil
		}
		if apierrors.IsNotFound(err) {
			return usageError("namespace %s: %v", printable.String(ns), printable.String(err.Error()))
		}
		if !time.Now().Add(installCheckInterval).Before(deadline) || !sleep(ctx, installCheckInterval) {
			return &exitError{code: exitDenied, msg: fmt.Sprintf("shadowgate did not judge a dry-run pod in namespace %s%s: %s",
				printable.String(ns), waited(o.wait), printable.String(err.Error()))}
		}
	}
}

// sleep waits d, and says false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// waited says how long the check waited, when it did.
func waited(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return " within " + d.String()
}

// mayCreatePods refuses, before any probe, a caller who may not create pods in ns: a dry run
// needs the right to create.
func mayCreatePods(ctx context.Context, cs kubernetes.Interface, ns string) error {
	review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "create", Resource: "pods"}},
	}, metav1.CreateOptions{})
	if err != nil {
		return usageError("asking the API server whether you may create pods in namespace %s: %v", printable.String(ns), err)
	}
	if !review.Status.Allowed {
		return usageError("you may not create pods in namespace %s, which the dry run needs (%s): run it as someone who may, or name another namespace with -n",
			printable.String(ns), printable.String(review.Status.Reason))
	}
	return nil
}

// probe creates the probe pod in ns as a dry run, and returns shadowgate's warning about it,
// or why there is none. The warning is the one shadowgate gives a pod asking for the reverse
// tunnel on no virtual node of its policy: only shadowgate writes it, so the API server sent
// the probe to a shadowgate that judged it.
func probe(ctx context.Context, cs kubernetes.Interface, seen *warnings, ns string) (string, error) {
	want := validate.PodPaths.Meta.Child("annotations").Key(validate.AnnotationReverseForwards).String() + " " + validate.NotPlacedWarning
	seen.take()
	_, err := cs.CoreV1().Pods(ns).Create(ctx, probePod(ns), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	got := seen.take()
	if err != nil {
		return "", err
	}
	for _, w := range got {
		if strings.HasPrefix(w, want) {
			return w, nil
		}
	}
	return "", fmt.Errorf("the API server admitted the pod without shadowgate's judgement (warnings: %q): no webhook configuration sends it to shadowgate "+
		"(is shadowgate installed; does the namespace meet webhooks.namespaceSelector; is it exempt?), or failurePolicy Ignore let it through while shadowgate did not answer", got)
}

// probePod is a pod that asks for the reverse tunnel on no virtual node: the pod webhooks'
// conditions send it to shadowgate, which admits it with a warning. It meets the restricted
// Pod Security Standard, so a namespace enforcing it judges it as well.
func probePod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "shadowgate-install-check-",
			Namespace:    ns,
			Annotations:  map[string]string{validate.AnnotationReverseForwards: "shadowgate-install-check:1"},
		},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "probe",
				Image: "pause",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}
