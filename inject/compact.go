package inject

import (
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The pre-exec snippet rides in every offloaded pod that asks for the reverse tunnel, so it
// carries what the job runs and nothing written for the people who read the source: the
// scripts' comments and the relay's docstrings stay in the repository. Both are taken out
// once, when the program starts.

// minifiedShell is src, a POSIX shell program, printed by a shell parser without comments
// and with the least whitespace; here-documents are kept as they are.
func minifiedShell(file, src string) string {
	return printedShell(file, parsedShell(file, src), syntax.Minify(true))
}

// shellWithoutComments is src printed by a shell parser, indented by two spaces, without its
// comments but the shellcheck directives (`# shellcheck disable=...`), which the rendered
// scripts are checked with; here-documents are kept as they are.
func shellWithoutComments(file, src string) string {
	f := parsedShell(file, src, syntax.KeepComments(true))
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.File:
			n.Last = directives(n.Last)
		case *syntax.Stmt:
			n.Comments = directives(n.Comments)
		case *syntax.Subshell:
			n.Last = directives(n.Last)
		case *syntax.Block:
			n.Last = directives(n.Last)
		case *syntax.IfClause:
			n.CondLast, n.ThenLast, n.Last = directives(n.CondLast), directives(n.ThenLast), directives(n.Last)
		case *syntax.WhileClause:
			n.CondLast, n.DoLast = directives(n.CondLast), directives(n.DoLast)
		case *syntax.ForClause:
			n.DoLast = directives(n.DoLast)
		case *syntax.CmdSubst:
			n.Last = directives(n.Last)
		case *syntax.CaseClause:
			n.Last = directives(n.Last)
		case *syntax.CaseItem:
			n.Comments, n.Last = directives(n.Comments), directives(n.Last)
		}
		return true
	})
	return printedShell(file, f, syntax.Indent(2))
}

// directives are the shellcheck directives among comments.
func directives(comments []syntax.Comment) []syntax.Comment {
	return slices.DeleteFunc(comments, func(c syntax.Comment) bool {
		return !strings.HasPrefix(strings.TrimSpace(c.Text), "shellcheck ")
	})
}

// parsedShell is src, a POSIX shell program, parsed with opts. It panics on a script that does
// not parse: the scripts are embedded, so that is a bug of this build.
func parsedShell(file, src string, opts ...syntax.ParserOption) *syntax.File {
	f, err := syntax.NewParser(append(opts, syntax.Variant(syntax.LangPOSIX))...).Parse(strings.NewReader(src), file)
	if err != nil {
		panic(fmt.Sprintf("inject: %s does not parse as POSIX shell: %v", file, err))
	}
	return f
}

// printedShell is f printed with opts.
func printedShell(file string, f *syntax.File, opts ...syntax.PrinterOption) string {
	var out strings.Builder
	if err := syntax.NewPrinter(opts...).Print(&out, f); err != nil {
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
