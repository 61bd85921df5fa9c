// Package decide holds the controller's decisions: for each request the
// controller decides (CreateTopics, configs, ACLs, client quotas, SCRAM
// credentials, delegation tokens, elections, reassignments, AlterPartition,
// feature levels, producer-id blocks) a function from the latest image and
// the request to the records that carry it out and the answer the
// requester gets once they are committed, as Kafka's control managers
// return a ControllerResult; its failed answer (the answer for the whole
// request when the records are not committed); the Error the answers are
// made of; the partition-change builder every leadership and ISR change
// goes through (partitionchange.go), replica placement (placement.go), and
// the records of the changes the controller makes on its own (fencing,
// unfencing and controlled shutdown of brokers, registrations, periodic
// elections, the sweep of expired delegation tokens).
//
// A decision is a method of *Env,
//
//	func (e *Env) CreateACLs(ctx, img *metadata.Image, offset int64, req) ([]metadata.Record, resp)
//
// that reads only its Env (the controller's configuration, clock, random
// source and logger), the image (committed plus in flight, at the log
// offset offset its records will get), the request and the request's
// context values (the requester's principal, its mutation quota); its
// failed answer is a function, CreateACLsFailed(req, *Error). Tests call
// them on an image they build, without a quorum. The controller
// (package controller) runs them one at a time on its loop, proposes the
// records, and answers once they are committed.
//
// The package may import metadata, protocol, config and sasl of Gregor's
// packages, franz-go's kmsg and kerr and the standard library; never
// etcd raft or the controller (README.md, "What each package may import").
package decide
