package authz

import (
	"net/netip"
	"strconv"
	"strings"
)

// Principal is a Kafka principal: a type (User for every principal Kafka's
// default builder makes) and a name.
type Principal struct {
	Type string
	Name string
}

// UserType is the type of every principal Kafka's default principal
// builder makes.
const UserType = "User"

// Anonymous is the principal of an unauthenticated connection.
var Anonymous = Principal{Type: UserType, Name: "ANONYMOUS"}

// String is Kafka's form, "User:alice".
func (p Principal) String() string { return p.Type + ":" + p.Name }

// HostAddress writes an address as Java's InetAddress.getHostAddress
// does, which is what ACL hosts are compared with: dotted quads for IPv4
// (and IPv4-mapped IPv6, which Java reads as IPv4), eight hexadecimal
// groups without leading zeros or "::" for IPv6, with "%zone" when scoped.
func HostAddress(a netip.Addr) string {
	a = a.Unmap()
	if !a.IsValid() {
		return ""
	}
	if a.Is4() {
		return a.String()
	}
	b := a.As16()
	var sb strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(strconv.FormatUint(uint64(b[i])<<8|uint64(b[i+1]), 16))
	}
	if z := a.Zone(); z != "" {
		sb.WriteByte('%')
		sb.WriteString(z)
	}
	return sb.String()
}
