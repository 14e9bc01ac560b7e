// Package serving is the HTTP plumbing every admission route of `shadowgate serve` shares,
// applied once per route by Route: the deadline the API server gives a call, the check that
// a body is an AdmissionReview of a version shadowgate reads, the request logger, and the
// count of decisions by endpoint and result; and DrainingServer, which drains the API
// server's connections before a shutdown. Handlers only decide and respond.
//
// It may import controller-runtime and Prometheus; nothing of shadowgate's.
package serving
