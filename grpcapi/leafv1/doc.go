// Package leafv1 is the Go code generated from proto/leaf/v1/leaf.proto: the
// messages of the leaf.v1 API and the client and server of its Leaf service.
// The service is implemented by package grpcapi.
//
// Do not edit the *.pb.go files: change the .proto and run
// scripts/gen-proto.sh (scripts/gen-proto.sh --check tells whether they are
// up to date).
package leafv1
