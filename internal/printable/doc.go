// Package printable makes text that came from outside shadowgate (pods' annotations, shadow
// containers' termination messages and probe output, what a site's ssh printed) safe to write
// into an Event or an annotation and to print on a terminal: every character that is not
// printable is written as a visible escape, so none reaches a terminal or a log viewer raw.
// It is pure and imports nothing of shadowgate.
package printable
