package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/interlink-hq/shadowgate/certs"
)

// TLSFiles names a PEM CA certificate, and a certificate and key it signed.
type TLSFiles struct {
	CA, Cert, Key string
}

// startControllers starts kube-controller-manager and kube-scheduler against the running API
// server, as the cluster admin, and returns once both answer /healthz.
func (cp *ControlPlane) startControllers(tools Tools) error {
	if tools.KubeControllerManager == "" || tools.KubeScheduler == "" {
		return fmt.Errorf("the local site needs kube-controller-manager and kube-scheduler; hack/e2e-tools.sh builds them")
	}
	kcmPort, err := freePort()
	if err != nil {
		return err
	}
	schedPort, err := freePort()
	if err != nil {
		return err
	}
	// Delegated authentication and authorization go to the API server as the admin, so each
	// serves /healthz (always allowed) without warnings about a missing kubeconfig.
	common := func(port int, certDir string) []string {
		return []string{
			"--kubeconfig=" + cp.AdminKubeconfig,
			"--authentication-kubeconfig=" + cp.AdminKubeconfig,
			"--authorization-kubeconfig=" + cp.AdminKubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(cp.Dir, certDir),
			"--leader-elect=false",
			// They serve /healthz alone, which needs no client CA looked up.
			"--authentication-skip-lookup",
		}
	}
	cp.controllerManager, err = startProcess("kube-controller-manager", filepath.Join(cp.Dir, "kube-controller-manager.log"),
		tools.KubeControllerManager, append(common(kcmPort, "controller-manager-certs"),
			// The token controller signs ServiceAccount tokens with the key the API server checks.
			"--service-account-private-key-file="+cp.saKey,
			"--root-ca-file="+filepath.Join(cp.Dir, "apiserver-tls", certs.CAFile),
			"--use-service-account-credentials=false",
			"--profiling=false")...)
	if err != nil {
		return err
	}
	cp.scheduler, err = startProcess("kube-scheduler", filepath.Join(cp.Dir, "kube-scheduler.log"),
		tools.KubeScheduler, append(common(schedPort, "scheduler-certs"), "--profiling=false")...)
	if err != nil {
		return err
	}
	cp.scheduler.stoppedExit = 1
	// Their serving certificates are self-signed: this checks health, not identity.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec G402 -- loopback health check
	for _, c := range []struct {
		p    *process
		port int
	}{{cp.controllerManager, kcmPort}, {cp.scheduler, schedPort}} {
		url := "https://127.0.0.1:" + strconv.Itoa(c.port) + "/healthz"
		if err := poll(c.p, 60*time.Second, func() error { return getOK(hc, url) }); err != nil {
			return err
		}
	}
	return nil
}

// writeKubeletCertificates makes the two sides of the API server's connection to a node's
// kubelet API: a client certificate for kube-apiserver from a CA of its own (nodes verify
// clients against it, so only the API server may read pod logs), and a serving certificate
// for 127.0.0.1, which kube-apiserver does not verify (no --kubelet-certificate-authority, as
// in most clusters).
func writeKubeletCertificates(dir string) (client, serving TLSFiles, err error) {
	bundle, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Now(), 24*time.Hour)
	if err != nil {
		return client, serving, err
	}
	servingDir := filepath.Join(dir, "kubelet-serving")
	if err := bundle.WriteDir(servingDir); err != nil {
		return client, serving, err
	}
	serving = TLSFiles{CA: filepath.Join(servingDir, certs.CAFile), Cert: filepath.Join(servingDir, certs.CertFile), Key: filepath.Join(servingDir, certs.KeyFile)}
	ca, err := newClientCA("site kubelet-client CA")
	if err != nil {
		return client, serving, err
	}
	client, err = ca.issue(filepath.Join(dir, "kubelet-client"), "kube-apiserver-kubelet-client", "system:masters")
	return client, serving, err
}

// clientCA is a CA that issues client certificates, a user's name and groups in each.
type clientCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newClientCA(name string) (*clientCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &clientCA{cert: cert, key: key}, nil
}

// issue writes the CA, and a client certificate for user in groups with its key, to dir.
func (ca *clientCA) issue(dir, user string, groups ...string) (TLSFiles, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSFiles{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return TLSFiles{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: ca.cert.NotBefore, NotAfter: ca.cert.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return TLSFiles{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return TLSFiles{}, err
	}
	files := TLSFiles{CA: filepath.Join(dir, certs.CAFile), Cert: filepath.Join(dir, certs.CertFile), Key: filepath.Join(dir, certs.KeyFile)}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return files, err
	}
	for file, block := range map[string]*pem.Block{
		files.CA:   {Type: "CERTIFICATE", Bytes: ca.cert.Raw},
		files.Cert: {Type: "CERTIFICATE", Bytes: der},
		files.Key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			return files, err
		}
	}
	return files, nil
}
