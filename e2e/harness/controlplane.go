package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/interlink-hq/shadowgate/certs"
)

// The identities of the token file: a cluster admin, and shadowgate's ServiceAccount, so the
// local webhook runs with exactly the RBAC manifests/ grants it in a cluster.
const (
	adminUser      = "admin"
	shadowgateUser = "system:serviceaccount:shadowgate-system:shadowgate"
	shadowgateGrps = "system:serviceaccounts,system:serviceaccounts:shadowgate-system"
)

// ControlPlane is etcd and kube-apiserver on loopback. Started by StartControlPlane there is
// no kubelet, scheduler or controller manager: pods are stored and never run, which is all
// admission needs. StartCluster adds kube-controller-manager and kube-scheduler, for the local
// site, whose nodes (e2e/site) run the pods.
type ControlPlane struct {
	Dir    string
	Server string // https://127.0.0.1:<port>
	// AdminKubeconfig is for kubectl; ShadowgateKubeconfig for shadowgate serve.
	AdminKubeconfig, ShadowgateKubeconfig string
	// Admin is a client configuration with the admin's rights, for checks kubectl cannot make.
	Admin *rest.Config

	// KubeletClient is the CA, certificate and key kube-apiserver presents to a node's
	// kubelet API (logs): a node trusts KubeletClient.CA. KubeletServing is a certificate
	// for 127.0.0.1 the site's nodes serve that API with.
	KubeletClient, KubeletServing TLSFiles

	// clients issues the client certificates the API server authenticates (--client-ca-file):
	// the nodes' kubelets and kube-proxies (NodeKubeconfig).
	clients *clientCA

	etcdURL                      string
	etcd, apiserver              *process
	controllerManager, scheduler *process
	saKey                        string
	controllers                  bool
	// How kube-apiserver was started, so a test can restart it as it was.
	apiserverBin  string
	apiserverArgs []string
}

// StartControlPlane starts etcd and kube-apiserver with their state, certificates and logs
// under dir, and returns once the API server is ready.
func StartControlPlane(tools Tools, dir string) (*ControlPlane, error) {
	return startControlPlane(tools, dir, false)
}

// StartCluster is StartControlPlane with kube-controller-manager and kube-scheduler too:
// Deployments become ReplicaSets and pods, pods are bound to nodes, EndpointSlices follow
// pods, every namespace gets its default ServiceAccount (so the ServiceAccount admission
// plugin is on, as in a real cluster). It returns once both report healthy.
func StartCluster(tools Tools, dir string) (*ControlPlane, error) {
	return startControlPlane(tools, dir, true)
}

func startControlPlane(tools Tools, dir string, controllers bool) (cp *ControlPlane, err error) {
	cp = &ControlPlane{Dir: dir, controllers: controllers}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := cp.startEtcd(tools.Etcd); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(tools.KubeAPIServer); err != nil {
		return nil, err
	}
	if !controllers {
		return cp, nil
	}
	return cp, cp.startControllers(tools)
}

func (cp *ControlPlane) startEtcd(bin string) error {
	client, err := freePort()
	if err != nil {
		return err
	}
	peer, err := freePort()
	if err != nil {
		return err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(client)
	cp.etcdURL = clientURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	cp.etcd, err = startProcess("etcd", filepath.Join(cp.Dir, "etcd.log"), bin,
		"--data-dir", filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL,
		// A throwaway store: durability buys nothing and fsync costs seconds on a busy disk.
		"--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return err
	}
	return poll(cp.etcd, 30*time.Second, func() error { return getOK(http.DefaultClient, clientURL+"/health") })
}

func (cp *ControlPlane) startAPIServer(bin string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	cp.Server = "https://127.0.0.1:" + strconv.Itoa(port)
	// A node's pods reach the API server as the default/kubernetes Service (StartNode).
	serving, err := certs.SelfSigned([]string{"127.0.0.1", "localhost", APIServiceIP, "kubernetes.default.svc",
		"kubernetes.default.svc." + ClusterDomain}, time.Now(), 24*time.Hour)
	if err != nil {
		return err
	}
	tlsDir := filepath.Join(cp.Dir, "apiserver-tls")
	if err := serving.WriteDir(tlsDir); err != nil {
		return err
	}
	saKey, saPub, err := writeServiceAccountKeys(cp.Dir)
	if err != nil {
		return err
	}
	cp.saKey = saKey
	if cp.KubeletClient, cp.KubeletServing, err = writeKubeletCertificates(cp.Dir); err != nil {
		return err
	}
	if cp.clients, err = newClientCA("cluster client CA"); err != nil {
		return err
	}
	clientCA := filepath.Join(cp.Dir, "client-ca.crt")
	if err := os.WriteFile(clientCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cp.clients.cert.Raw}), 0o644); err != nil {
		return err
	}
	adminToken, sgToken := token(), token()
	tokens := filepath.Join(cp.Dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(fmt.Sprintf("%s,%s,admin,system:masters\n%s,%s,shadowgate,%q\n",
		adminToken, adminUser, sgToken, shadowgateUser, shadowgateGrps)), 0o600); err != nil {
		return err
	}
	cp.apiserverBin, cp.apiserverArgs = bin, []string{
		"--etcd-servers=" + cp.etcdURL,
		"--cert-dir=" + filepath.Join(cp.Dir, "apiserver-certs"),
		"--tls-cert-file=" + filepath.Join(tlsDir, certs.CertFile),
		"--tls-private-key-file=" + filepath.Join(tlsDir, certs.KeyFile),
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		// Room for a Service per shadow: make bench creates more than a thousand.
		"--service-cluster-ip-range=" + ServiceCIDR,
		// A node's kubelet acts as system:node:<name>, limited to its own Node and pods as in a
		// cluster.
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--client-ca-file=" + clientCA,
		"--token-auth-file=" + tokens,
		"--service-account-issuer=" + cp.Server,
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + cp.KubeletClient.Cert,
		"--kubelet-client-key=" + cp.KubeletClient.Key,
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
	}
	if !cp.controllers {
		// No controller manager creates the default ServiceAccount a pod would be given.
		cp.apiserverArgs = append(cp.apiserverArgs, "--disable-admission-plugins=ServiceAccount")
	}
	cp.Admin = &rest.Config{Host: cp.Server, BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{CAData: serving.CA}}
	cp.AdminKubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	cp.ShadowgateKubeconfig = filepath.Join(cp.Dir, "shadowgate.kubeconfig")
	if err := writeKubeconfig(cp.AdminKubeconfig, cp.Server, serving.CA, adminUser, adminToken); err != nil {
		return err
	}
	if err := writeKubeconfig(cp.ShadowgateKubeconfig, cp.Server, serving.CA, "shadowgate", sgToken); err != nil {
		return err
	}
	return cp.runAPIServer()
}

// runAPIServer starts kube-apiserver with the flags startAPIServer chose and returns once it
// is ready.
func (cp *ControlPlane) runAPIServer() error {
	var err error
	cp.apiserver, err = startProcess("kube-apiserver", filepath.Join(cp.Dir, "kube-apiserver.log"), cp.apiserverBin, cp.apiserverArgs...)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cp.Admin.CAData)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	return poll(cp.apiserver, 60*time.Second, func() error {
		req, _ := http.NewRequest(http.MethodGet, cp.Server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cp.Admin.BearerToken)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
}

// KillAPIServer ends kube-apiserver with SIGKILL, as a crash would: requests it holds are cut
// off, not drained as on SIGTERM. etcd keeps running with the cluster's state.
func (cp *ControlPlane) KillAPIServer() { cp.apiserver.kill() }

// RestartAPIServer starts kube-apiserver again with the same flags, port, certificates and
// tokens, so every kubeconfig and client still works, and returns once it is ready.
func (cp *ControlPlane) RestartAPIServer() error {
	if err := cp.apiserver.exitedErr(); err == nil {
		return fmt.Errorf("kube-apiserver is still running")
	}
	if err := cp.runAPIServer(); err != nil {
		// The port was free when the control plane started; another process may have taken
		// it since kube-apiserver exited.
		return fmt.Errorf("restarting kube-apiserver on %s, the address it had (it may have been taken since it exited): %w", cp.Server, err)
	}
	return nil
}

// Stop stops the scheduler and controller manager if they run, then kube-apiserver, then etcd.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for _, p := range []*process{cp.scheduler, cp.controllerManager, cp.apiserver, cp.etcd} {
		if p != nil {
			errs = append(errs, p.stop(20*time.Second))
		}
	}
	return errors.Join(errs...)
}

func writeServiceAccountKeys(dir string) (keyPath, pubPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyPath, pubPath = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// NodeKubeconfig writes a kubeconfig at path for user in groups, with a client certificate
// the API server trusts, as a node's kubelet (system:node:<name> in system:nodes) or
// kube-proxy (system:kube-proxy) has.
func (cp *ControlPlane) NodeKubeconfig(path, user string, groups ...string) error {
	files, err := cp.clients.issue(filepath.Join(filepath.Dir(path), filepath.Base(path)+".d"), user, groups...)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.Server, CertificateAuthorityData: cp.Admin.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: files.Cert, ClientKey: files.Key}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	cfg.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*cfg, path)
}

func writeKubeconfig(path, server string, ca []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*cfg, path)
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}
