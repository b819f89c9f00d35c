// Command fixedid is the yardstick for HTTP benchmarks: a bare fasthttp
// server, the library leaf's HTTP path uses, that answers every request with
// the same number. The ratio of leaf's requests/s to its isolates what leaf
// adds (routing, validation, issuing, metrics) from the HTTP stack.
//
//	fixedid --listen 127.0.0.1:8090
package main

import (
	"flag"
	"log"

	"github.com/valyala/fasthttp"
)

// body is a snowflake-sized ID, so the server writes as many bytes as leaf.
var body = []byte("1263177670456266794")

func main() {
	addr := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	flag.Parse()
	ct := []byte("text/plain; charset=utf-8")
	s := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.SetContentTypeBytes(ct)
			ctx.Response.SetBodyRaw(body)
		},
		// As leaf's server: no Server header to write.
		NoDefaultServerHeader: true,
	}
	log.Fatal(s.ListenAndServe(*addr))
}
