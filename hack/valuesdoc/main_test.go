package main

import (
	"os"
	"strings"
	"testing"
)

const chart = "../../manifests/chart/shadowgate"

// The chart's README shows the table values.yaml makes today.
func TestReadmeTableIsCurrent(t *testing.T) {
	values, err := os.ReadFile(chart + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(chart + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	table, err := Table(values)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Splice(string(readme), table)
	if err != nil {
		t.Fatal(err)
	}
	if want != string(readme) {
		t.Errorf("%s/README.md's values table is stale: run `go run ./hack/valuesdoc -w`", chart)
	}
}

func TestTable(t *testing.T) {
	got, err := Table([]byte(`
# Replicas.
replicas: 2
pdb:
  # Create a PDB.
  enabled: true
# Requests and limits,
# in one value.
resources:
  limits: {memory: 256Mi}
# A | in a comment.
selector: {a: "x|y"}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := "| key | default | description |\n| --- | --- | --- |\n" +
		"| `replicas` | `2` | Replicas. |\n" +
		"| `pdb.enabled` | `true` | Create a PDB. |\n" +
		"| `resources` | `{\"limits\":{\"memory\":\"256Mi\"}}` | Requests and limits, in one value. |\n" +
		"| `selector` | `{\"a\":\"x\\|y\"}` | A \\| in a comment. |\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// A value without a comment is an error naming it, so nothing goes undocumented.
func TestUncommentedValueIsAnError(t *testing.T) {
	_, err := Table([]byte("pdb:\n  # Create a PDB.\n  enabled: true\n  minAvailable: 1\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4: pdb.minAvailable has no comment") {
		t.Errorf("got %v", err)
	}
}
