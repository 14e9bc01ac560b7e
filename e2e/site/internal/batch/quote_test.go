package batch

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestQuoteSurvivesTheShell hands each hostile string through quote to a real shell, which
// must print it back unchanged and run nothing it holds.
func TestQuoteSurvivesTheShell(t *testing.T) {
	hostile := map[string]string{
		"a single quote ends a quoted word":    `it's`,
		"quotes in a row":                      `''''`,
		"a command substitution":               `$(touch /tmp/pwned)`,
		"backticks":                            "`touch /tmp/pwned`",
		"a newline and a second command":       "x\ntouch /tmp/pwned",
		"a variable and a glob":                `$HOME/*`,
		"a semicolon, pipe and redirection":    `a; b | c > /tmp/pwned`,
		"a double-quoted substitution":         `"$(id)"`,
		"backslashes":                          `\'\\`,
		"the empty string":                     ``,
		"non-ASCII":                            "Grüße, 世界",
		"a quote right before a substitution":  `'$(id)'`,
		"a heredoc marker and a comment":       "<<EOF # not a comment",
		"a leading dash that echo would parse": "-n",
	}
	for name, s := range hostile {
		t.Run(name, func(t *testing.T) {
			q, err := quote(s)
			if err != nil {
				t.Fatalf("quote: %v", err)
			}
			out, err := exec.Command("bash", "-c", "printf '%s' "+q).Output()
			if err != nil {
				t.Fatalf("bash: %v", err)
			}
			if string(out) != s {
				t.Errorf("the shell gave back %q for %q (quoted %s)", out, s, q)
			}
		})
	}
}

func TestQuoteRefuses(t *testing.T) {
	for name, s := range map[string]string{
		"a NUL byte, which no argument can hold": "a\x00b",
		"invalid UTF-8":                          "\xff\xfe",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := quote(s)
			var refusal *Refusal
			if !errors.As(err, &refusal) {
				t.Fatalf("quote(%q) = %v, want a refusal", s, err)
			}
		})
	}
}

func TestSbatchFlags(t *testing.T) {
	accepted := map[string]struct {
		annotation string
		want       []string
	}{
		"flags are split on whitespace, values joined to their flag": {
			annotation: "--partition=debug -t 2800  --ntasks=8\t--mem-per-cpu=2000",
			want:       []string{"--partition=debug", "-t 2800", "--ntasks=8", "--mem-per-cpu=2000"},
		},
		"no annotation gives no flags": {annotation: "", want: nil},
		"gres and constraint values keep their punctuation": {
			annotation: "--gres=gpu:a100:2 --constraint=intel,avx2 --mail-user=a@b.org",
			want:       []string{"--gres=gpu:a100:2", "--constraint=intel,avx2", "--mail-user=a@b.org"},
		},
	}
	for name, c := range accepted {
		t.Run(name, func(t *testing.T) {
			got, err := sbatchFlags(c.annotation)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	refused := map[string]struct{ annotation, says string }{
		"a newline would add a line to the script": {"--mem=1G\ntouch /tmp/x", "line break"},
		"a carriage return is a line break too":    {"--mem=1G\r--wrap=x", "line break"},
		"a command substitution":                   {"--comment=$(id)", `"--comment=$(id)"`},
		"backticks":                                {"--comment=`id`", "metacharacters"},
		"a semicolon":                              {"--mem=1G;id", "metacharacters"},
		"quotes":                                   {`--comment="a b"`, "metacharacters"},
		"a redirection":                            {"--mem=1G>x", "metacharacters"},
		"the job name is the node's (the shadow's key)": {"--job-name=other", "--job-name is set by the node"},
		"the short job name too":                        {"-Jother", "-J is set by the node"},
		"the output file is the node's":                 {"-o /tmp/out", "-o is set by the node"},
		"a word before any flag":                        {"debug --mem=1G", "comes before any flag"},
	}
	for name, c := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := sbatchFlags(c.annotation)
			var refusal *Refusal
			if !errors.As(err, &refusal) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("sbatchFlags(%q) = %v, want a refusal saying %q", c.annotation, err, c.says)
			}
		})
	}
}
