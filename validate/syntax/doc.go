// Package syntax holds the checks for values that end up as words on a shell or ssh command
// line. Each accepts only characters that no shell and no ssh option parser treats specially:
// a value that fails is refused, never escaped.
package syntax
