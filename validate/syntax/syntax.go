package syntax

import (
	"regexp"
	"strings"
)

var (
	userName   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)
	principal  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?@[A-Za-z0-9][A-Za-z0-9.-]*$`)
	commandArg = regexp.MustCompile(`^[A-Za-z0-9_./:=+-]+$`)
	absPath    = regexp.MustCompile(`^/[A-Za-z0-9_./+-]*$`)
	sshOption  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*=[A-Za-z0-9+,./:=@\[\]^_-]+$`)
	imageRef   = regexp.MustCompile(`^[a-z0-9][A-Za-z0-9._/:@-]*$`)
)

// UserName reports whether s is a login name: letters, digits, '_', '.', '-', not starting with '-' or '.'.
func UserName(s string) bool { return userName.MatchString(s) }

// Principal reports whether s is a Kerberos principal such as alice@EXAMPLE.ORG or svc/host@REALM.
func Principal(s string) bool { return principal.MatchString(s) }

// Program reports whether s is a command name or an absolute path to one ("python3", "/usr/sbin/sshd").
func Program(s string) bool {
	if strings.HasPrefix(s, "/") {
		return absPath.MatchString(s) && !strings.Contains(s, "..")
	}
	return commandArg.MatchString(s) && !strings.ContainsAny(s, "/=:") && !strings.HasPrefix(s, "-")
}

// SSHOption reports whether s is a single Key=Value ssh option of printable ASCII with no
// whitespace, quote, shell metacharacter or '%' (ssh's tokens), so it can never become a second
// option or a command.
func SSHOption(s string) bool { return sshOption.MatchString(s) }

// SSHOptionKey returns the keyword ssh reads from the option s, as written: the first word, up
// to whitespace, a quote or '=', after any leading whitespace or quote. ssh matches keywords in
// any case. It is the keyword even when s is not a well-formed option, so a refusal can name it.
func SSHOptionKey(s string) string {
	s = strings.TrimLeft(s, " \t\r\n")
	s = strings.TrimPrefix(s, `"`)
	if i := strings.IndexAny(s, " \t\r\n\"="); i >= 0 {
		s = s[:i]
	}
	return s
}

// Image reports whether s looks like a container image reference with nothing a shell would split.
func Image(s string) bool { return imageRef.MatchString(s) }
