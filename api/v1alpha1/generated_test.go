package v1alpha1

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The DeepCopy methods and the CRDs in the kustomize base and the chart are what
// hack/generate.sh makes of the types today.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs controller-gen (hack/generate.sh)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "hack/generate.sh"))
	cmd.Env = append(os.Environ(), "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/generate.sh: %v\n%s", err, b)
	}
	for _, f := range []string{
		"api/v1alpha1/zz_generated.deepcopy.go",
		"manifests/base/tunnel-crd.yaml",
		"manifests/chart/shadowgate/templates/tunnel-crd.yaml",
	} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate`", f)
		}
	}
}
