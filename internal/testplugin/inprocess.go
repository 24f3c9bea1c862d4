package testplugin

import (
	"net"

	"google.golang.org/grpc"
)

// ServeUnix serves the test service, journaling to journalPath (see New),
// in this process on a unix socket at sock, until the returned server is
// stopped.
func ServeUnix(sock, journalPath string) (*grpc.Server, error) {
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	s := grpc.NewServer()
	Register(s, New(journalPath))
	go func() { _ = s.Serve(lis) }()
	return s, nil
}
