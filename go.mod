module github.com/gregorbroker/gregor

go 1.26.8

require (
	github.com/golang/snappy v1.0.0
	github.com/klauspost/compress v1.20.3
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	go.etcd.io/raft/v3 v3.7.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/pavlo-v-chernykh/keystore-go/v4 v4.5.0
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	go.opentelemetry.io/proto/otlp v1.11.1
	software.sslmate.com/src/go-pkcs12 v0.7.3
)

require golang.org/x/crypto v0.59.0 // indirect
