module sandbox.dev/hack/otlpsink

go 1.25.0

require (
	go.opentelemetry.io/proto/otlp v1.5.0
	google.golang.org/grpc v1.72.2
)

require (
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.25.1 // indirect
	golang.org/x/net v0.35.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
	golang.org/x/text v0.22.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20250218202821-56aae31c358a // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250218202821-56aae31c358a // indirect
	google.golang.org/protobuf v1.36.5 // indirect
)
