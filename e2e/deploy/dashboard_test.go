package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// dashboard is a Grafana dashboard's JSON model, as far as the tests read it.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"` // a collapsed row's
}

type target struct {
	Expr       string      `json:"expr"`
	RefID      string      `json:"refId"`
	Datasource *datasource `json:"datasource"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string      `json:"name"`
	Type       string      `json:"type"`
	Query      any         `json:"query"` // a string, or {"query": "..."} for Prometheus query variables
	Datasource *datasource `json:"datasource"`
	AllValue   string      `json:"allValue"`
	IncludeAll bool        `json:"includeAll"`
}

// query is a query variable's query: label_values(...) and the like.
func (v variable) query() string {
	switch q := v.Query.(type) {
	case string:
		return q
	case map[string]any:
		s, _ := q["query"].(string)
		return s
	}
	return ""
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels returns the panels, those inside collapsed rows included.
func (d dashboard) allPanels() []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// dashQuery is one PromQL query of the dashboard, with where it comes from.
type dashQuery struct {
	where string // panel title and refId, or the variable
	expr  string
}

func (d dashboard) queries() []dashQuery {
	var qs []dashQuery
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			qs = append(qs, dashQuery{fmt.Sprintf("panel %q, query %s", p.Title, tg.RefID), tg.Expr})
		}
	}
	return qs
}

// builtinVars are the Grafana variables the dashboard may use without
// defining them.
var builtinVars = map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}

var varRE = regexp.MustCompile(`\$(?:(\w+)|\{(\w+)(?::\w+)?\})`)

// TestDashboardStructure checks what Grafana would only show when the
// dashboard is imported: every panel placed on the grid without overlap,
// with unique IDs, reading the data source variable; every query named and
// using only defined variables; and the instance variable that selects the
// server.
func TestDashboardStructure(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v := vars["datasource"]; v.Type != "datasource" || v.Query != "prometheus" {
		t.Errorf("variable datasource = %+v, want a Prometheus data source variable", v)
	}
	for _, name := range []string{"job", "instance"} {
		v := vars[name]
		if v.Type != "query" || !strings.HasPrefix(v.query(), "label_values(") || !strings.HasSuffix(v.query(), ", "+name+")") {
			t.Errorf("variable %s = %+v, want label_values(..., %s)", name, v, name)
		}
		if !v.IncludeAll || v.AllValue != ".+" {
			t.Errorf("variable %s: want All, matching .+", name)
		}
	}

	ids := map[int]string{}
	var placed []panel
	targets := 0
	for _, p := range d.allPanels() {
		if prev, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, g)
		}
		for _, q := range placed {
			h := q.GridPos
			if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				t.Errorf("panels %q and %q overlap", p.Title, q.Title)
			}
		}
		placed = append(placed, p)
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			targets++
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: refId %q missing or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q, query %s: no expression", p.Title, tg.RefID)
			}
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q, query %s: datasource %+v, want ${datasource}", p.Title, tg.RefID, tg.Datasource)
			}
			if !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q, query %s does not follow the instance variable: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
	}
	if targets < 20 {
		t.Errorf("%d queries: the dashboard has lost its panels", targets)
	}
	for _, q := range append(d.queries(), dashQuery{"variable instance", vars["instance"].query()}) {
		for _, m := range varRE.FindAllStringSubmatch(q.expr, -1) {
			name := m[1] + m[2]
			if _, ok := vars[name]; !ok && !builtinVars[name] {
				t.Errorf("%s uses $%s, which is not defined", q.where, name)
			}
		}
	}
}
