// Package testpb holds the generated code for the Test service that respawn's
// tests and benchmarks run in a real plugin process. Its methods cover every
// idempotency level (no side effects, idempotent, non-idempotent), server
// streaming, and handler-returned errors.
package testpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative test.proto
