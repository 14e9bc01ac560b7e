package batch

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// quote makes s one single-quoted shell word. Inside single quotes the shell interprets
// nothing, so the only character to handle is the quote itself; a NUL cannot be in an argument
// and invalid UTF-8 would reach the workload mangled, so both are refused.
func quote(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", refusef("%q is not valid UTF-8", s)
	}
	if strings.ContainsRune(s, 0) {
		return "", refusef("%q holds a NUL byte", s)
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'", nil
}

// Refusal is a pod the script cannot run as asked: permanent, so the pod fails with Error.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

func refusef(format string, args ...any) *Refusal {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}
