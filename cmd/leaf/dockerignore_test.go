package main

import (
	"os"
	"path"
	"strings"
	"testing"
)

// TestDockerignoreKeepsBuildInputs: no pattern of .dockerignore leaves out
// what the Dockerfile's build reads: the sources, go.mod and go.sum, the
// build script, the monitor page's embedded files, and .git, whose 'git
// describe' stamps the version when no VERSION is given. Patterns are
// matched as Docker does for these cases: path.Match on the path and on
// each of its parent directories, a leading "/" anchoring at the root and
// "**/" matching any depth.
func TestDockerignoreKeepsBuildInputs(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf("exception %q: this test does not read them; keep the file to plain exclusions", line)
		}
		patterns = append(patterns, strings.TrimSuffix(strings.TrimPrefix(line, "/"), "/"))
	}
	ignored := func(p string) string {
		for dir := p; dir != "."; dir = path.Dir(dir) {
			for _, pat := range patterns {
				if m, _ := path.Match(pat, dir); m {
					return pat
				}
				if rest, ok := strings.CutPrefix(pat, "**/"); ok {
					for sub := dir; ; {
						if m, _ := path.Match(rest, sub); m {
							return pat
						}
						i := strings.IndexByte(sub, '/')
						if i < 0 {
							break
						}
						sub = sub[i+1:]
					}
				}
			}
		}
		return ""
	}
	for _, p := range []string{
		"go.mod", "go.sum", ".git", ".git/HEAD", "scripts/build-static.sh",
		"cmd/leaf/main.go", "leaf.go", "httpapi/monitor/static/index.html", "cmd/leaf/internal/config/config.go",
	} {
		if pat := ignored(p); pat != "" {
			t.Errorf(".dockerignore's %q leaves out %s, which the build needs", pat, p)
		}
	}
	// The matcher is not vacuous: what the file means to leave out is.
	for _, p := range []string{"leaf-data/leaf.db", "leaf-cluster/node1.Log", "bin/leaf", "httpapi/testdata/fuzz/FuzzX/abc", "leaf"} {
		if ignored(p) == "" {
			t.Errorf(".dockerignore does not leave out %s", p)
		}
	}
}
