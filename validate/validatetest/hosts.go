package validatetest

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// HostCase is one line of validate/syntax/testdata/hosts.txt: a host and whether the host
// rule lets it through for each of its uses.
type HostCase struct {
	Host string
	// ByShadow and ByLoginNode are the verdicts for a host the shadow dials and for a compute
	// node, which the login node dials.
	ByShadow, ByLoginNode bool
}

// HostCases reads the host rule's shared table, keyed by each line's description, so the Go
// rule and the scripts' are tested against the same cases.
func HostCases(t testing.TB) map[string]HostCase {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	file := filepath.Join(filepath.Dir(self), "..", "syntax", "testdata", "hosts.txt")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	verdict := map[string]bool{"ok": true, "refused": false}
	cases := map[string]HostCase{}
	for i, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		shadow, ok1 := verdict[fields[0]]
		node, ok2 := verdict[fields[1]]
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(line, fields[0])), fields[1]))
		quoted, err := strconv.QuotedPrefix(rest)
		if !ok1 || !ok2 || err != nil {
			t.Fatalf("%s:%d: not <ok|refused> <ok|refused> <quoted host> <description>: %q", file, i+1, line)
		}
		host, _ := strconv.Unquote(quoted)
		name := strings.TrimSpace(rest[len(quoted):])
		if _, dup := cases[name]; dup || name == "" {
			t.Fatalf("%s:%d: the description %q is empty or not unique", file, i+1, name)
		}
		cases[name] = HostCase{Host: host, ByShadow: shadow, ByLoginNode: node}
	}
	return cases
}
