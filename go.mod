module github.com/gregorbroker/gregor

go 1.26.8

require github.com/twmb/franz-go/pkg/kmsg v1.15.1

require github.com/twmb/franz-go v1.22.3
