package main

import (
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/interlink-hq/shadowgate/internal/printable"
)

// fieldError is one refusal in -o json, field.Error as values.
type fieldError struct {
	Field  string `json:"field"`
	Type   string `json:"type"`
	Value  any    `json:"value,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func toFieldErrors(errs field.ErrorList) []fieldError {
	out := make([]fieldError, 0, len(errs))
	for _, e := range errs {
		fe := fieldError{Field: e.Field, Type: e.Type.String(), Detail: e.Detail}
		switch e.Type {
		case field.ErrorTypeRequired, field.ErrorTypeForbidden, field.ErrorTypeInternal:
			// these carry no value, as kubectl prints them
		default:
			fe.Value = e.BadValue
		}
		out = append(out, fe)
	}
	return out
}

// result is the verdict on one object in `check -o json`.
type result struct {
	Kind      string       `json:"kind"`
	Namespace string       `json:"namespace"`
	Name      string       `json:"name"`
	Allowed   bool         `json:"allowed"`
	Errors    []fieldError `json:"errors"`
	Warnings  []string     `json:"warnings"`
	errs      field.ErrorList
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeText prints results the way kubectl prints a denial, each line printable (the files
// checked may carry control characters in names and annotations):
// Pod user/trainer: metadata.annotations[...]: Invalid value: "...": ...
func writeText(w io.Writer, results []result) {
	for _, r := range results {
		who := r.Kind + " " + r.Name
		if r.Namespace != "" {
			who = r.Kind + " " + r.Namespace + "/" + r.Name
		}
		who = printable.String(who)
		for _, warning := range r.Warnings {
			fmt.Fprintf(w, "%s: Warning: %s\n", who, printable.String(warning))
		}
		if r.Allowed {
			fmt.Fprintf(w, "%s: admitted\n", who)
			continue
		}
		for _, e := range r.errs {
			fmt.Fprintf(w, "%s: %s\n", who, printable.String(e.Error()))
		}
	}
}
