package eventnote

import "unicode/utf8"

// Max is the longest note events.k8s.io accepts, less room for the "...".
const Max = 1000

// Truncate cuts s to at most Max bytes, at a rune boundary: a note cut inside a
// multi-byte character is not valid UTF-8, and the API server refuses the Event.
func Truncate(s string) string {
	if len(s) <= Max {
		return s
	}
	cut := Max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
