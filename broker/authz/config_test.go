package authz

import (
	"slices"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/broker/config"
)

func TestOptionsFromConfig(t *testing.T) {
	load := func(kv ...string) (*Options, error) {
		overrides := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			overrides[kv[i]] = kv[i+1]
		}
		cfg, _, err := config.Load(config.EmbeddedDefaults(), overrides)
		if err != nil {
			t.Fatal(err)
		}
		return OptionsFromConfig(cfg)
	}
	if o, err := load(); err != nil || o != nil {
		t.Fatalf("no authorizer by default: %+v %v", o, err)
	}
	o, err := load("authorizer.class.name", StandardAuthorizerClass,
		"super.users", "User:admin; User:ops", "allow.everyone.if.no.acl.found", "TRUE")
	if err != nil || o == nil || !slices.Equal(o.SuperUsers, []string{"User:admin", "User:ops"}) || !o.AllowEveryoneIfNoACLFound {
		t.Fatalf("StandardAuthorizer options %+v, %v", o, err)
	}
	if _, err := load("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer"); err == nil ||
		!strings.Contains(err.Error(), "authorizer.class.name kafka.security.authorizer.AclAuthorizer") {
		t.Fatalf("another authorizer class: %v", err)
	}
	if _, err := load("authorizer.class.name", StandardAuthorizerClass, "super.users", "admin"); err == nil ||
		!strings.Contains(err.Error(), "expected a string in format principalType:principalName but got admin") {
		t.Fatalf("a super user without a type: %v", err)
	}
}
