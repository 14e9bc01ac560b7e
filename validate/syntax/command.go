package syntax

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// netcats are the programs ExecConnectCommand may name, alone or as the last element of an
// absolute path: each connects its standard input and output to <host> <port>, the two words
// the shadow appends, and nothing else.
var netcats = []string{"nc", "ncat", "netcat"}

// wrappers are programs an admin might reach for that run another command or open channels of
// their own: with any of them the compute node, appended as a word, would become a command on
// the login node.
var wrappers = []string{"sh", "bash", "dash", "ash", "zsh", "ksh", "csh", "busybox", "env", "xargs", "timeout",
	"nohup", "nice", "setsid", "stdbuf", "sudo", "su", "exec", "eval", "command", "ssh", "srun", "python", "python3",
	"perl", "ruby", "socat"}

var (
	connectPath   = regexp.MustCompile(`^/[A-Za-z0-9_./+-]*/(nc|ncat|netcat)$`)
	connectNumber = regexp.MustCompile(`^[0-9]{1,4}$`)
)

// ConnectCommand reports whether s may be ExecConnectCommand, which the login node's shell runs
// as `<s> '<node>' '<port>'`, and why not: nc, ncat or netcat, by name or absolute path, then at
// most one each of -N (OpenBSD netcat: shut the connection down for writing when the input
// ends), -q N and -w N (N of at most four digits), words separated by single spaces.
// common.sh's valid_connect_command is the same rule; testdata/connect-commands.txt holds the
// table both are tested with.
func ConnectCommand(s string) (ok bool, reason string) {
	words := strings.Split(s, " ")
	prog := words[0]
	switch {
	case slices.Contains(netcats, prog):
	case connectPath.MatchString(prog) && !strings.Contains(prog, ".."):
	case slices.Contains(wrappers, prog) || slices.Contains(wrappers, prog[strings.LastIndex(prog, "/")+1:]):
		return false, fmt.Sprintf("%q runs another command or opens channels of its own, so the compute node appended to it would become a command on the login node", prog)
	default:
		return false, fmt.Sprintf("%q is not nc, ncat or netcat, by name or absolute path", prog)
	}
	seen := map[string]bool{}
	for rest := words[1:]; len(rest) > 0; {
		opt := rest[0]
		switch {
		case opt == "-e" || opt == "-c" || strings.HasPrefix(opt, "--") && strings.HasSuffix(opt, "exec"):
			return false, fmt.Sprintf("%s runs a program for the connection", opt)
		case opt != "-q" && opt != "-w" && opt != "-N":
			return false, fmt.Sprintf("%q is not -N, -q N or -w N, the only options admitted", opt)
		case seen[opt]:
			return false, fmt.Sprintf("%s is given twice", opt)
		case opt == "-N":
			rest = rest[1:]
		case len(rest) < 2 || !connectNumber.MatchString(rest[1]):
			return false, fmt.Sprintf("%s must be followed by a number of seconds of at most four digits", opt)
		default:
			rest = rest[2:]
		}
		seen[opt] = true
	}
	return true, ""
}
