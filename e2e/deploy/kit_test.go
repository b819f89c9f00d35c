package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/leafgo/leaf/internal/testutil"
)

// Environment variables naming the Prometheus binaries; scripts/services.sh
// installs Debian's and prints them.
const (
	envPrometheus = "LEAF_TEST_PROMETHEUS" // default /usr/bin/prometheus
	envPromtool   = "LEAF_TEST_PROMTOOL"   // default /usr/bin/promtool
)

// The kit's files, relative to this package's directory (where go test runs
// its tests).
const (
	alertsFile    = "prometheus/alerts.yml"
	recordingFile = "prometheus/recording.yml"
	exampleConfig = "prometheus/prometheus.yml"
	dashboardFile = "grafana/leaf.json"
	operatingDoc  = "../docs/operating.md" // its "Alerts and dashboard" section explains every alert
)

// tool returns the path of a Prometheus program, or skips the test (fails it
// under LEAF_TEST_STRICT=1) when it is not installed.
func tool(t *testing.T, env, def string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		path = def
	}
	if p, err := exec.LookPath(path); err == nil {
		return p
	}
	msg := fmt.Sprintf("no %s at %s (set %s); install it with scripts/services.sh", filepath.Base(def), path, env)
	if os.Getenv(testutil.EnvStrict) == "1" {
		t.Fatal(msg + "\n(" + testutil.EnvStrict + "=1 turns a missing service into a failure)")
	}
	t.Skip(msg)
	return ""
}

func promtool(t *testing.T) string   { return tool(t, envPromtool, "/usr/bin/promtool") }
func prometheus(t *testing.T) string { return tool(t, envPrometheus, "/usr/bin/prometheus") }

// runPromtool runs promtool with args and fails the test, with its output,
// unless it succeeds.
func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ruleFile is a Prometheus rule file, as far as the tests read it.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// readRules parses a rule file and returns its rules in order.
func readRules(t *testing.T, path string) []rule {
	t.Helper()
	var f ruleFile
	readYAML(t, path, &f)
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no rules", path)
	}
	return rules
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// aggregations are PromQL's aggregation operators: unlike functions, they
// may be followed by a grouping clause instead of a parenthesis.
var aggregations = []string{
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
	"count_values", "bottomk", "topk", "quantile",
}

// metricNames returns, sorted and without repeats, the metric names that a
// PromQL expression selects: the identifiers outside label matchers, range
// brackets and strings that are neither functions, aggregations, keywords nor
// the label lists of grouping clauses. It is a scanner, not a parser; the
// expressions it is given have passed Prometheus's own parser first.
func metricNames(expr string) []string {
	var names []string
	s := expr
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(s, i)
		case c == '{':
			i = skipBlock(s, i, '{', '}')
		case c == '[':
			i = skipBlock(s, i, '[', ']')
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number or a duration (1e3, 0.5, 5m).
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(s) && isIdent(s[i]) {
				i++
			}
			word := s[start:i]
			next := i
			for next < len(s) && (s[next] == ' ' || s[next] == '\t' || s[next] == '\n') {
				next++
			}
			lower := strings.ToLower(word)
			switch {
			case slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, lower):
				// The label list is not metric names.
				if next < len(s) && s[next] == '(' {
					i = skipBlock(s, next, '(', ')')
				}
			case slices.Contains([]string{"and", "or", "unless", "bool", "offset", "inf", "nan"}, lower):
			case slices.Contains(aggregations, lower):
			case next < len(s) && s[next] == '(':
				// A function call.
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// skipString returns the index just past the string literal that starts at
// i. Backquoted strings have no escapes.
func skipString(s string, i int) int {
	q := s[i]
	for i++; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q != '`':
			i++
		case s[i] == q:
			return i + 1
		}
	}
	return i
}

// skipBlock returns the index just past the block opened at i, nested
// blocks and strings (which may hold the closing character, as in
// route="/api/segment/get/{key}") included.
func skipBlock(s string, i int, open, close byte) int {
	depth := 0
	for i < len(s) {
		switch c := s[i]; {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(s, i)
			continue
		case c == open:
			depth++
		case c == close:
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return i
}

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`up{job="leaf"} == 0`, []string{"up"}},
		{`leaf_a < 60 and on (job, instance, tag) leaf_b == 0`, []string{"leaf_a", "leaf_b"}},
		{`sum by (job, instance) (rate(leaf_c_count{code=~"5.."}[5m])) / sum without (code) (rate(leaf_c_count[5m])) > 0.01`, []string{"leaf_c_count"}},
		{`histogram_quantile(0.99, sum by (le) (rate(leaf_h_bucket{route=~"/api/(segment|snowflake)/get/{key}|x}"}[5m])))`, []string{"leaf_h_bucket"}},
		{`a:b:rate5m / ignoring(mode) group_left c offset 5m`, []string{"a:b:rate5m", "c"}},
		{`leaf_x < Inf or leaf_y * 0 unless leaf_z > bool 1e3`, []string{"leaf_x", "leaf_y", "leaf_z"}},
		{`abs(leaf_s) > 2.5 # comment naming not_a_metric`, []string{"leaf_s"}},
		{`sum(x) by (instance) + topk(3, y) + group_left_is_a_metric`, []string{"group_left_is_a_metric", "x", "y"}},
		{"label_replace(m, 'dst', \"$1\", `src`, \"(.*)\")", []string{"m"}},
	}
	for _, tt := range tests {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}
