// Package monitor is leaf's live monitor page: static assets embedded in the
// binary (no CDN), which read /v2/status and render every tag's buffers, the
// store's rows and the snowflake worker.
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
