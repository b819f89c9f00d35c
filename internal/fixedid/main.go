// Command fixedid is the yardstick for HTTP benchmarks: a bare server that
// answers every request with the same number, so the cost of leaf's request
// path can be compared with the cost of HTTP alone.
//
// By default it is a net/http server; with --fasthttp it is a fasthttp one,
// the same library leaf's HTTP path uses, so the ratio to it isolates what
// leaf adds (routing, validation, issuing, metrics) from the HTTP stack.
//
//	fixedid --listen 127.0.0.1:8090 [--fasthttp]
package main

import (
	"flag"
	"log"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"
)

// body is a snowflake-sized ID, so both servers write as many bytes as leaf.
var body = []byte("1263177670456266794")

func main() {
	addr := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	fast := flag.Bool("fasthttp", false, "serve with fasthttp instead of net/http")
	flag.Parse()
	if *fast {
		log.Fatal(serveFast(*addr))
	}
	log.Fatal(serveNetHTTP(*addr))
}

func serveNetHTTP(addr string) error {
	// The header values are built once: the handler allocates nothing.
	ct := []string{"text/plain; charset=utf-8"}
	cl := []string{strconv.Itoa(len(body))}
	return http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h["Content-Type"] = ct
		h["Content-Length"] = cl
		w.Write(body)
	}))
}

func serveFast(addr string) error {
	ct := []byte("text/plain; charset=utf-8")
	s := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.SetContentTypeBytes(ct)
			ctx.Response.SetBodyRaw(body)
		},
		// As leaf's server: no Server header to write.
		NoDefaultServerHeader: true,
	}
	return s.ListenAndServe(addr)
}
