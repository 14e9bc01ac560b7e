package serving

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// reviewTypeSeeds are bodies on which reviewType must read what a full parse reads.
var reviewTypeSeeds = map[string]string{
	"as the API server writes it":         `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"x"}}`,
	"the type after a large request":      `{"request":{"object":{"metadata":{"annotations":{"a":"}\"{["}}},"list":[1,2,{"kind":"Pod"}]},"apiVersion":"admission.k8s.io/v2","kind":"Banana"}`,
	"nested kinds are not the review's":   `{"request":{"kind":{"kind":"Pod"},"apiVersion":"v9"}}`,
	"the last of duplicates wins":         `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","apiVersion":"admission.k8s.io/v2"}`,
	"an escaped key is the same key":      `{"\u0061piVersion":"admission.k8s.io/v2"}`,
	"an escaped value is unescaped":       `{"kind":"Ban\u0061na"}`,
	"keys match case-sensitively":         `{"APIVersion":"admission.k8s.io/v2","Kind":"Banana"}`,
	"null leaves a field empty":           `{"apiVersion":null,"kind":"Banana"}`,
	"whitespace anywhere":                 " \n{ \"kind\" :\t\"Banana\" , \"x\" : [ ] }\r\n",
	"an empty object":                     `{}`,
	"numbers, literals and empty strings": `{"a":-1.5e3,"b":true,"c":null,"d":"","kind":"AdmissionReview"}`,
	"a backslash before a closing quote":  `{"a":"\\","kind":"Banana"}`,
}

// reviewType reads what kjson reads into a TypeMeta from every JSON object it reads; on a
// body kjson refuses, it may read anything, as admission.Webhook refuses that body either way.
func checkReviewType(t *testing.T, body []byte) {
	apiVersion, kind, ok := reviewType(body)
	var want metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &want); err != nil {
		return
	}
	if !ok || apiVersion != want.APIVersion || kind != want.Kind {
		t.Errorf("%q: read %q, %q (ok %v), want %q, %q", body, apiVersion, kind, ok, want.APIVersion, want.Kind)
	}
}

func TestReviewTypeReadsWhatAFullParseReads(t *testing.T) {
	for name, body := range reviewTypeSeeds {
		t.Run(name, func(t *testing.T) { checkReviewType(t, []byte(body)) })
	}
	for name, body := range map[string]string{
		"not an object":      `["kind"]`,
		"a cut-off object":   `{"kind":"Ban`,
		"a number as a kind": `{"kind":1}`,
	} {
		if _, _, ok := reviewType([]byte(body)); ok {
			t.Errorf("%s: read as a review", name)
		}
	}
}

func FuzzReviewType(f *testing.F) {
	for _, body := range reviewTypeSeeds {
		f.Add([]byte(body))
	}
	f.Fuzz(checkReviewType)
}
