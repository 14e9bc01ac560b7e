package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/interlink-hq/shadowgate/internal/freeport"
)

// SiteRealm is the site's Kerberos realm.
const SiteRealm = "SITE.TEST"

// KDC is the site's Kerberos realm: Debian's krb5kdc beside the login nodes (this machine's end
// of the compute node's veth pair, which the cluster's pods reach) with a database of its own,
// the account's principal and keytab, and a host principal for each Kerberos login node.
type KDC struct {
	// Krb5Conf is the krb5.conf every client of the realm uses (the shadow mounts it at
	// /etc/krb5.conf); UserKeytab holds Principal's key, as a site hands a user a keytab.
	Krb5Conf, UserKeytab, Principal string

	dir, kdcConf string
}

// startKDC creates the realm's database and principals and starts krb5kdc.
func (s *Site) startKDC() error {
	dir := filepath.Join(s.Dir, "kdc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	port, err := freeport.Port(s.hostEnd)
	if err != nil {
		return err
	}
	k := &KDC{Krb5Conf: filepath.Join(dir, "krb5.conf"), UserKeytab: filepath.Join(dir, "user.keytab"),
		Principal: SiteAccount + "@" + SiteRealm, dir: dir, kdcConf: filepath.Join(dir, "kdc.conf")}
	// No DNS: the login nodes are addresses, and their host principals are named after them.
	if err := os.WriteFile(k.Krb5Conf, []byte(fmt.Sprintf(`[libdefaults]
  default_realm = %[1]s
  dns_lookup_kdc = false
  dns_lookup_realm = false
  rdns = false
  dns_canonicalize_hostname = false
[realms]
  %[1]s = {
    kdc = %[3]s:%[2]d
  }
`, SiteRealm, port, s.hostEnd)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(k.kdcConf, []byte(fmt.Sprintf(`[kdcdefaults]
  kdc_listen = %[4]s:%[2]d
  kdc_tcp_listen = %[4]s:%[2]d
[realms]
  %[1]s = {
    database_name = %[3]s/principal
    key_stash_file = %[3]s/stash
    acl_file = %[3]s/kadm5.acl
  }
[logging]
  kdc = FILE:%[3]s/krb5kdc.log
`, SiteRealm, port, dir, s.hostEnd)), 0o644); err != nil {
		return err
	}
	if err := k.admin("kdb5_util", "create", "-s", "-r", SiteRealm, "-P", token()); err != nil {
		return err
	}
	if err := k.addKeytab(k.Principal, k.UserKeytab); err != nil {
		return err
	}
	p, err := startProcess("krb5kdc", filepath.Join(dir, "krb5kdc.out"), "env", "KRB5_CONFIG="+k.Krb5Conf,
		"KRB5_KDC_PROFILE="+k.kdcConf, "krb5kdc", "-n", "-P", filepath.Join(dir, "krb5kdc.pid"))
	if err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	s.KDC = k
	return poll(p, 10*time.Second, func() error {
		return exec.Command("nc", "-z", "-w", "1", s.hostEnd, strconv.Itoa(port)).Run()
	})
}

// addKeytab creates principal with a random key and writes its keytab.
func (k *KDC) addKeytab(principal, keytab string) error {
	if err := k.admin("kadmin.local", "-q", "addprinc -randkey "+principal); err != nil {
		return err
	}
	return k.admin("kadmin.local", "-q", "ktadd -k "+keytab+" "+principal)
}

// admin runs a KDC administration command on the realm's database.
func (k *KDC) admin(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KRB5_CONFIG="+k.Krb5Conf, "KRB5_KDC_PROFILE="+k.kdcConf)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %v\n%s", name, args, err, out)
	}
	return nil
}
