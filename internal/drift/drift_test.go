package drift

import (
	"testing"
	"time"

	"github.com/interlink-hq/shadowgate/api/v1alpha1"
)

func TestTheStateRoundTripsThroughATunnelsStatus(t *testing.T) {
	for name, tc := range map[string]struct {
		in   *v1alpha1.ShadowStatus
		want Status
	}{
		"A Tunnel without the shadow's state says it is current.": {
			want: Status{State: Current},
		},
		"A refused shadow keeps its reason and since.": {
			in:   Status{State: Refused, Reason: "no virtual node hpc-vk", Since: time.Unix(10, 0).UTC()}.API(),
			want: Status{State: Refused, Reason: "no virtual node hpc-vk", Since: time.Unix(10, 0).UTC()},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Of(tc.in)
			if !got.Same(tc.want) || !got.Since.Equal(tc.want.Since) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
