package printable

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"Printable ASCII is kept as it is.":                         {"LoginRefused: alice@login.example.org: Permission denied (publickey).", "LoginRefused: alice@login.example.org: Permission denied (publickey)."},
		"Printable letters beyond ASCII are kept.":                  {"nœud de calcul n°3, 计算节点", "nœud de calcul n°3, 计算节点"},
		"An ANSI escape sequence shows its ESC.":                    {"\x1b[2J\x1b]0;owned\x07x", `\x1b[2J\x1b]0;owned\ax`},
		"Newline, carriage return and tab are escaped like Go's.":   {"a\nb\rc\td", `a\nb\rc\td`},
		"NUL and DEL are escaped.":                                  {"a\x00b\x7fc", `a\x00b\x7fc`},
		"A C1 control (the one-byte CSI) is escaped.":               {"a\u009b2Jb\u0085c", `a\u009b2Jb\u0085c`},
		"A bidi override cannot reorder what follows it.":           {"Ready \u202egnp.exe\u202c", `Ready \u202egnp.exe\u202c`},
		"Bidi isolates, zero-width and line separators are escaped": {"\u2066x\u2069\u200by\u2028z\ufeff", `\u2066x\u2069\u200by\u2028z\ufeff`},
		"A space other than ' ' is escaped.":                        {"a\u00a0b", `a\u00a0b`},
		"Bytes that are not UTF-8 are escaped one by one.":          {"a\xff\xc3b", `a\xff\xc3b`},
		"A backslash is kept, so a literal escape reads as itself.": {`C:\x1b`, `C:\x1b`},
		"The empty string stays empty.":                             {"", ""},
	} {
		t.Run(name, func(t *testing.T) {
			got := String(tc.in)
			if got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again := String(got); again != got {
				t.Errorf("String of its own result %q changed it to %q", got, again)
			}
			for _, r := range got {
				if !unicode.IsPrint(r) {
					t.Errorf("String(%q) = %q holds %U", tc.in, got, r)
				}
			}
		})
	}
}

func TestCut(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		max  int
		want string
	}{
		"Text within the bound is only made printable.":         {"a\x1bb", 10, `a\x1bb`},
		"Text over the bound is cut and says so.":               {"abcdefgh", 4, "abcd..."},
		"The bound counts the escapes, not the raw characters.": {"\x1b\x1b", 4, `\x1b...`},
		"A cut never splits a multi-byte character.":            {"aé", 2, "a..."},
	} {
		t.Run(name, func(t *testing.T) {
			got := Cut(tc.in, tc.max)
			if got != tc.want {
				t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
			if !utf8.ValidString(got) || strings.ContainsAny(got, "\x1b\n") {
				t.Errorf("Cut(%q, %d) = %q is not printable UTF-8", tc.in, tc.max, got)
			}
		})
	}
}
