package shadows

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// The cache holds HTTPRoutes only where the API server serves them: a kind it does not serve
// would never sync. An API server that cannot be asked is an error, not a no.
func TestGatewayAPIServedOnlyWhereTheAPIServerServesHTTPRoutes(t *testing.T) {
	for name, c := range map[string]struct {
		resources []*metav1.APIResourceList
		err       error
		want      bool
		wantErr   bool
	}{
		"An API server with the Gateway API's HTTPRoutes serves them.": {
			resources: []*metav1.APIResourceList{{GroupVersion: "gateway.networking.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "gateways", Kind: "Gateway"}, {Name: "httproutes", Kind: "HTTPRoute"}}}},
			want:      true,
		},
		"An API server with Gateways but no HTTPRoutes does not.": {
			resources: []*metav1.APIResourceList{{GroupVersion: "gateway.networking.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "gateways", Kind: "Gateway"}}}},
		},
		"An API server without the group does not.": {
			resources: []*metav1.APIResourceList{{GroupVersion: "networking.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "ingresses", Kind: "Ingress"}}}},
		},
		"An API server that cannot be asked is an error.": {
			err: errors.New("connection refused"), wantErr: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: c.resources}}
			if c.err != nil {
				d.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, c.err })
			}
			got, err := GatewayAPIServed(d)
			if (err != nil) != c.wantErr || got != c.want {
				t.Errorf("GatewayAPIServed = %v, %v; want %v, error %v", got, err, c.want, c.wantErr)
			}
		})
	}
}
