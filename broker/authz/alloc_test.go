//go:build !race

package authz

// Allocation counts are only meaningful without the race detector, so
// this file is left out under it.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An authorization check allocates nothing, with or without ACLs.
func TestAuthorizeDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	acls := make([]metadata.ACL, 2000)
	for i := range acls {
		acls[i] = randomACL(rng)
		acls[i].ResourceName = fmt.Sprintf("%s-%d", acls[i].ResourceName, i%200)
	}
	a := New(Options{AllowEveryoneIfNoACLFound: true})
	a.Load(aclImage(t, acls))
	p := Principal{"User", "alice"}
	if n := testing.AllocsPerRun(1000, func() {
		_, _ = a.Authorize(p, "10.0.0.1", kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, "abc-17")
	}); n != 0 {
		t.Fatalf("%v allocations per check", n)
	}
}
