package main

import (
	"context"
	"testing"
	"time"
)

// A batch's requests are what changed between two scrapes: only the API server's requests
// count toward its total and keep it from settling; webhook calls and shadowgate's reconciles
// (a waiting tunnel is looked at every 10 s) are said beside them.
func TestOnlyTheAPIServersRequestsCountAndKeepABatchFromSettling(t *testing.T) {
	before := requestCounts{"POST pods": 10, "webhook validate-pods": 10, "reconcile tunnels": 40}
	after := requestCounts{"POST pods": 30, "GET secrets": 5, "webhook validate-pods": 30, "reconcile tunnels": 90}
	batch := after.minus(before)
	if got := batch.total(); got != 25 {
		t.Errorf("total %v, want 25 (20 POST pods and 5 GET secrets)", got)
	}
	if got, want := batch.perPod(20), "2.50 reconcile tunnels, 1.00 POST pods, 1.00 webhook validate-pods, 0.25 GET secrets"; got != want {
		t.Errorf("per pod %q, want %q", got, want)
	}
	if !batch.served() {
		t.Error("a batch with requests is not served")
	}
	resync := requestCounts{"reconcile tunnels": 100}.minus(requestCounts{"reconcile tunnels": 40})
	if resync.served() {
		t.Error("reconciles alone keep a batch from settling")
	}
	if len(after.minus(after)) != 0 {
		t.Error("counts minus themselves are not empty")
	}
}

// settle reads until a reading shows no request since the last one and nothing queued, and
// says how many readings it took; one that never settles is an error at the limit.
func TestSettleWaitsForNoRequestsAndEmptyQueues(t *testing.T) {
	readings := []snapshot{
		{counts: requestCounts{"POST pods": 10}},
		{counts: requestCounts{"POST pods": 10, "PATCH deployments": 4}}, // a request: not yet
		{counts: requestCounts{"POST pods": 10, "PATCH deployments": 4, "reconcile shadows": 9}, queued: 2},
		{counts: requestCounts{"POST pods": 10, "PATCH deployments": 4, "reconcile shadows": 12}}, // settled
		{counts: requestCounts{"POST pods": 99}},
	}
	next := 0
	scrape := func(context.Context) (snapshot, error) {
		s := readings[min(next, len(readings)-1)]
		next++
		return s, nil
	}
	got, n, err := settle(context.Background(), scrape, time.Millisecond, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 || got["PATCH deployments"] != 4 || got["reconcile shadows"] != 12 {
		t.Errorf("settled after %d readings on %v, want the fourth reading", n, got)
	}
	busy := 0.0
	never := func(context.Context) (snapshot, error) {
		busy++
		return snapshot{counts: requestCounts{"GET pods": busy}}, nil
	}
	if _, _, err := settle(context.Background(), never, time.Millisecond, 20*time.Millisecond); err == nil {
		t.Error("a batch that never goes quiet settled")
	}
}
