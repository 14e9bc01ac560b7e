// Command shadowgate is the admission webhook and offline checker for interLink's SSH shadow:
// `serve` runs the webhook and the reconciler (package webhook, behind internal/serving);
// `check`, `render` and `policy check` judge files offline through the same validate and
// inject functions; `version`. This package owns only flags, input and output.
package main
