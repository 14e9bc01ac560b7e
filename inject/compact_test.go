package inject

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPythonWithoutDocs(t *testing.T) {
	for name, c := range map[string]struct{ src, want string }{
		"the module's, a class's and a function's docstrings go, one line or several": {
			"\"\"\"The module.\n\nMore.\n\"\"\"\nimport os\n\n\nclass A:\n    \"\"\"A class.\"\"\"\n    x = 1\n\n\ndef f(a):\n    \"\"\"Does f,\n    twice.\"\"\"\n    return a\n",
			"import os\nclass A:\n    x = 1\ndef f(a):\n    return a\n",
		},
		"comment lines go, a comment after code stays": {
			"# a header\nx = 1  # why\n    # indented\ny = 2\n",
			"x = 1  # why\ny = 2\n",
		},
		"a triple-quoted string that is not its block's first statement stays": {
			"def f():\n    x = 1\n    \"\"\"not a docstring\"\"\"\n    return x\n",
			"def f():\n    x = 1\n    \"\"\"not a docstring\"\"\"\n    return x\n",
		},
		"a docstring that is its block's only statement becomes a pass, at the end too": {
			"class E(Exception):\n    \"\"\"An error.\"\"\"\n\n\ndef f():\n    return 1\n\n\nclass F(Exception):\n    \"\"\"Another.\"\"\"\n",
			"class E(Exception):\n    pass\ndef f():\n    return 1\nclass F(Exception):\n    pass\n",
		},
		"a string opening a block that is not a def or class stays": {
			"if x:\n    \"\"\"kept\"\"\"\n    y = 1\n",
			"if x:\n    \"\"\"kept\"\"\"\n    y = 1\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := pythonWithoutDocs("test.py", c.src); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestPythonWithoutDocsRefusesADocstringThatDoesNotEnd(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("pythonWithoutDocs took it out; want a panic")
		}
	}()
	pythonWithoutDocs("test.py", "def f():\n    \"\"\"Runs on\n    return 1\n")
}

// TestRelayWithoutDocsIsTheSameProgram holds the relay the snippet carries to the relay in
// the repository as Python parses both, docstrings aside: the same statements, names and
// constants in the same order.
func TestRelayWithoutDocsIsTheSameProgram(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{"full.py": relayPy, "carried.py": carriedRelay} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const compare = `
import ast, sys
def tree(path, drop_docs):
    t = ast.parse(open(path).read())
    if drop_docs:
        for node in ast.walk(t):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(node, clean=False) is not None:
                node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(t)
full, carried = tree(sys.argv[1], True), tree(sys.argv[2], False)
sys.exit(0 if full == carried else "the relay the snippet carries parses differently from relay/relay.py without its docstrings")
`
	out, err := exec.Command("python3", "-I", "-B", "-c", compare, filepath.Join(dir, "full.py"), filepath.Join(dir, "carried.py")).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	if carried := len(carriedRelay); carried >= len(relayPy) {
		t.Errorf("the relay the snippet carries is %d bytes, the source %d: nothing was taken out", carried, len(relayPy))
	}
}

func TestMinifiedShellKeepsHereDocumentsAndDropsComments(t *testing.T) {
	src := "# a header\nf() {\n  # why\n  cat <<'EOF' || return 1\n# kept: the here-document's text\n  indented\nEOF\n  echo \"# a string\"   # a comment\n}\n"
	got := minifiedShell("test.sh", src)
	for _, want := range []string{"# kept: the here-document's text\n  indented\nEOF\n", `echo "# a string"`} {
		if !strings.Contains(got, want) {
			t.Errorf("minified script lost %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"a header", "why", "a comment"} {
		if strings.Contains(got, gone) {
			t.Errorf("minified script still has the comment %q:\n%s", gone, got)
		}
	}
}
