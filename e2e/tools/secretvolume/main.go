// Command secret-volume keeps a directory in step with a Secret as the kubelet keeps a pod's
// secret volume, with the kubelet's own code: pkg/volume/secret's MakePayload and
// pkg/volume/util's AtomicWriter, which writes each version into a new timestamped directory
// and swaps the ..data symlink to it. The cert-manager e2e runs `shadowgate serve` on this
// machine, where no kubelet runs, with --cert-dir kept this way, so serve sees a renewal as it
// would in a pod. Unlike the kubelet, it writes at once on every change rather than on its
// next periodic sync of the pod.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/pkg/volume/secret"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	namespace := flag.String("namespace", "", "namespace of the Secret")
	name := flag.String("name", "", "name of the Secret")
	dir := flag.String("dir", "", "the volume directory to keep")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *namespace, *name, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "secret-volume:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, namespace, name, dir string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The kubelet mounts an empty directory for an optional Secret that does not exist yet.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	writer, err := volumeutil.NewAtomicWriter(dir, "secret-volume "+namespace+"/"+name)
	if err != nil {
		return err
	}
	errs := make(chan error, 1)
	write := func(s *corev1.Secret) {
		// An optional volume whose Secret is gone holds no files, as the kubelet leaves it.
		if s == nil {
			s = &corev1.Secret{}
		}
		mode := corev1.SecretVolumeSourceDefaultMode
		payload, err := secret.MakePayload(nil, s, &mode, nil, true)
		if err == nil {
			err = writer.Write(payload, nil)
		}
		if err != nil {
			select {
			case errs <- err:
			default:
			}
			return
		}
		fmt.Printf("wrote %d files of Secret %s/%s at resourceVersion %q\n", len(payload), namespace, name, s.ResourceVersion)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	informer := factory.Core().V1().Secrets().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { write(o.(*corev1.Secret)) },
		UpdateFunc: func(_, o any) { write(o.(*corev1.Secret)) },
		DeleteFunc: func(any) { write(nil) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	select {
	case <-ctx.Done():
		factory.Shutdown()
		return nil
	case err := <-errs:
		return err
	}
}
