package eventnote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// An Event note cut at Max stays valid UTF-8 when a multi-byte character straddles
// the cut, and keeps as much as fits.
func TestTruncateCutsAtARuneBoundary(t *testing.T) {
	s := strings.Repeat("a", Max-1) + "é" + "tail" // é is two bytes, across the cut
	got := Truncate(s)
	if !utf8.ValidString(got) {
		t.Fatalf("not valid UTF-8: %q", got[len(got)-8:])
	}
	if want := strings.Repeat("a", Max-1) + "..."; got != want {
		t.Errorf("got ...%q, want ...%q", got[len(got)-8:], want[len(want)-8:])
	}
	if short := "déjà vu"; Truncate(short) != short {
		t.Errorf("a short note was changed: %q", Truncate(short))
	}
}
