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
	cases := map[string]HostCase{}
	for name, r := range readTable(t, "hosts.txt", 2) {
		cases[name] = HostCase{Host: r.value, ByShadow: r.verdicts[0], ByLoginNode: r.verdicts[1]}
	}
	return cases
}

// CommandCase is one line of validate/syntax/testdata/connect-commands.txt.
type CommandCase struct {
	Command string
	OK      bool
}

// ConnectCommandCases reads the shared table of ExecConnectCommand's rule, keyed by each
// line's description.
func ConnectCommandCases(t testing.TB) map[string]CommandCase {
	t.Helper()
	cases := map[string]CommandCase{}
	for name, r := range readTable(t, "connect-commands.txt", 1) {
		cases[name] = CommandCase{Command: r.value, OK: r.verdicts[0]}
	}
	return cases
}

type tableRow struct {
	verdicts []bool
	value    string
}

// readTable reads a table of validate/syntax/testdata: lines of n verdicts (ok or refused), a
// Go-quoted value and a description, '#' lines and blank lines left out.
func readTable(t testing.TB, name string, n int) map[string]tableRow {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	file := filepath.Join(filepath.Dir(self), "..", "syntax", "testdata", name)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	verdict := map[string]bool{"ok": true, "refused": false}
	rows := map[string]tableRow{}
	for i, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := tableRow{}
		rest := line
		for range n {
			word, after, _ := strings.Cut(rest, " ")
			v, ok := verdict[word]
			if !ok {
				t.Fatalf("%s:%d: %q is not ok or refused: %q", file, i+1, word, line)
			}
			r.verdicts = append(r.verdicts, v)
			rest = strings.TrimLeft(after, " ")
		}
		quoted, err := strconv.QuotedPrefix(rest)
		if err != nil {
			t.Fatalf("%s:%d: no quoted value after the verdicts: %q", file, i+1, line)
		}
		r.value, _ = strconv.Unquote(quoted)
		desc := strings.TrimSpace(rest[len(quoted):])
		if _, dup := rows[desc]; dup || desc == "" {
			t.Fatalf("%s:%d: the description %q is empty or not unique", file, i+1, desc)
		}
		rows[desc] = r
	}
	return rows
}
