// Package metadata is Gregor's cluster model, apart from the quorum that
// agrees on it: the immutable Image of the committed metadata log, the
// records that change it with their versioned encodings, and replay
// (applying a batch of records to an image copy-on-write, and the records
// that rebuild an image, which are a snapshot's content). It also owns the
// model's types the rest of the tree reads and the controller decides
// with: ACLs and Kafka's ACL filter, client quota entities and keys,
// config resources and the config schema the controller validates
// against, feature names and levels, SCRAM credentials, delegation
// tokens, topic name validation, and the two values a request's context
// carries to the controller's decisions (the principal it acts for, its
// controller mutation quota).
//
// It decides nothing: which records to write is the controller's
// (package controller proposes them through raft and applies the committed
// ones with ApplyBatch, then publishes each new image), and brokers,
// replicas and coordinators only read images.
//
// Imports: of Gregor's own packages, protocol and config only (the
// README's import table, which internal/layout enforces), besides the
// standard library and franz-go's kbin and kmsg. Never controller, sasl,
// raft or anything networking: the image keeps SCRAM credentials as its own
// ScramCredential, which the broker copies into sasl's type when it looks
// one up, and the controller computes delegation token HMACs itself.
//
// Files:
//
//	image.go       Image and what it holds (Topic, Partition, Broker,
//	               Endpoint, Voter, ConfigResource), ImageDigest
//	records.go     Record, the record types and their versioned encoding
//	               (EncodeRecords, DecodeRecords)
//	replay.go      copy-on-write application of records to an Image
//	               (ApplyBatch), and the records that rebuild an Image
//	               (ImageRecords, ImageFromRecords)
//	persist/       the persistent map and vector the image's topics and
//	               partitions are built of, and their diffs
//	acls.go        ACL records, ACLSet, ACLFilter and Kafka's names of the
//	               ACL enums
//	quotas.go      ClientQuotaRecord, quota entities and keys, the
//	               request's mutation quota
//	scram.go       SCRAM credential records and ScramCredential
//	delegationtokens.go  delegation token records, DelegationToken, the
//	               request's principal
//	features.go    feature names and the levels this build runs
//	topicnames.go  Kafka's topic name rules (TopicNameError)
//	configs.go     ConfigSchema
package metadata
