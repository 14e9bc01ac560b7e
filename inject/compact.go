package inject

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The pre-exec snippet rides in every offloaded pod that asks for the reverse tunnel, so it
// carries what the job runs and nothing written for the people who read the source: the
// scripts' comments and the relay's docstrings stay in the repository. Both are taken out
// once, when the program starts.

// minifiedShell is src, a POSIX shell program, printed by a shell parser without comments
// and with the least whitespace; here-documents are kept as they are. It panics on a script
// that does not parse: the scripts are embedded, so that is a bug of this build.
func minifiedShell(file, src string) string {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(src), file)
	if err != nil {
		panic(fmt.Sprintf("inject: %s does not parse as POSIX shell: %v", file, err))
	}
	var out strings.Builder
	if err := syntax.NewPrinter(syntax.Minify(true)).Print(&out, f); err != nil {
		panic(fmt.Sprintf("inject: printing %s: %v", file, err))
	}
	return out.String()
}

// pythonWithoutDocs is src, a Python module, without its blank lines, its comment lines and
// the docstrings of the module, its classes and its functions, which are the first statement
// of their block: a line opening with """ right after a def or class line (or at the top).
// Only whole lines go, and a docstring that is its block's only statement becomes a pass;
// what is left means the same program (TestRelayWithoutDocsIsTheSameProgram compares the two
// as Python parses them).
func pythonWithoutDocs(file, src string) string {
	var out strings.Builder
	lines := strings.SplitAfter(src, "\n")
	opensBlock := true // the module's first statement may be its docstring
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case opensBlock && strings.HasPrefix(line, `"""`):
			open, end := lines[i], i
			if !strings.Contains(line[3:], `"""`) {
				for end = i + 1; end < len(lines) && !strings.Contains(lines[end], `"""`); end++ {
				}
			}
			if end == len(lines) {
				panic(fmt.Sprintf("inject: %s: the docstring of line %d does not end", file, i+1))
			}
			i, opensBlock = end, false
			if next := nextStatement(lines[end+1:]); next == "" || indent(next) < indent(open) {
				// The docstring was its block's only statement: a block cannot be empty.
				out.WriteString(open[:indent(open)] + "pass\n")
			}
			continue
		}
		header := strings.HasPrefix(line, "def ") || strings.HasPrefix(line, "class ")
		opensBlock = header && strings.HasSuffix(line, ":")
		out.WriteString(lines[i])
	}
	return out.String()
}

// nextStatement is the first line of lines that is neither blank nor a comment, or "".
func nextStatement(lines []string) string {
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			return l
		}
	}
	return ""
}

func indent(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }
