package printable

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String is s with every rune that is not printable (unicode.IsPrint: C0 controls with tab
// and newline among them, DEL, C1 controls, format characters such as the bidi overrides
// U+202A-U+202E and U+2066-U+2069, line and paragraph separators, spaces other than ' ') written
// as Go writes it in a quoted rune (\x1b, \n, \u202e), and every byte that is not UTF-8 as \xNN.
// A backslash is kept as it is, so String of its own result changes nothing.
func String(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// Cut is String(s) cut to at most max bytes at a rune boundary, with "..." after a cut.
func Cut(s string, max int) string {
	s = String(s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
