package httpapi

import (
	"bytes"
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 description of every route, kept beside the
// code it describes. Tests check it against the server's route table and
// the real binary's answers (the e2e module's openapi package, which holds
// the OpenAPI library), so a route or an answer that changes without it
// fails them.
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI serves GET /openapi.json: the document, for tools that build
// clients or browse the API from a running server.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	writeBody(w, r, http.StatusOK, appJSON, openAPIDoc)
}

// OpenAPIDocument returns the OpenAPI 3.1 document the server serves at
// /openapi.json (a copy: the caller may change it).
func OpenAPIDocument() []byte { return bytes.Clone(openAPIDoc) }
