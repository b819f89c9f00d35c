// Package openapi holds httpapi's openapi.json to the server from both
// sides: the document is a valid OpenAPI 3.1 document, its paths and
// methods are exactly the server's routes and its error codes the error
// table's (document_test.go), and the real binary's answers, successes and
// errors, match it (TestOpenAPIConformance). It lives in the e2e module so
// that the OpenAPI library stays out of the leaf module's requirements.
package openapi
