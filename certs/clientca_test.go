package certs

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
)

func caPEM(t *testing.T) []byte {
	t.Helper()
	b, err := SelfSigned([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return b.CA
}

func poolOf(t *testing.T, pem []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in the test's PEM")
	}
	return p
}

func TestNewClientCARefusesAFileWithoutACertificate(t *testing.T) {
	dir := t.TempDir()
	missing, empty := filepath.Join(dir, "missing.crt"), filepath.Join(dir, "empty.crt")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ file, want string }{
		"a missing file names it":                   {missing, "open " + missing + ": no such file or directory"},
		"a file without a PEM certificate names it": {empty, empty + " holds no PEM certificate"},
	} {
		if _, err := NewClientCA(c.file, funcr.New(func(string, string) {}, funcr.Options{})); err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
	}
}

// Each step writes the file (or not) and reloads once, as Start's ticker does; the bundle in
// force and the lines logged are what an admin rotating the CA would see.
func TestClientCAReloadsANewBundleAndKeepsTheLastOneThroughABadFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.crt")
	first, second := caPEM(t), caPEM(t)
	write := func(data []byte) {
		// A ConfigMap volume swaps the file whole, as a rename does.
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(first)
	var logged []string
	c, err := NewClientCA(file, funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		write []byte // nil: the file is left as it is
		pool  []byte
		log   string // a part of the one line logged, "" for none
	}{
		{"an unchanged file changes nothing", nil, first, ""},
		{"a new bundle is taken", second, second, "client CA reloaded"},
		{"a file without a certificate keeps the last bundle", []byte("garbage"), second, "the last bundle read stays in force"},
		{"it is logged once, not at every read", nil, second, ""},
		{"the same bundle back is logged as a recovery", second, second, "loads again; its bundle is unchanged"},
		{"the first bundle back is taken", first, first, "client CA reloaded"},
	}
	for _, s := range steps {
		if s.write != nil {
			write(s.write)
		}
		logged = nil
		c.reload()
		if !c.Pool().Equal(poolOf(t, s.pool)) {
			t.Errorf("%s: the bundle in force is not the expected one", s.name)
		}
		switch {
		case s.log == "" && len(logged) != 0:
			t.Errorf("%s: logged %q, want nothing", s.name, logged)
		case s.log != "" && (len(logged) != 1 || !strings.Contains(logged[0], s.log)):
			t.Errorf("%s: logged %q, want one line with %q", s.name, logged, s.log)
		}
	}
}
