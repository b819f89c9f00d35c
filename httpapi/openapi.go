package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 description of every route, kept beside the
// code it describes. Tests check the server's answers and its route table
// against it (openapi_test.go here, and cmd/leaf against the real binary),
// so a route or an answer that changes without it fails them.
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI serves GET /openapi.json: the document, for tools that build
// clients or browse the API from a running server.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	writeBody(w, r, http.StatusOK, appJSON, openAPIDoc)
}
