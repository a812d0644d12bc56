// otlpsink receives the API server's OpenTelemetry traces (OTLP over gRPC,
// as kube-apiserver's --tracing-config-file sends them) and writes one line
// per admission webhook call it sees:
//
//	<mutating|validating> <webhook> <operation> <resource> <span µs> <request µs>
//
// The span is the API server's whole call of the webhook (from after it
// built the review to after it applied the answer); the request is from the
// span's start to its "Request completed" event (-1 when the call failed):
// the HTTP round trip as the API server's goroutine lived it, waits for a
// CPU included. hack/bench-admission.sh --trace reads the lines.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

type sink struct {
	collectortrace.UnimplementedTraceServiceServer
	mu  sync.Mutex
	out *bufio.Writer
}

func attr(attrs []*commonv1.KeyValue, key string) string {
	for _, a := range attrs {
		if a.GetKey() == key {
			if s := a.GetValue().GetStringValue(); s != "" {
				return strings.ReplaceAll(s, " ", "_")
			}
		}
	}
	return "-"
}

// line is the span's line, or "" when it is not a webhook call.
func line(s *tracev1.Span) string {
	kind := ""
	switch s.GetName() {
	case "Call mutating webhook":
		kind = "mutating"
	case "Call validating webhook":
		kind = "validating"
	default:
		return ""
	}
	start, end := s.GetStartTimeUnixNano(), s.GetEndTimeUnixNano()
	if end < start {
		return ""
	}
	req := int64(-1)
	for _, e := range s.GetEvents() {
		if e.GetName() == "Request completed" && e.GetTimeUnixNano() >= start {
			req = int64(e.GetTimeUnixNano()-start) / 1000
		}
	}
	return fmt.Sprintf("%s %s %s %s %d %d\n", kind, attr(s.GetAttributes(), "webhook"),
		attr(s.GetAttributes(), "operation"), attr(s.GetAttributes(), "resource"), (end-start)/1000, req)
}

func (k *sink) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				if l := line(s); l != "" {
					k.out.WriteString(l)
				}
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, k.out.Flush()
}

func main() {
	listen := flag.String("listen", "127.0.0.1:4317", "address to serve OTLP/gRPC on (loopback)")
	outPath := flag.String("out", "", "file the lines are appended to (required)")
	flag.Parse()
	if *outPath == "" {
		log.Fatal("otlpsink: --out is required")
	}
	f, err := os.OpenFile(*outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		log.Fatalf("otlpsink: %v", err)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("otlpsink: %v", err)
	}
	// The API server's batches carry hundreds of spans.
	s := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	collectortrace.RegisterTraceServiceServer(s, &sink{out: bufio.NewWriter(f)})
	log.Fatal(s.Serve(l))
}
