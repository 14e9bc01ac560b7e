package validate

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// tuningOptions are the ssh options ExtraOptions admits, as the ssh_config manual spells them
// (ssh matches keywords in any case), each with the rule its value must follow: keepalives,
// timeouts, compression, IPQoS, the address family, log levels up to VERBOSE, and cipher and
// algorithm lists without weak additions. It is an allowlist: any other keyword, one added to
// OpenSSH later among them, is refused, since an option can run code, open a path between the
// cluster and the site's network, or act on shadowgate's own host keys, credentials or sessions.
var tuningOptions = []struct {
	keyword string
	rule    func(value string) string
}{
	{"AddressFamily", oneOf("any", "inet", "inet6")},
	{"CASignatureAlgorithms", algorithms(weakKeys)},
	{"Ciphers", algorithms(weakCiphers)},
	{"Compression", oneOf("yes", "no")},
	{"ConnectTimeout", count(3600)},
	{"ConnectionAttempts", count(10)},
	{"HostKeyAlgorithms", algorithms(weakKeys)},
	{"IPQoS", oneOf("af11", "af12", "af13", "af21", "af22", "af23", "af31", "af32", "af33", "af41", "af42", "af43",
		"cs0", "cs1", "cs2", "cs3", "cs4", "cs5", "cs6", "cs7", "ef", "le", "lowdelay", "throughput", "reliability", "none")},
	{"KexAlgorithms", algorithms(weakKex)},
	{"LogLevel", oneOf("QUIET", "FATAL", "ERROR", "INFO", "VERBOSE")},
	{"MACs", algorithms(weakMACs)},
	{"PubkeyAcceptedAlgorithms", algorithms(weakKeys)},
	{"ServerAliveCountMax", count(100)},
	{"ServerAliveInterval", count(3600)},
	{"TCPKeepAlive", oneOf("yes", "no")},
}

// Algorithms OpenSSH dropped from its defaults as broken or weak: a list may remove them, and
// may not add them.
var (
	weakCiphers = []string{"3des-cbc", "blowfish-cbc", "cast128-cbc", "arcfour", "arcfour128", "arcfour256",
		"aes128-cbc", "aes192-cbc", "aes256-cbc", "rijndael-cbc@lysator.liu.se"}
	weakMACs = []string{"hmac-md5", "hmac-md5-96", "hmac-md5-etm@openssh.com", "hmac-md5-96-etm@openssh.com",
		"hmac-sha1-96", "hmac-sha1-96-etm@openssh.com", "hmac-ripemd160", "hmac-ripemd160@openssh.com",
		"hmac-ripemd160-etm@openssh.com", "umac-32@openssh.com"}
	weakKex  = []string{"diffie-hellman-group1-sha1", "diffie-hellman-group14-sha1", "diffie-hellman-group-exchange-sha1"}
	weakKeys = []string{"ssh-rsa", "ssh-dss", "ssh-rsa-cert-v01@openssh.com", "ssh-dss-cert-v01@openssh.com"}
)

var (
	digits        = regexp.MustCompile(`^[0-9]{1,5}$`)
	algorithmName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9@.+-]*$`)
)

// count is the rule of a number of seconds or tries from 0 to most.
func count(most int) func(string) string {
	return func(v string) string {
		if !digits.MatchString(v) {
			return "is not a number"
		}
		if n, _ := strconv.Atoi(v); n > most { // at most five digits: cannot overflow
			return fmt.Sprintf("is over %d", most)
		}
		return ""
	}
}

// oneOf is the rule of a value from a fixed set, in any case as ssh reads it.
func oneOf(values ...string) func(string) string {
	return func(v string) string {
		if slices.ContainsFunc(values, func(w string) bool { return strings.EqualFold(v, w) }) {
			return ""
		}
		return "is not one of " + strings.Join(values, ", ")
	}
}

// algorithms is the rule of an algorithm list: comma-separated names, as a whole list or with
// ssh's prefixes, '-' to remove names from the defaults (always admitted), '+' to append or
// '^' to put first; no name of weak in a list that adds, and no pattern.
func algorithms(weak []string) func(string) string {
	return func(v string) string {
		list, removing := strings.CutPrefix(v, "-")
		if !removing {
			list = strings.TrimLeft(list, "+^")
		}
		for _, name := range strings.Split(list, ",") {
			switch {
			case !algorithmName.MatchString(name):
				return fmt.Sprintf("lists %q, which is not an algorithm name", name)
			case !removing && slices.Contains(weak, strings.ToLower(name)):
				return fmt.Sprintf("adds %s, which OpenSSH dropped from its defaults as weak; remove it", name)
			}
		}
		return ""
	}
}

// setByShadowgate are the options shadowgate sets itself, from the policy's fields, before
// ExtraOptions: ssh keeps the first value, so an entry for them would do nothing but mislead.
var setByShadowgate = map[string]string{
	"user": "User", "port": "Port", "batchmode": "nothing: always yes", "stricthostkeychecking": "KnownHostsConfigMap",
	"userknownhostsfile": "KnownHostsConfigMap", "globalknownhostsfile": "KnownHostsConfigMap",
	"preferredauthentications": "Auth", "exitonforwardfailure": "nothing: always yes",
	"identitiesonly": "nothing: always yes", "gssapiauthentication": "Auth", "gssapidelegatecredentials": "nothing: always no",
}

// extraOptionProblem says why the option key=value may not be among ExtraOptions, and what to
// do instead, or "".
func extraOptionProblem(key, value string) string {
	lower := strings.ToLower(key)
	keywords := make([]string, 0, len(tuningOptions))
	for _, o := range tuningOptions {
		if strings.EqualFold(o.keyword, key) {
			if why := o.rule(value); why != "" {
				return fmt.Sprintf("the value of %s %s", key, why)
			}
			return ""
		}
		keywords = append(keywords, o.keyword)
	}
	if from, ok := setByShadowgate[lower]; ok {
		return fmt.Sprintf("%s is set by shadowgate before ExtraOptions, from %s, and ssh keeps that value; remove it", key, from)
	}
	if r, ok := refusedOptions[lower]; ok {
		return fmt.Sprintf("%s is not allowed: it %s; %s", key, r.why, r.instead)
	}
	return fmt.Sprintf("%s is not among the tuning options ExtraOptions admits (%s); remove it", key, strings.Join(keywords, ", "))
}
