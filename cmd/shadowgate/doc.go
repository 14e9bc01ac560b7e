// Command shadowgate is the admission webhook and offline checker for interLink's SSH shadow:
// `serve` runs the webhook (package webhook, behind internal/serving) and the controllers
// (controllers/), which setup assembles; `check`, `render` and `policy check` judge files
// offline through the same validate and inject functions; `version`. This package owns only
// flags, input and output, and that assembly.
package main
