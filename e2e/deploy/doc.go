// Package deploy checks the operators' kit that ships beside the binary, in
// the leaf module's deploy/: the Prometheus alert and recording rules in
// deploy/prometheus (with promtool unit tests and an example scrape
// configuration) and the Grafana dashboard in deploy/grafana. Its tests run
// in that directory (TestMain). They check the rules and run their unit
// tests with promtool, check the dashboard's structure, and run a real
// Prometheus against a real leaf server to evaluate every rule and every
// dashboard query on the metrics leaf actually exports, so a renamed metric
// or label fails the suite instead of an operator's dashboard.
package deploy
