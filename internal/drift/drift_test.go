package drift

import (
	"testing"
	"time"
)

func TestTheAnnotationRoundTrips(t *testing.T) {
	for name, tc := range map[string]struct {
		annotations map[string]string
		want        Status
		wantErr     bool
	}{
		"a pod without the annotation has a current shadow": {
			want: Status{State: Current},
		},
		"a refused shadow keeps its reason": {
			annotations: map[string]string{Annotation: Status{State: Refused, Reason: "no virtual node hpc-vk", Since: time.Unix(10, 0).UTC()}.Encode()},
			want:        Status{State: Refused, Reason: "no virtual node hpc-vk", Since: time.Unix(10, 0).UTC()},
		},
		"a value that is no JSON is an error": {
			annotations: map[string]string{Annotation: "rolling"},
			wantErr:     true,
		},
		"a state shadowgate never writes is an error": {
			annotations: map[string]string{Annotation: `{"state":"Current"}`},
			wantErr:     true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Of(tc.annotations)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %t", err, tc.wantErr)
			}
			if !tc.wantErr && (!got.Same(tc.want) || !got.Since.Equal(tc.want.Since)) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestACurrentShadowHasNoAnnotationValue(t *testing.T) {
	if v := (Status{State: Current, Since: time.Now()}).Encode(); v != "" {
		t.Errorf("Current encodes as %q, want nothing", v)
	}
}
