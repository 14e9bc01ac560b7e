// Package goldencase reads inject's golden cases, inject/testdata/<name>.yaml: a policy
// document, ---, and a Pod. inject renders them against their .golden.yaml files, and webhook
// holds its decisions on them to inject's, so both read the cases the same way.
package goldencase
