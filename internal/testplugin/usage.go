package testplugin

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// UsageMethod is the full name of the method that reports the plugin
// process's Usage (RegisterUsage, ReadUsage).
const UsageMethod = "/respawn.test.v1.Usage/Read"

// Usage is what a process has used since it started: the CPU time of all
// its threads, user and system (zero where the platform cannot tell), and
// the heap objects it has allocated.
type Usage struct {
	CPU     time.Duration
	Mallocs uint64
}

// usageDesc serves UsageMethod. Its handler does not call the server's
// interceptors: a benchmark that reads the usage before and after its
// calls counts only what the calls cost, whatever interceptors it measures.
var usageDesc = grpc.ServiceDesc{
	ServiceName: "respawn.test.v1.Usage",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Read",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			cpu, err := ProcessCPU()
			if err != nil {
				return nil, err
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return structpb.NewStruct(map[string]any{"cpu_ns": float64(cpu), "mallocs": float64(m.Mallocs)})
		},
	}},
}

// RegisterUsage registers the service that reports this process's Usage
// on s.
func RegisterUsage(s grpc.ServiceRegistrar) { s.RegisterService(&usageDesc, struct{}{}) }

// ReadUsage asks the plugin behind cc for its Usage.
func ReadUsage(ctx context.Context, cc grpc.ClientConnInterface) (Usage, error) {
	var out structpb.Struct
	if err := cc.Invoke(ctx, UsageMethod, &emptypb.Empty{}, &out); err != nil {
		return Usage{}, err
	}
	f := out.GetFields()
	cpu, mallocs := f["cpu_ns"], f["mallocs"]
	if cpu == nil || mallocs == nil {
		return Usage{}, fmt.Errorf("%s: answer without cpu_ns or mallocs: %v", UsageMethod, f)
	}
	return Usage{CPU: time.Duration(cpu.GetNumberValue()), Mallocs: uint64(mallocs.GetNumberValue())}, nil
}
