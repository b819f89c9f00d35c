// Package monitor is leaf's live monitor page: static assets embedded in the
// binary (no CDN), which poll the bounded /v2/status/summary (the busiest
// and the degraded tags' buffers, totals, the snowflake worker) and the
// new samples of /v2/status/history (drawn as inline SVG charts of the
// last 10 minutes), find tags
// by name through the paged /v2/status and /v2/tags, and page through the
// store's rows, so that the page works the same with 100,000 tags.
package monitor

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Prefix is the path the page is served under.
const Prefix = "/monitor/"

// Handler serves the page's files under Prefix.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.StripPrefix(Prefix, http.FileServerFS(sub))
}
