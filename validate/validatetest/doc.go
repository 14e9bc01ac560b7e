// Package validatetest compares field errors as values in tests: type, path and bad value,
// not the wording of the detail, so a reworded message does not break a test while a changed
// decision does.
package validatetest
