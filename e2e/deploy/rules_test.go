package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRulesCheck(t *testing.T) {
	out := runPromtool(t, "check", "rules", alertsFile, recordingFile)
	if got := strings.Count(out, "SUCCESS"); got != 2 {
		t.Errorf("promtool check rules: %d files succeeded, want 2:\n%s", got, out)
	}
}

// TestRulesUnit runs the promtool unit tests of every rule file.
func TestRulesUnit(t *testing.T) {
	tests, err := filepath.Glob("prometheus/*_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) < 2 {
		t.Fatalf("unit test files %q: want one for the alerts and one for the recording rules", tests)
	}
	for _, f := range tests {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out := runPromtool(t, "test", "rules", f)
			if !strings.Contains(out, "SUCCESS") {
				t.Errorf("promtool test rules %s:\n%s", f, out)
			}
		})
	}
}

// TestExampleConfig checks the example Prometheus configuration, and with it
// that its rule_files paths find the rule files.
func TestExampleConfig(t *testing.T) {
	out := runPromtool(t, "check", "config", exampleConfig)
	if !strings.Contains(out, "SUCCESS: 2 rule files found") {
		t.Errorf("promtool check config %s should find both rule files:\n%s", exampleConfig, out)
	}
}

// TestAlertsExplained checks what an operator reads when an alert fires: a
// severity, a summary and a description that explains the threshold, and
// an entry in docs/operating.md's "Alerts and dashboard" section.
func TestAlertsExplained(t *testing.T) {
	doc, err := os.ReadFile(operatingDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Alerts and dashboard\n")
	if !ok {
		t.Fatalf("%s has no \"## Alerts and dashboard\" section", operatingDoc)
	}
	section, _, _ = strings.Cut(section, "\n#") // up to the next heading
	seen := map[string]bool{}
	for _, r := range readRules(t, alertsFile) {
		if r.Alert == "" {
			t.Errorf("%s: recording rule %q among the alerts", alertsFile, r.Record)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("%s: alert %s twice", alertsFile, r.Alert)
		}
		seen[r.Alert] = true
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		if len(r.Annotations["summary"]) < 20 || len(r.Annotations["description"]) < 100 {
			t.Errorf("%s: want a summary and a description that explains the threshold, got %q", r.Alert, r.Annotations)
		}
		if !strings.Contains(section, "`"+r.Alert+"`") {
			t.Errorf("%s is not explained in %s's Alerts and dashboard section", r.Alert, operatingDoc)
		}
	}
	for _, r := range readRules(t, recordingFile) {
		if r.Record == "" || r.Alert != "" {
			t.Errorf("%s: %q is not a recording rule", recordingFile, r.Alert)
		}
	}
}

// unitTests is a promtool unit test file, as far as TestAlertsUnitTested
// reads it.
type unitTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name      string `yaml:"name"`
		AlertTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestAlertsUnitTested checks that the unit tests cover every alert both
// ways: a case where it fires, and one where it must not.
func TestAlertsUnitTested(t *testing.T) {
	var u unitTests
	readYAML(t, "prometheus/alerts_test.yml", &u)
	if !slices.Equal(u.RuleFiles, []string{filepath.Base(alertsFile)}) {
		t.Fatalf("alerts_test.yml tests %q, want %s", u.RuleFiles, filepath.Base(alertsFile))
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tc := range u.Tests {
		for _, a := range tc.AlertTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname]++
			} else {
				quiet[a.Alertname]++
			}
		}
	}
	names := map[string]bool{}
	for _, r := range readRules(t, alertsFile) {
		names[r.Alert] = true
		if fires[r.Alert] == 0 {
			t.Errorf("no unit test case where %s fires", r.Alert)
		}
		if quiet[r.Alert] == 0 {
			t.Errorf("no unit test case where %s stays quiet", r.Alert)
		}
	}
	for name := range fires {
		quiet[name]++
	}
	for name := range quiet {
		if !names[name] {
			t.Errorf("unit tests name an alert %s that alerts.yml does not define", name)
		}
	}
}
