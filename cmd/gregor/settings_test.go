package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

func TestAuthorizerSettings(t *testing.T) {
	load := func(overrides ...string) (*settings, error) {
		return loadSettings("", append([]string{"log.dirs=" + t.TempDir()}, overrides...), io.Discard)
	}
	s, err := load()
	if err != nil || s.authorizer != nil || s.brokerOpts.Authorizer != nil {
		t.Fatalf("no authorizer by default: %+v %v", s.authorizer, err)
	}
	s, err = load("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin; User:ops", "allow.everyone.if.no.acl.found=TRUE")
	if err != nil {
		t.Fatal(err)
	}
	if a := s.brokerOpts.Authorizer; a == nil || !slices.Equal(a.SuperUsers, []string{"User:admin", "User:ops"}) || !a.AllowEveryoneIfNoACLFound {
		t.Fatalf("StandardAuthorizer options %+v", a)
	}
	if _, err := load("authorizer.class.name=kafka.security.authorizer.AclAuthorizer"); err == nil ||
		!strings.Contains(err.Error(), "authorizer.class.name kafka.security.authorizer.AclAuthorizer") {
		t.Fatalf("another authorizer class: %v", err)
	}
	if _, err := load("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users=admin"); err == nil ||
		!strings.Contains(err.Error(), "expected a string in format principalType:principalName but got admin") {
		t.Fatalf("a super user without a type: %v", err)
	}
}
