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
			// The API server has no --client-ca-file, so there is no client CA to look up.
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
		if err := poll(c.p, 60*time.Second, func() error {
			resp, err := hc.Get(url)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", url, resp.Status)
			}
			return nil
		}); err != nil {
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
	now := time.Now()
	bundle, err := certs.SelfSigned([]string{"127.0.0.1"}, now, 24*time.Hour)
	if err != nil {
		return client, serving, err
	}
	servingDir := filepath.Join(dir, "kubelet-serving")
	if err := bundle.WriteDir(servingDir); err != nil {
		return client, serving, err
	}
	serving = TLSFiles{CA: filepath.Join(servingDir, certs.CAFile), Cert: filepath.Join(servingDir, certs.CertFile), Key: filepath.Join(servingDir, certs.KeyFile)}

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return client, serving, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "site kubelet-client CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return client, serving, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return client, serving, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return client, serving, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return client, serving, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return client, serving, err
	}
	clientDir := filepath.Join(dir, "kubelet-client")
	client = TLSFiles{CA: filepath.Join(clientDir, certs.CAFile), Cert: filepath.Join(clientDir, certs.CertFile), Key: filepath.Join(clientDir, certs.KeyFile)}
	if err := os.MkdirAll(clientDir, 0o700); err != nil {
		return client, serving, err
	}
	for file, block := range map[string]*pem.Block{
		client.CA:   {Type: "CERTIFICATE", Bytes: caDER},
		client.Cert: {Type: "CERTIFICATE", Bytes: der},
		client.Key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			return client, serving, err
		}
	}
	return client, serving, nil
}
