package volumes

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// TokenSource gives the serviceAccountToken projection of a pod's volume.
type TokenSource interface {
	Token(pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) ([]byte, error)
}

// TokenRequester asks the API server for bound ServiceAccount tokens (TokenRequest), as the
// kubelet's token manager does, and keeps each until 80% of its life has passed, so a
// refresh rewrites the volume with a fresh token before the old one expires.
type TokenRequester struct {
	client corev1client.ServiceAccountsGetter

	mu     sync.Mutex
	tokens map[tokenKey]cachedToken
}

type tokenKey struct {
	podUID             types.UID
	namespace, account string
	audience           string
	expirationSeconds  int64
}

type cachedToken struct {
	token     []byte
	renewAt   time.Time
	expiresAt time.Time
}

// NewTokenRequester requests tokens through client.
func NewTokenRequester(client corev1client.ServiceAccountsGetter) *TokenRequester {
	return &TokenRequester{client: client, tokens: map[tokenKey]cachedToken{}}
}

// Token returns a token bound to pod for its ServiceAccount and the projection's audience.
func (r *TokenRequester) Token(pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) ([]byte, error) {
	account := pod.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	expiry := int64(3600)
	if src.ExpirationSeconds != nil {
		expiry = *src.ExpirationSeconds
	}
	key := tokenKey{pod.UID, pod.Namespace, account, src.Audience, expiry}
	now := time.Now()
	r.mu.Lock()
	// Forget the tokens of expired requests, whatever pod they were for: bounded by the pods.
	for k, t := range r.tokens {
		if now.After(t.expiresAt) {
			delete(r.tokens, k)
		}
	}
	cached, ok := r.tokens[key]
	r.mu.Unlock()
	if ok && now.Before(cached.renewAt) {
		return cached.token, nil
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expiry,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.client.ServiceAccounts(pod.Namespace).CreateToken(ctx, account, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for serviceaccount %s/%s: %w", pod.Namespace, account, err)
	}
	expires := resp.Status.ExpirationTimestamp.Time
	t := cachedToken{token: []byte(resp.Status.Token), expiresAt: expires, renewAt: now.Add(expires.Sub(now) * 8 / 10)}
	r.mu.Lock()
	r.tokens[key] = t
	r.mu.Unlock()
	return t.token, nil
}
