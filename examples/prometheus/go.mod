module github.com/grpc-respawn/respawn/examples/prometheus

go 1.26.0

// The respawn checkout this directory sits in. Copied out of it, run
// go mod edit -replace github.com/grpc-respawn/respawn=/path/to/respawn, or
// drop this replace and go get a published version (see main.go).
replace github.com/grpc-respawn/respawn => ../..

require (
	github.com/grpc-respawn/respawn v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/common v0.72.0
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
)
