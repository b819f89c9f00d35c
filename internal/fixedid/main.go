// Command fixedid is the yardstick for HTTP benchmarks: a bare net/http
// server that answers every request with the same number, so the cost of
// leaf's request path can be compared with the cost of HTTP alone.
package main

import (
	"flag"
	"log"
	"net/http"
	"strconv"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	flag.Parse()
	body := []byte("1263177670456266794")
	ct := []string{"text/plain; charset=utf-8"}
	cl := []string{strconv.Itoa(len(body))}
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h["Content-Type"] = ct
		h["Content-Length"] = cl
		w.Write(body)
	})))
}
