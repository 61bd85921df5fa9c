package ssl

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

// dnAttr is one attribute of a test subject: an object identifier and its
// value's tag and content bytes.
type dnAttr struct {
	oid   asn1.ObjectIdentifier
	tag   int
	bytes []byte
}

var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOU     = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidO      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidC      = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidSerial = asn1.ObjectIdentifier{2, 5, 4, 5}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
)

func utf8Attr(oid asn1.ObjectIdentifier, s string) dnAttr {
	return dnAttr{oid, tagUTF8String, []byte(s)}
}

func bmp(s string) []byte {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u>>8), byte(u))
	}
	return b
}

// rawName encodes RDNs given first-to-last as they appear in the
// certificate (the reverse of the printed order).
func rawName(t testing.TB, rdns ...[]dnAttr) []byte {
	t.Helper()
	var seq pkix.RDNSequence
	for _, rdn := range rdns {
		var set pkix.RelativeDistinguishedNameSET
		for _, a := range rdn {
			set = append(set, pkix.AttributeTypeAndValue{Type: a.oid, Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: a.tag, Bytes: a.bytes}})
		}
		seq = append(seq, set)
	}
	der, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// dnCases are subjects and what Java 17's X500Principal.getName() prints
// for them (checked against the JDK by TestDistinguishedNameMatchesJava).
func dnCases(t testing.TB) []struct {
	raw  []byte
	want string
} {
	one := func(a ...dnAttr) []dnAttr { return a }
	return []struct {
		raw  []byte
		want string
	}{
		{rawName(t, one(dnAttr{oidC, tagPrintableString, []byte("GB")}), one(utf8Attr(oidO, "Gregor")), one(utf8Attr(oidOU, "eng")), one(utf8Attr(oidCN, "alice"))),
			"CN=alice,OU=eng,O=Gregor,C=GB"},
		{rawName(t, one(utf8Attr(oidCN, `a,b+c=d<e>f#g;h"i\j`))), `CN=a\,b\+c\=d\<e\>f\#g\;h\"i\\j`},
		{rawName(t, one(utf8Attr(oidCN, "  two  "))), `CN=\ \ two\ \ `},
		{rawName(t, one(utf8Attr(oidCN, "   "))), `CN=\ \ \ `},
		{rawName(t, one(utf8Attr(oidCN, "\r x \r"))), "CN=\\\r\\ x\\ \\\r"},
		{rawName(t, one(utf8Attr(oidCN, "#lead"))), `CN=\#lead`},
		{rawName(t, one(utf8Attr(oidCN, "nul\x00here"))), `CN=nul\00here`},
		{rawName(t, one(utf8Attr(oidCN, "Zoë 世界 😀 a_b@c*d"))), "CN=Zoë 世界 😀 a_b@c*d"},
		{rawName(t, one(utf8Attr(oidCN, ""))), "CN="},
		{rawName(t, one(utf8Attr(oidCN, "bad\xffutf8"))), "CN=bad\ufffdutf8"},
		// JDK 17 reads every string type as UTF-8.
		{rawName(t, one(dnAttr{oidCN, tagBMPString, bmp("Ünï")})), "CN=\\00\ufffd\\00n\\00\ufffd"},
		{rawName(t, one(dnAttr{oidCN, tagT61String, []byte{'c', 0xe9}})), "CN=c\ufffd"},
		{rawName(t, one(utf8Attr(oidCN, "a\xe4\xb8b"))), "CN=a\ufffdb"},
		{rawName(t, one(utf8Attr(oidCN, "a\xf0\x9f\x98"))), "CN=a\ufffd"},
		{rawName(t, one(utf8Attr(oidCN, "\xed\xa0\x80x"))), "CN=\ufffdx"},
		{rawName(t, one(utf8Attr(oidCN, "\xc0\xafz"))), "CN=\ufffd\ufffdz"},
		{rawName(t, one(dnAttr{oidCN, tagPrintableString, []byte("\xf4\x90\x80\x80")})), "CN=\ufffd\ufffd\ufffd\ufffd"},
		{rawName(t, one(dnAttr{oidCN, tagIA5String, []byte("ia5")}), one(dnAttr{oidDC, tagIA5String, []byte("example")})), "DC=example,CN=ia5"},
		// The attributes of an RDN in their encoded (DER: sorted) order.
		{rawName(t, one(utf8Attr(oidUID, "u1"), utf8Attr(oidCN, "multi"))), "CN=multi+UID=u1"},
		{rawName(t, one(dnAttr{oidEmail, tagIA5String, []byte("a@b.c")}), one(utf8Attr(oidCN, "x"))), "CN=x,1.2.840.113549.1.9.1=#16056140622e63"},
		{rawName(t, one(dnAttr{oidSerial, tagPrintableString, []byte("42")})), "2.5.4.5=#13023432"},
		{rawName(t, one(dnAttr{oidCN, asn1.TagInteger, []byte{5}})), "CN=#020105"},
		{rawName(t, one(utf8Attr(asn1.ObjectIdentifier{1, 2, 3, 4}, "x"))), "1.2.3.4=#0c0178"},
	}
}

func TestDistinguishedName(t *testing.T) {
	for _, c := range dnCases(t) {
		got, err := DistinguishedName(c.raw)
		if err != nil || got != c.want {
			t.Errorf("%x: got %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
	for _, bad := range [][]byte{nil, {0x30}, {0x30, 0x02, 0x05, 0x00}, {0x30, 0x02, 0x31, 0x00}, append(rawName(t, []dnAttr{utf8Attr(oidCN, "a")}), 0)} {
		if got, err := DistinguishedName(bad); err == nil {
			t.Errorf("%x read as %q", bad, got)
		}
	}
}

// The expected strings above are what the JDK prints: checked here with
// the JDK itself when there is one.
func TestDistinguishedNameMatchesJava(t *testing.T) {
	if testing.Short() {
		t.Skip("runs java")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "Names.java")
	if err := os.WriteFile(src, []byte(`import javax.security.auth.x500.X500Principal;
import java.nio.file.*;
import java.util.HexFormat;
public class Names {
  public static void main(String[] a) throws Exception {
    for (String line : Files.readAllLines(Path.of(a[0]))) {
      String name = new X500Principal(HexFormat.of().parseHex(line)).getName();
      System.out.println(HexFormat.of().formatHex(name.getBytes("UTF-8")));
    }
  }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := dnCases(t)
	var in bytes.Buffer
	for _, c := range cases {
		in.WriteString(hex.EncodeToString(c.raw) + "\n")
	}
	input := filepath.Join(dir, "names.txt")
	if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, java, src, input).Output()
	if err != nil {
		t.Skipf("java could not run the check: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for i := 0; sc.Scan(); i++ {
		b, _ := hex.DecodeString(strings.TrimSpace(sc.Text()))
		if i >= len(cases) {
			t.Fatalf("java printed more names than it was given")
		}
		if string(b) != cases[i].want {
			t.Errorf("case %d: java prints %q, the test expects %q", i, b, cases[i].want)
		}
	}
}

func FuzzDistinguishedName(f *testing.F) {
	for _, c := range dnCases(f) {
		f.Add(c.raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = DistinguishedName(raw)
	})
}
