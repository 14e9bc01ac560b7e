package inject

import (
	"path"
	"strconv"
	"strings"

	"github.com/interlink-hq/shadowgate/validate/policy"
)

// CredentialFiles are where an ssh that logs in as the policy says finds its files: in the
// shadow, the mounted Secret and ConfigMap and the state directory (builder.credentialFiles);
// in `shadowgate doctor`, the files its user names.
type CredentialFiles struct {
	// Identity is the private key, under Auth publickey; unread under kerberos.
	Identity string
	// KnownHosts is the known_hosts the host keys are checked against: the pinned one of
	// KnownHostsConfigMap when the policy names it, else the writable file accept-new records
	// the keys it learns at first use in.
	KnownHosts string
}

// SSHOptions are the -o options of every ssh the shadow runs, and the ones `shadowgate
// doctor` logs in with, so both log in alike. ssh keeps the first value it is given for an
// option, so what the policy states in its own fields (user, port, credentials, host key
// checking, the bastion) comes before ExtraOptions and cannot be overridden there, while the
// keepalive and timeout defaults come after and can. The files' paths reach ssh as option
// values and, with a bastion, single-quoted in its ProxyCommand: a caller passing paths it did
// not choose itself checks each option with syntax.SSHOption.
func SSHOptions(ssh *policy.SSH, files CredentialFiles) []string {
	opts := append([]string{"User=" + ssh.User, "Port=" + strconv.Itoa(ssh.Port)}, checkedLogin(ssh, files)...)
	if ssh.Bastion.Host != "" {
		opts = append(opts, "ProxyCommand="+bastionHop(ssh, files))
	}
	opts = append(opts, "ExitOnForwardFailure=yes")
	return append(append(opts, ssh.ExtraOptions...), tuningDefaults...)
}

// credentialFiles are the shadow's: the mounted key and known_hosts, or the state directory's
// known_hosts for keys learned at first use.
func (b *builder) credentialFiles() CredentialFiles {
	files := CredentialFiles{Identity: path.Join(keyDir, keyFile), KnownHosts: path.Join(stateDir, "known_hosts")}
	if b.ssh.KnownHostsConfigMap != "" {
		files.KnownHosts = path.Join(knownHostsDir, knownHostsKey)
	}
	return files
}

// tuningDefaults come after ExtraOptions, which may set them otherwise.
var tuningDefaults = []string{"ServerAliveInterval=30", "ServerAliveCountMax=3", "ConnectTimeout=30"}

// checkedLogin are the options that make a login one shadowgate stands behind, on the login
// node and on the bastion alike: BatchMode, the host key checked against KnownHostsConfigMap
// (else learned at first use), and the policy's credential only.
func checkedLogin(ssh *policy.SSH, files CredentialFiles) []string {
	opts := []string{"BatchMode=yes", "GlobalKnownHostsFile=/dev/null"}
	if ssh.KnownHostsConfigMap != "" {
		opts = append(opts, "StrictHostKeyChecking=yes")
	} else {
		opts = append(opts, "StrictHostKeyChecking=accept-new")
	}
	opts = append(opts, "UserKnownHostsFile="+files.KnownHosts)
	if ssh.Auth == policy.AuthKerberos {
		return append(opts, "GSSAPIAuthentication=yes", "GSSAPIDelegateCredentials=no", "PreferredAuthentications=gssapi-with-mic")
	}
	return append(opts, "IdentityFile="+files.Identity, "IdentitiesOnly=yes", "PreferredAuthentications=publickey")
}

// bastionHop is the ProxyCommand that reaches the login node through SSH.Bastion: what
// OpenSSH's own ProxyJump runs (ssh -W '[%h]:%p' to the jump host), but with the options of
// the login itself, where ProxyJump gives the hop none of them. A ProxyCommand rather than an
// ssh_config file the scripts write: it rides SHADOW_SSH_OPTIONS, so every ssh the scripts run
// to the login node (the forwards, their checks, exec relays, Slurm lookups, the reverse
// tunnel's hops) goes through the bastion with no script reading or writing a file, and the
// node hops the reverse tunnel makes keep their own ProxyCommand, which they give first. ssh
// runs it with "$SHELL -c" (/bin/sh without SHELL, as in the shadow): every word is
// single-quoted, and none can hold a quote or a '%' (the host and user rules, the files'
// paths, ExtraOptions' printable values without quotes), so only %h and %p, the login host and
// port, are expanded. The hop gets GSSAPIDelegateCredentials=no like every login: a ticket
// never reaches the bastion.
func bastionHop(ssh *policy.SSH, files CredentialFiles) string {
	opts := append([]string{"User=" + ssh.BastionUser(), "Port=" + strconv.Itoa(ssh.Bastion.Port)}, checkedLogin(ssh, files)...)
	opts = append(append(opts, ssh.ExtraOptions...), tuningDefaults...)
	words := []string{"ssh"}
	for _, o := range opts {
		words = append(words, "-o", "'"+o+"'")
	}
	return strings.Join(append(words, "-W", "'[%h]:%p'", "--", "'"+ssh.Bastion.Host+"'"), " ")
}
