package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// ClientCA is the CA bundle whose client certificates alone may call the webhook. It is read
// at start, where a missing or empty file is an error, and re-read every waitInterval, so a
// new bundle (a ConfigMap update reaching the mounted file) is trusted without a restart. A
// file that stops holding a certificate keeps the last bundle in force: locking the API server
// out would refuse every offloaded pod.
type ClientCA struct {
	file string
	log  logr.Logger
	pool atomic.Pointer[x509.CertPool]
	// read and failing belong to Start's goroutine once NewClientCA has returned.
	read    []byte // the file's contents that pool holds
	failing bool   // the last read failed; logged once until a read succeeds
}

// NewClientCA reads file, which must hold at least one PEM certificate.
func NewClientCA(file string, log logr.Logger) (*ClientCA, error) {
	c := &ClientCA{file: file, log: log}
	data, pool, err := readClientCA(file)
	if err != nil {
		return nil, err
	}
	c.read = data
	c.pool.Store(pool)
	return c, nil
}

// readClientCA reads file and the pool of the PEM certificates it holds.
func readClientCA(file string) ([]byte, *x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return data, pool, nil
}

// Pool is the bundle in force.
func (c *ClientCA) Pool() *x509.CertPool { return c.pool.Load() }

// Start re-reads the file until ctx ends. It is a controller-runtime Runnable.
func (c *ClientCA) Start(ctx context.Context) error {
	tick := time.NewTicker(waitInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			c.reload()
		}
	}
}

// NeedLeaderElection is false: every replica checks its callers.
func (c *ClientCA) NeedLeaderElection() bool { return false }

// reload takes the file's bundle when it changed and holds a certificate.
func (c *ClientCA) reload() {
	data, pool, err := readClientCA(c.file)
	if err != nil {
		if !c.failing {
			c.log.Error(err, "the client CA file no longer loads; the last bundle read stays in force until it does")
		}
		c.failing = true
		return
	}
	recovered := c.failing
	c.failing = false
	if bytes.Equal(data, c.read) {
		if recovered {
			c.log.Info("the client CA file loads again; its bundle is unchanged", "file", c.file)
		}
		return
	}
	c.read = data
	c.pool.Store(pool)
	c.log.Info("client CA reloaded: callers are now checked against the new bundle", "file", c.file)
}
